"""Checks every ``much`` subcommand runs on its arguments before any long work (model loading, data loading).

:func:`check_arguments` looks at the arguments the subcommands share by name -- input files, output paths,
``--generation-time``, hub ids in ``--source``/``--tokenizer``/``--model`` -- so that a typo fails in a second, not
after the tokenizer or the dataset has loaded. Every check raises ``ValueError``/``OSError`` with one line that says
what is wrong and what to do; :func:`much_metric.cli.main` prints it as ``much <cmd>: error: ...``.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from much_dataset._hub import HUB_TIMEOUT_S, hub_offline, hub_reachable, unreachable_message

__all__ = ["check_arguments", "hub_reachable", "looks_like_hub_id", "HUB_TIMEOUT_S"]

#: Arguments naming a file or folder that must exist (``-`` = stdin is allowed).
_INPUTS = ("input",)
#: Arguments naming a file the command writes (its folder must be creatable and writable).
_OUTPUT_FILES = ("output", "json", "report")
#: Arguments naming a folder the command writes into.
_OUTPUT_FOLDERS = ("out", "figures")
#: Arguments that may name a hub repository.
_HUB_ARGUMENTS = ("source", "tokenizer", "model", "nli_model", "calibrate")
#: Arguments naming a dataset: the packaged ``sample``, an existing local folder/file, or a hub id ``owner/name``.
_DATA_ARGUMENTS = ("source", "calibrate")
#: Names that are not hub ids although they have no path separator.
_ALIASES = ("sample", "smollm2")


def looks_like_hub_id(value: str) -> bool:
    """``owner/name`` that is not an existing path nor a packaged alias (``sample``, ``smollm2``)."""
    if not isinstance(value, str) or value in _ALIASES or Path(value).expanduser().exists():
        return False
    parts = value.split("/")
    return len(parts) == 2 and all(parts) and not value.startswith((".", "/", "~")) and "\\" not in value


def _check_data(option: str, value: object) -> None:
    """The rule for a dataset argument: ``sample``, an existing path, or exactly ``owner/name`` (a hub id).

    Anything else (``nonexistent_folder``, ``./nonexistent_folder``, ``a/b/c``) is a local path that does not exist:
    it fails at once with "no such folder" instead of being sent to the hub (which would retry for ~20 s).
    """
    if not isinstance(value, str) or value in _ALIASES or Path(value).expanduser().exists():
        return
    if looks_like_hub_id(value):
        return
    raise FileNotFoundError(
        f"--{option} {value}: no such folder (a dataset is 'sample', an existing local folder, or a hub id "
        "written owner/name such as orailix/MUCH)")


def _check_output_file(option: str, value: str) -> None:
    if value in (None, "-"):
        return
    path = Path(value).expanduser()
    if path.is_dir():
        raise ValueError(f"--{option} {value}: is a folder, expected a file path")
    _check_writable_folder(option, path.parent, value)


def _check_writable_folder(option: str, folder: Path, value: str) -> None:
    existing = folder.resolve()
    while not existing.exists():  # the command creates missing folders: the first existing ancestor must be writable
        existing = existing.parent
    if not existing.is_dir():
        raise ValueError(f"--{option} {value}: {existing} is a file, not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise PermissionError(f"--{option} {value}: cannot write in {existing}")


def _check_generation_time(args: argparse.Namespace) -> None:
    value = getattr(args, "generation_time", None)
    if value is None:
        return
    from much_metric.baselines.runtime import generation_time

    try:
        # Same parser as the run itself (seconds or a JSON file); sizes are placeholders, only validity matters here.
        generation_time(value, data_source=getattr(args, "source", "") or "", n_samples=1, n_tokens=1)
    except (ValueError, OSError, KeyError, TypeError) as error:
        message = str(error)
        raise ValueError(message if "--generation-time" in message else f"--generation-time {value}: {message}") \
            from None


def _check_report_packages(args: argparse.Namespace) -> None:
    """``--report``/``--figures`` draw with matplotlib: missing, it fails now, not after the whole evaluation."""
    import importlib.util

    for name in ("report", "figures"):
        if getattr(args, name, None) and importlib.util.find_spec("matplotlib") is None:
            raise ModuleNotFoundError(f"--{name} draws its figures with matplotlib, which is not installed",
                                      name="matplotlib")


def check_arguments(args: argparse.Namespace) -> None:
    """Fail fast on arguments that would only fail after a long load (see the module docstring)."""
    for name in _INPUTS:
        value = getattr(args, name, None)
        if value not in (None, "-") and not Path(value).expanduser().exists():
            raise FileNotFoundError(f"--{name} {value}: no such file or folder")
    scores = getattr(args, "scores", None)
    if scores is not None and not looks_like_hub_id(scores) and not Path(scores).expanduser().exists():
        raise FileNotFoundError(f"--scores {scores}: no such file or folder")
    for name in _OUTPUT_FILES:
        value = getattr(args, name, None)
        if isinstance(value, str):
            _check_output_file(name.replace("_", "-"), value)
    for name in _OUTPUT_FOLDERS:
        value = getattr(args, name, None)
        if isinstance(value, str):
            path = Path(value).expanduser()
            if path.exists() and not path.is_dir():
                raise ValueError(f"--{name} {value}: is a file, expected a folder")
            _check_writable_folder(name, path, value)
    from much_metric.cli._outputs import check_output_paths

    check_output_paths(args)  # no output overwrites an input, a link, a device or another output's file
    if isinstance(getattr(args, "device", None), str):  # before a model is loaded, not when it is moved there
        from much_metric.models import check_device

        check_device(args.device)
    _check_generation_time(args)
    _check_report_packages(args)
    for name in _DATA_ARGUMENTS:
        _check_data(name, getattr(args, name, None))
    hub_ids = [(name, value) for name in _HUB_ARGUMENTS
               if isinstance(value := getattr(args, name, None), str) and looks_like_hub_id(value)]
    if hub_ids and not hub_offline() and not hub_reachable():
        name, value = hub_ids[0]
        raise ConnectionError(unreachable_message(f"--{name.replace('_', '-')} {value}"))
