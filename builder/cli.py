"""Dispatcher of ``python -m builder <step>``.

Each step is a module ``builder/<module>.py`` exposing ``add_arguments(parser)`` and ``run(args) -> int``. Common
options (``--out``, ``--shard``) are added here so every step spells them the same way. Step modules import heavy
dependencies inside ``run``.

Steps and their helpers raise exceptions (:class:`builder.errors.BuilderError` for a step that cannot run as asked);
this entry point alone turns them into one line ``builder <step>: error: ...`` on stderr, through
:func:`much_metric.commands.run_command`, the error loop ``much`` and ``much-leaderboard`` share: exit code 2 for
an expected failure (a ``BuilderError``, a bad ``--shard``, a corrupt artifact, a missing package), 1 for a bug (the
line names its type), 130 on Ctrl+C. ``python -m builder --traceback <step>`` (or ``MUCH_DEBUG=1``) re-raises it
with its traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

from much_metric.commands import debug_requested, run_command

# step name on the command line -> module under builder/
STEPS: dict[str, str] = {
    "questions": "questions",
    "generate": "generate",
    "replay": "replay",
    "internals": "internals",
    "verify": "verify",
    "segment": "segment",
    "import-mushroom": "import_mushroom",
    "wiki": "wiki",
    "context": "context",
    "annotate": "annotate",
    "filter": "filter",
    "human": "human",
    "agreement": "agreement",
    "export": "export",
    "push": "push",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m builder", description="Regenerate the MUCH dataset.")
    parser.add_argument("--traceback", action="store_true",
                        help="show the full traceback of an error instead of one line (also: MUCH_DEBUG=1)")
    subparsers = parser.add_subparsers(dest="step", required=True)
    for step, module_name in STEPS.items():
        try:
            module = importlib.import_module(f"builder.{module_name}")
        except ModuleNotFoundError as error:
            if error.name != f"builder.{module_name}":
                raise
            continue  # step not implemented in this checkout
        doc = (module.__doc__ or step).strip().splitlines()[0]
        step_parser = subparsers.add_parser(step, help=doc, description=module.__doc__,
                                            formatter_class=argparse.RawDescriptionHelpFormatter)
        step_parser.add_argument("--out", required=True, help="artifact folder (JSONL per step)")
        step_parser.add_argument("--shard", default=None, help="i/n: process every n-th item starting at i")
        module.add_arguments(step_parser)
        step_parser.set_defaults(func=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    def command() -> int:
        from builder._locks import clean_stale

        # Leftovers of killed runs (temporary copies whose writer is gone) are removed before any step.
        for folder in (Path(args.out), Path(args.out) / "rows"):
            clean_stale(folder)
        return int(args.func(args) or 0)

    return run_command(f"builder {args.step}", command, debug=debug_requested(args.traceback))


if __name__ == "__main__":
    sys.exit(main())
