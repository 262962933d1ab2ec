"""Learned detectors as baselines: the signal name ``learned:<folder>`` scores a split with a trained detector.

This is the first in-house plugin of the baselines registry, registered the way a third party registers one: the
entry point ``learned = much_metric.learned.plugin:BASELINES`` in the group ``much.baselines`` (``pyproject.toml``).
:mod:`much_metric.baselines` never imports this package; this module imports the registry's :class:`Baseline`.

``much run --signals learned:runs/linear-de`` (and ``ClaimMonitor(method="learned:runs/linear-de")``) loads the
folder written by ``much train`` (:mod:`much_metric.learned.detector`: safetensors + JSON, never pickle, checked
completely before anything is built) and gives its token scores, higher = more uncertain. Signal files and tables
use the stored name ``learned_<folder name>-<weights hash>`` (a path cannot be a file name; see
:func:`stored_name`); that name resolves too, for tables read back from signal files, but computing it needs the
``learned:<folder>`` form. The signal carries the detector's training rows and provenance as signal metadata
(:meth:`much_metric.learned.Detector.signal_metadata`), so every evaluation leaves those rows out.

A probe or claim head folder (trained on an internals pack) needs the pack of the same observer model:
``much run --internals PACK --signals learned:DIR`` (the baseline's ``needs_of`` asks for it; a pack of another
model, or one lacking the hidden layer read, is refused naming its ``manifest.json``).

Loaded detectors are kept per folder and file modification time, so the live monitor, which rescores the tokens
generated so far at each closed claim, reads the folder once.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

from much_dataset.schema import TOP_K
from much_metric._cache import BoundedCache
from much_metric.baselines.registry import Baseline, Requirements
from much_metric.learned.detector import CONFIG_FILE, TRAINING_ROWS_FILE, WEIGHTS_FILE, Detector, load_detector

__all__ = ["BASELINES", "stored_name"]

#: Detectors read from their folders, keyed by the folder and its files' modification times (a rewritten folder is
#: read again): the monitor and a server score the same folder many times, from several threads.
_CACHE: BoundedCache[tuple[str, int, int, int], Detector] = BoundedCache(8)


def _detector(path: Any) -> Detector:
    folder = Path(str(path)).expanduser()
    try:
        key = (str(folder.resolve()), *((folder / name).stat().st_mtime_ns
                                        for name in (CONFIG_FILE, WEIGHTS_FILE, TRAINING_ROWS_FILE)))
    except OSError:
        return load_detector(folder)  # raises the folder error
    return _CACHE.get_or_compute(key, lambda: load_detector(folder))


def stored_name(path: str) -> str:
    """``learned_<folder name>-<first 8 hex digits of the weights' sha256>`` (characters outside
    ``[A-Za-z0-9_.-]`` replaced by ``-``): two detectors never share a signal file, even with the same folder name
    or after retraining in place, so a rerun never reuses another detector's scores. The folder is checked first."""
    detector = _detector(path)
    digest = hashlib.sha256()
    for name in sorted(detector.weights):
        digest.update(name.encode("utf-8"))
        digest.update(detector.weights[name].tobytes())
    folder = Path(str(path)).expanduser()
    return "learned_" + re.sub(r"[^\w.-]", "-", folder.resolve().name or "detector") + "-" + digest.hexdigest()[:8]


def _display(params: dict[str, Any]) -> str:
    """``Learned linear (<folder>; leave-one-language-out, held out lang=de)``: the row names the detector kind,
    the protocol and the held-out fold."""
    folder = Path(str(params["path"])).expanduser()
    try:
        detector = _detector(folder)
    except (OSError, ValueError):
        return f"Learned ({folder.name or 'detector'})"
    protocol = detector.config.get("protocol") or {}
    trained = ", ".join(part for part in (protocol.get("name") and str(protocol["name"]),
                                          protocol.get("fold") and f"held out {protocol['fold']}") if part)
    return f"Learned {detector.kind.name} ({folder.resolve().name}; {trained or 'protocol not recorded'})"


def _check(params: dict[str, Any]) -> None:
    _detector(params["path"])  # the whole folder, before any work


def _compute(arrays: Any, *, path: Any, internals: Any = None) -> Any:
    return _detector(path).token_scores(arrays, internals)


def _requirements(params: dict[str, Any]) -> Requirements:
    """A probe or claim head folder reads an internals pack (``much run --internals PACK``); a probe reads one hidden
    layer only, every other kind the 24 stored candidates (its features)."""
    kind = _detector(params["path"]).kind
    return Requirements(top_k=0 if kind.reads == "hidden" else TOP_K,
                        resources=("internals",) if kind.needs_internals else ())


def _metadata(params: dict[str, Any]) -> dict[str, Any]:
    return _detector(params["path"]).signal_metadata()


def _stored_only(arrays: Any, *, name: Any) -> Any:
    raise ValueError(f"learned_{name} is the stored name of a learned detector's scores; compute them with "
                     "--signals learned:<detector folder>")


BASELINES = (
    Baseline(
        name="learned:{path}", compute=_compute, params={"path": r".+"}, order=200, check=_check,
        display=_display, metadata=_metadata, requirements=_requirements,
        signal_name=lambda name, params, resources: stored_name(str(params["path"])),
        description="a detector trained with `much train` (folder: safetensors weights + config.json); scored on "
                    "the rows it was not trained or validated on",
    ),
    Baseline(
        name="learned_{name}", compute=_stored_only, params={"name": r"[\w.-]+"}, order=200,
        display="Learned ({name})",
        description="stored name of learned:<folder> scores in signal files (not computable by this name)",
    ),
)
