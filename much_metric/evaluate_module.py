"""``much_metric.load()``: the MUCH ``evaluate`` module, loaded from this installed package."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["load", "MODULE_PATH"]

#: Folder holding ``much_metric.py``, the evaluate module script (this package's folder).
MODULE_PATH = Path(__file__).resolve().parent


def load(**kwargs: Any):
    """``evaluate.load`` of the MUCH metric script shipped in this package (works offline, from any directory).

    Keyword arguments (``experiment_id``, ``keep_in_memory``, ``cache_dir``, ...) are passed to ``evaluate.load``.
    """
    import evaluate

    return evaluate.load(str(MODULE_PATH), **kwargs)
