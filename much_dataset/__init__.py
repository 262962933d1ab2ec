"""MUCH dataset: schema, validation, loader and builder.

``much_dataset.load(source)`` returns the typed dataset from the hub (``"orailix/MUCH"``), a local folder of parquet
shards, or ``"sample"`` (the embedded sample). Heavy imports (``datasets``) happen on first use.
"""

from __future__ import annotations

from much_dataset import schema
from much_dataset._version import __version__

__all__ = ["schema", "load", "load_with_problems", "load_internals", "load_samples", "samples_by_row", "__version__"]


def __getattr__(name: str):
    if name in ("load", "load_with_problems"):
        from much_dataset import loader

        return getattr(loader, name)
    if name == "load_internals":
        from much_dataset.internals import load_internals

        return load_internals
    if name in ("load_samples", "samples_by_row"):
        from much_dataset import samples

        return getattr(samples, name)
    raise AttributeError(f"module 'much_dataset' has no attribute {name!r}")
