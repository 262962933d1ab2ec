"""The ``much`` command line: ``much run`` (baselines + evaluation), ``much evaluate`` (score a signal file).

Each subcommand lives in ``much_metric/cli/<name>.py`` and exposes ``register(subparsers)``, which adds its
parser and sets ``func`` (a callable taking the parsed namespace and returning an exit code). Command modules
import their heavy dependencies inside ``func`` so that ``much --help`` stays fast.

Errors: :func:`main` checks the shared arguments first (:mod:`much_metric.cli._preflight`: inputs exist, outputs
writable, ``--generation-time`` valid, hub reachable), then turns every expected failure of a subcommand
(:data:`EXPECTED_ERRORS`) into one line ``much <cmd>: error: <message>`` and exit code 2. ``much --traceback <cmd>``
or ``MUCH_DEBUG=1`` re-raises instead, for developers.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

COMMANDS = ("run", "evaluate", "segment", "monitor", "neighbours", "train", "install-metric", "leaderboard")

#: Failures caused by the input, the environment or a missing optional package, not by a bug.
EXPECTED_ERRORS = (ValueError, TypeError, OSError, KeyError, ImportError)

#: Optional packages -> the extra that installs them (for ImportError messages). A command whose own extra also
#: installs the package names that extra instead (:data:`_COMMAND_EXTRAS`).
_EXTRAS = {"torch": "models", "gguf": "models", "sentencepiece": "models", "matplotlib": "report",
           "safetensors": "learned", "gradio": "leaderboard", "uvicorn": "leaderboard", "fastapi": "leaderboard",
           "playwright": "test", "vllm": "vllm"}

#: Subcommand -> (its extra, the packages of that extra it may miss): ``much train`` without torch needs ``learned``
#: (torch + safetensors), not ``models``. tests/test_install_commands.py checks these sets against the extras.
_COMMAND_EXTRAS = {"train": ("learned", frozenset({"torch", "safetensors"})),
                   "leaderboard": ("leaderboard", frozenset({"gradio", "matplotlib"}))}

#: Added to a torch hint: PyPI's default torch wheel pulls the CUDA stack (several GB); the CPU build is smaller.
_CPU_TORCH_HINT = "; for CPU-only torch, first: pip install torch --index-url https://download.pytorch.org/whl/cpu"


#: Packages of the maintainers' pipeline: not an extra of the installed package, but builder/requirements.txt.
_BUILDER_REQUIREMENTS = frozenset({"openai", "sentence_transformers", "sklearn"})


def install_hint(package: str, command: str | None = None) -> str | None:
    """The command that installs ``package``'s extra, run from the toolkit's checkout (it is not on PyPI)."""
    if package in _BUILDER_REQUIREMENTS:
        return "from the toolkit's checkout: pip install -r builder/requirements.txt"
    extra = _EXTRAS.get(package)
    if extra is None:
        return None
    if command in _COMMAND_EXTRAS and package in _COMMAND_EXTRAS[command][1]:
        extra = _COMMAND_EXTRAS[command][0]
    hint = f"from the toolkit's checkout: pip install '.[{extra}]'"
    return hint + (_CPU_TORCH_HINT if package == "torch" else "")


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


def error_message(error: BaseException, command: str | None = None) -> str:
    """One line for an expected failure: the message, plus the extra to install for a missing package.

    ``command`` is the subcommand that failed: it picks the extra when several install the package (torch).
    """
    if isinstance(error, KeyError) and error.args:
        message = f"missing key {error.args[0]!r}"
    else:
        message = str(error) or type(error).__name__
    if isinstance(error, ImportError):
        package = (getattr(error, "name", None) or "").split(".")[0]
        hint = install_hint(package, command)
        if hint:
            message += f" ({hint})"
    return " ".join(message.split())


def _debug(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "traceback", False)) or os.environ.get("MUCH_DEBUG", "").lower() not in ("", "0")


def main(argv: list[str] | None = None) -> int:
    from much_dataset._transformers import quiet_torch_notice

    args = build_parser().parse_args(argv)
    try:
        with quiet_torch_notice():  # the light install has no torch: the commands need transformers' tokenizers only
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
    try:
        from much_metric.cli._preflight import check_arguments

        check_arguments(args)
        return int(args.func(args) or 0)
    except EXPECTED_ERRORS as error:
        if _debug(args):
            raise
        print(f"much {args.command}: error: {error_message(error, args.command)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"much {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
