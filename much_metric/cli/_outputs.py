"""Which arguments of each ``much`` command are inputs and which are outputs, for the output rules of
:func:`much_metric.fileio.check_outputs` (no output overwrites an input or a file another output writes).

:func:`check_output_paths` runs in :func:`much_metric.cli._preflight.check_arguments`, before any long work. A new
argument that names something the command reads (a file, or a folder such as an internals or samples pack, a
withheld-labels file, a detector folder) is declared by adding its name to :data:`INPUT_ARGUMENTS`; a new output
folder adds what it writes there to ``_OWNS``. ``--signals learned:DIR`` names an input folder too.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from much_metric.fileio import Output, check_outputs

__all__ = ["check_output_paths", "INPUT_ARGUMENTS"]

#: Arguments that may name a local file or folder the command reads (a value that is not a local path is ignored).
INPUT_ARGUMENTS = ("input", "scores", "source", "mushroom", "files", "neighbours", "generation_time", "calibrate",
                   "tokenizer", "model", "nli_model", "internals")
#: ``--signals`` values that name a folder the command reads (``learned:DIR``: a detector folder).
_FOLDER_SIGNALS = ("learned:",)
#: Arguments naming a file the command writes.
_OUTPUT_FILES = ("output", "json", "report")
#: Arguments naming a folder the command writes files into.
_OUTPUT_FOLDERS = ("out", "figures")


def _signal_folder(name: Path) -> bool:  # much run --out: <signal>.parquet / .jsonl and timings.json
    return len(name.parts) == 1 and (name.suffix in (".parquet", ".jsonl") or name.name == "timings.json")


def _neighbours_folder(name: Path) -> bool:  # much neighbours --out: manifest, shard markers, blocks
    return str(name) == "manifest.json" or name.parts[0] in ("shards", "blocks")


def _figures_folder(name: Path) -> bool:  # much evaluate --figures: PNG and SVG figures
    return name.suffix in (".png", ".svg")


def _detector_folder(name: Path) -> bool:  # much train --out: a detector folder per fold, checkpoints in it
    from much_metric.learned.detector import CARD_FILE, CONFIG_FILE, TRAINING_ROWS_FILE, WEIGHTS_FILE

    return name.name in (CONFIG_FILE, WEIGHTS_FILE, TRAINING_ROWS_FILE, CARD_FILE) or "checkpoint" in name.parts


#: (command, folder argument) -> the relative paths the command writes inside that folder.
_OWNS: dict[tuple[str, str], Callable[[Path], bool]] = {
    ("run", "out"): _signal_folder, ("neighbours", "out"): _neighbours_folder, ("evaluate", "figures"): _figures_folder,
    ("train", "out"): _detector_folder,
}


def _values(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)):
        return [v for v in value if isinstance(v, str)]
    return []


def check_output_paths(args: argparse.Namespace) -> None:
    """Refuse, before any work, outputs of ``args`` that would overwrite an input or collide (one line each)."""
    command = getattr(args, "command", None)
    inputs = [(f"--{name.replace('_', '-')}", value) for name in INPUT_ARGUMENTS
              for value in _values(getattr(args, name, None))]
    signals = [part.strip() for value in _values(getattr(args, "signals", None)) for part in value.split(",")]
    inputs += [(f"--signals {prefix}", signal[len(prefix):]) for signal in signals for prefix in _FOLDER_SIGNALS
               if signal.startswith(prefix)]
    outputs = [Output(f"--{name}", Path(value).expanduser()) for name in _OUTPUT_FILES
               for value in _values(getattr(args, name, None)) if value != "-"]
    outputs += [Output(f"--{name}", Path(value).expanduser(), folder=True, owns=_OWNS.get((command, name)))
                for name in _OUTPUT_FOLDERS for value in _values(getattr(args, name, None))]
    if command == "neighbours" and not getattr(args, "output", None) and isinstance(getattr(args, "out", None), str):
        outputs.append(Output("--output (default <out>/neighbours.npz)",
                              Path(args.out).expanduser() / "neighbours.npz"))
    check_outputs(outputs, inputs=inputs)
