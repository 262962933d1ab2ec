import sys

from much_metric.cli import main

sys.exit(main())
