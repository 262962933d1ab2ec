"""The one in-process cache type of the toolkit, :class:`much_dataset.cache.BoundedCache` (bounded, least recently
used first out, locked): defined at the bottom of the import graph so that ``much_dataset`` (the packs' verified
shard hashes) and ``much_metric`` share it; re-exported here for the modules of ``much_metric``."""

from __future__ import annotations

from much_dataset.cache import BoundedCache

__all__ = ["BoundedCache"]
