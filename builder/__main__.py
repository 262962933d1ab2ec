import sys

from builder.cli import main

if __name__ == "__main__":  # vLLM spawns worker processes that re-import the main module
    sys.exit(main())
