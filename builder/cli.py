"""Dispatcher of ``python -m builder <step>``.

Each step is a module ``builder/<module>.py`` exposing ``add_arguments(parser)`` and ``run(args) -> int``. Common
options (``--out``, ``--shard``) are added here so every step spells them the same way. Step modules import heavy
dependencies inside ``run``.

Output rules (:func:`much_metric.fileio.check_outputs`, before any work): a step declares what it reads and writes
as module attributes, ``READS`` (the names of its arguments that name an input file or folder; default
:data:`DEFAULT_READS`) and ``WRITES`` (glob patterns, relative to ``--out``, of the files it writes there); an input
that is one of those files (``builder verify --source D/verify.json --out D``) is refused. A new step (``samples``,
withheld-label files) declares its own and gets the rule.

Steps and their helpers raise exceptions (:class:`builder.errors.BuilderError` for a step that cannot run as asked);
this entry point alone turns them into one line ``builder <step>: error: ...`` on stderr, through
:func:`much_metric.commands.run_command`, the error loop ``much`` and ``much-leaderboard`` share: exit code 2 for
an expected failure (a ``BuilderError``, a bad ``--shard``, a corrupt artifact, a missing package), 1 for a bug (the
line names its type), 130 on Ctrl+C (SIGINT), 143 on SIGTERM. ``python -m builder --traceback <step>`` (or
``MUCH_DEBUG=1``) re-raises it with its traceback. A step stopped by a signal or an error first terminates every
process it started (:mod:`builder._processes`: vLLM's engine core and workers included).
"""

from __future__ import annotations

import argparse
import fnmatch
import importlib
import math
import re
import sys
from pathlib import Path
from types import ModuleType

from much_metric.commands import debug_requested, run_command

# step name on the command line -> module under builder/
STEPS: dict[str, str] = {
    "questions": "questions",
    "generate": "generate",
    "replay": "replay",
    "internals": "internals",
    "samples": "samples",
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


def step_summary(doc: str | None, step: str) -> str:
    """A step's line in ``python -m builder --help``: the first sentence of its module docstring, whole (its first
    paragraph may wrap over several lines), without the leading ``step:`` and the reST literals' backquotes.

    >>> from builder.cli import step_summary
    >>> step_summary("push: publish ``<out>/much`` to a hub repository in ONE commit. More.", "push")
    'publish <out>/much to a hub repository in ONE commit.'
    """
    paragraph = " ".join((doc or step).strip().split("\n\n")[0].split())
    paragraph = re.sub(r"``([^`]+)``", r"\1", paragraph)
    paragraph = re.sub(rf"^{re.escape(step)}:\s*", "", paragraph)
    end = re.search(r"(?<!\be\.g)(?<!\bi\.e)\.(?=\s|$)", paragraph)  # a full stop, not one inside "e.g."
    return paragraph[: end.end()] if end else paragraph


#: Arguments that name an input of a step that declares no ``READS``.
DEFAULT_READS = ("source", "model", "tokenizer")


def _writes(patterns: tuple[str, ...]):
    def owns(name: Path) -> bool:
        return any(fnmatch.fnmatchcase(name.as_posix(), pattern) for pattern in patterns)
    return owns


def check_step_outputs(module: ModuleType, args: argparse.Namespace) -> None:
    """Refuse, before any work, an input of the step (``module.READS``) that is a file the step writes in ``--out``
    (``module.WRITES``), and an ``--out`` that is a link to a device (:func:`much_metric.fileio.check_outputs`)."""
    from much_metric.fileio import Output, check_outputs

    writes = tuple(getattr(module, "WRITES", ()))
    inputs = []
    for name in getattr(module, "READS", DEFAULT_READS):
        values = getattr(args, name, None)
        for value in values if isinstance(values, list | tuple) else [values]:
            if isinstance(value, str) and value:
                inputs.append((f"--{name.replace('_', '-')}", value))
    check_outputs([Output("--out", Path(args.out), folder=True, owns=_writes(writes) if writes else None)],
                  inputs=inputs)


def finite_float(text: str) -> float:
    """An argparse type: a finite number (``nan``, ``inf`` refused: ``nan <= 0`` is False, so a NaN option would
    pass every range check after it)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return value


def count(text: str) -> int:
    """An argparse type for ``--limit``: an integer >= 0 (a negative one would slice rows off the end)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {text!r}")
    return value


def _constrain(parser: argparse.ArgumentParser) -> None:
    """The constraints every step shares, declared once: float options are finite, ``--limit`` is >= 0."""
    for action in parser._actions:
        if action.type is float:
            action.type = finite_float
        if action.dest == "limit" and action.type is int:
            action.type = count


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
        step_parser = subparsers.add_parser(step, help=step_summary(module.__doc__, step), description=module.__doc__,
                                            formatter_class=argparse.RawDescriptionHelpFormatter)
        step_parser.add_argument("--out", required=True, help="artifact folder (JSONL per step)")
        step_parser.add_argument("--shard", default=None, help="i/n: process every n-th item starting at i")
        module.add_arguments(step_parser)
        _constrain(step_parser)
        step_parser.set_defaults(func=module.run, step_module=module)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    def command() -> int:
        from builder._locks import clean_stale

        # Leftovers of killed runs (temporary copies whose writer is gone) are removed before any step.
        check_step_outputs(args.step_module, args)
        for folder in (Path(args.out), Path(args.out) / "rows"):
            clean_stale(folder)
        return int(args.func(args) or 0)

    from builder._processes import NoOrphans

    # A step stopped by SIGINT/SIGTERM/SIGHUP or an error leaves no child process behind (vLLM's engine core).
    with NoOrphans(subreaper=argv is None, prog=f"builder {args.step}") as guard:
        code = run_command(f"builder {args.step}", command, debug=debug_requested(args.traceback))
        if code >= 2:
            guard.reap(failed=True)
    return guard.exit_code(code)


if __name__ == "__main__":
    sys.exit(main())
