"""The ``much`` command line: ``much run`` (baselines + evaluation), ``much evaluate`` (score a signal file).

Each subcommand lives in ``much_metric/cli/<name>.py`` and exposes ``register(subparsers)``, which adds its
parser and sets ``func`` (a callable taking the parsed namespace and returning an exit code). Command modules
import their heavy dependencies inside ``func`` so that ``much --help`` stays fast.

Errors: :func:`main` checks the shared arguments first (:mod:`much_metric.cli._preflight`: inputs exist, outputs
writable, ``--generation-time`` valid, hub reachable), then runs the subcommand in
:func:`much_metric.commands.run_command`, the error loop ``python -m builder`` and ``much-leaderboard`` share:
every expected failure (:data:`EXPECTED_ERRORS`) is one line ``much <cmd>: error: <message>`` and exit code 2, a
bug one line naming its type and exit code 1, Ctrl+C exit code 130. ``much --traceback <cmd>`` or ``MUCH_DEBUG=1``
re-raises instead, for developers.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# The one error loop of the three commands (much, python -m builder, much-leaderboard) lives in much_metric.commands;
# its public names stay importable from here.
from much_metric.commands import EXPECTED_ERRORS as EXPECTED_ERRORS
from much_metric.commands import debug_requested, run_command
from much_metric.commands import error_message as error_message
from much_metric.commands import install_hint as install_hint

COMMANDS = ("run", "evaluate", "calibrate", "segment", "monitor", "neighbours", "train", "install-metric",
            "leaderboard")

#: ``much --help``'s first line (plain text: argparse prints it as is).
DESCRIPTION = "The much command line: run the baselines, evaluate signal files, segment, monitor, train, serve."

#: ``much --help``'s last lines: where Python users go, and the evaluate error they meet before install-metric.
EPILOG = ("From Python, score a method with much_metric.score(token_scores, token_chunks, labels, stopword_mask) "
          "on much_dataset.load(...) data. evaluate.load(\"much\") works only after 'much install-metric' (once per "
          "machine); before it, evaluate fails with its own message \"Couldn't find a module script at "
          ".../much/much.py\".")


def build_parser() -> argparse.ArgumentParser:
    from much_dataset._version import __version__

    parser = argparse.ArgumentParser(prog="much", description=DESCRIPTION, epilog=EPILOG)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--traceback", action="store_true",
                        help="show the full traceback of an error instead of one line (also: MUCH_DEBUG=1)")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        importlib.import_module(f"much_metric.cli.{name.replace('-', '_')}").register(subparsers)
    from much_metric.cli._text import plain_help

    plain_help(parser)  # the subcommands' help reuses their reST docstrings: show plain text
    return parser


def main(argv: list[str] | None = None) -> int:
    from much_dataset._transformers import quiet_torch_notice
    from much_metric._progress import library_bars_off

    args = build_parser().parse_args(argv)
    try:
        # the light install has no torch: the commands need transformers' tokenizers only
        with quiet_torch_notice(), library_bars_off(bool(getattr(args, "no_progress", False))):
            return _run(args)
    finally:
        # Objects of a failed load (a parquet reader or dataset scanner held by the exception's frames, often in
        # reference cycles) would otherwise be freed only at interpreter teardown, after Arrow's thread pools and
        # memory pools are gone: their worker threads then abort the process ("terminate called without an active
        # exception", exit 134) after the error line was printed. Collecting them here, while Arrow is alive,
        # joins those threads and keeps the exit code.
        import gc

        gc.collect()


def _run(args: argparse.Namespace) -> int:
    def command() -> int:
        from much_metric.cli._preflight import check_arguments

        check_arguments(args)
        return int(args.func(args) or 0)

    return run_command(f"much {args.command}", command, debug=debug_requested(args.traceback),
                       subcommand=args.command)


if __name__ == "__main__":
    sys.exit(main())
