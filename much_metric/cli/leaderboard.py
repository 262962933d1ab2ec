"""``much leaderboard``: moved. The leaderboard server is its own package (``much_leaderboard``), so the metric
installs no web framework: run ``much-leaderboard serve`` (or ``python -m much_leaderboard serve``) with the extra
``leaderboard``. This command only says so, in one line (exit 2)."""

from __future__ import annotations

import argparse

#: The one-line hint ``much leaderboard`` prints.
MOVED = ("the leaderboard server moved to its own command: much-leaderboard serve [options] "
         "(or python -m much_leaderboard serve; from the toolkit's checkout: pip install '.[leaderboard]')")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("leaderboard", help="moved: use much-leaderboard serve", description=__doc__,
                                   add_help=False)
    parser.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    raise ValueError(MOVED)
