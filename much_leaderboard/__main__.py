"""``python -m much_leaderboard serve ...``: the same command as ``much-leaderboard``."""

import sys

from much_leaderboard._cli import main

if __name__ == "__main__":
    sys.exit(main())
