"""The ``much`` command line: ``much run`` (baselines + evaluation), ``much evaluate`` (score a signal file).

Each subcommand lives in ``much_metric/cli/<name>.py`` and exposes ``register(subparsers)``, which adds its
parser and sets ``func`` (a callable taking the parsed namespace and returning an exit code). Command modules
import their heavy dependencies inside ``func`` so that ``much --help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys

COMMANDS = ("run", "evaluate", "segment", "monitor", "neighbours")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="much", description=__doc__.splitlines()[0])
    subparsers = parser.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        importlib.import_module(f"much_metric.cli.{name}").register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
