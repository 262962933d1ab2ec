"""Learned detectors as baselines: the signal name ``learned:<folder>`` scores a split with a trained detector.

``much run --signals learned:runs/linear-de`` (and ``ClaimMonitor(method="learned:runs/linear-de")``) loads the
folder written by ``much train`` (:mod:`much_metric.learned.detector`: safetensors + JSON, never pickle) and gives
its token scores, higher = more uncertain. Signal files and tables use the stored name
``learned_<folder name>-<weights hash>`` (a path cannot be a file name; see :func:`stored_name`); that name resolves
too, for tables read back from signal files, but computing it needs the ``learned:<folder>`` form.

Loaded detectors are kept per folder and file modification time, so the live monitor, which rescores the tokens
generated so far at each closed claim, reads the folder once. Importing this module imports neither torch nor the
detector code.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

from much_metric.baselines.registry import Baseline

__all__ = ["stored_name"]

_CACHE: dict[tuple[str, int, int], Any] = {}
_CACHE_SIZE = 8


def stored_name(path: str) -> str:
    """``learned_<folder name>-<first 8 hex digits of the weights' sha256>`` (characters outside
    ``[A-Za-z0-9_.-]`` replaced by ``-``): two detectors never share a signal file, even with the same folder name
    or after retraining in place, so a rerun never reuses another detector's scores."""
    from much_metric.learned.detector import WEIGHTS_FILE

    folder = Path(str(path)).expanduser()
    name = folder.resolve().name or "detector"
    digest = hashlib.sha256((folder / WEIGHTS_FILE).read_bytes()).hexdigest()[:8]
    return "learned_" + re.sub(r"[^\w.-]", "-", name) + "-" + digest


def _detector(path: str):
    from much_metric.learned.detector import CONFIG_FILE, WEIGHTS_FILE, load_detector

    folder = Path(path).expanduser()
    try:
        key = (str(folder.resolve()), (folder / CONFIG_FILE).stat().st_mtime_ns,
               (folder / WEIGHTS_FILE).stat().st_mtime_ns)
    except OSError:
        return load_detector(folder)  # raises the folder error
    if key not in _CACHE:
        if len(_CACHE) >= _CACHE_SIZE:
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[key] = load_detector(folder)
    return _CACHE[key]


def _display(params: dict[str, Any]) -> str:
    """``Learned (<folder name>; <protocol> <fold>)``: every table row names the protocol that trained it."""
    import json

    folder = Path(str(params["path"])).expanduser()
    try:
        protocol = json.loads((folder / "config.json").read_text(encoding="utf-8")).get("protocol") or {}
    except (OSError, ValueError, AttributeError):
        protocol = {}
    name = folder.resolve().name if str(params["path"]) else "detector"
    trained = " ".join(str(protocol[key]) for key in ("name", "fold") if protocol.get(key))
    return f"Learned ({name}; {trained})" if trained else f"Learned ({name})"


def _check(params: dict[str, Any]) -> None:
    from much_metric.learned.detector import CONFIG_FILE

    folder = Path(str(params["path"])).expanduser()
    if not (folder / CONFIG_FILE).is_file():
        raise ValueError(f"{folder} is not a learned detector folder (no {CONFIG_FILE}; train one with `much train`)")


def _compute(arrays: Any, *, path: Any) -> Any:
    return _detector(str(path)).token_scores(arrays)


def _stored_only(arrays: Any, *, name: Any) -> Any:
    raise ValueError(f"learned_{name} is the stored name of a learned detector's scores; compute them with "
                     "--signals learned:<detector folder>")


BASELINES = (
    Baseline(
        name="learned:{path}", compute=_compute, params={"path": r".+"}, order=200, check=_check,
        display=_display,
        signal_name=lambda name, params, resources: stored_name(str(params["path"])),
        description="a detector trained with `much train` (folder: safetensors weights + config.json)",
    ),
    Baseline(
        name="learned_{name}", compute=_stored_only, params={"name": r"[\w.-]+"}, order=200,
        display="Learned ({name})",
        description="stored name of learned:<folder> scores in signal files (not computable by this name)",
    ),
)
