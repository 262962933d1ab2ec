"""The one in-process cache type of the toolkit: bounded, least-recently-used first out, and locked.

Several parts keep a few expensive objects for reuse: the packs' verified shard hashes (:mod:`much_dataset.packs`),
the baselines' derived arrays of a split, a learned detector read from its folder, its torch module, a tokenizer's
segmentation profile. It lives at the bottom of the import graph (``much_dataset``) so that every package uses this
one type; ``much_metric._cache`` re-exports it. Each used to be a hand-written dict
that evicted ``next(iter(d))``; with threads (a server scoring requests, the monitor) two evictions raced for the
same key and one raised ``KeyError`` (19 in 6 s with 8 threads), or iteration met a dict that changed size.
:class:`BoundedCache` is that dict done once: every read and write of its table holds its lock; ``compute`` runs
outside it (a slow load does not block readers of other keys), and when two threads compute the same key the
first stored value wins, so every caller gets the same object.

A stored value can go stale (a tokenizer that gained tokens, a file rewritten, an ``id`` reused): ``valid`` says
whether a stored value may still be served; an invalid one is computed again and replaced.

Values leave the table under the lock but are released after it: dropping the last reference to a value can run
finalizers (a split's memo entry is removed when the split dies), and those may use a cache themselves. The lock is
re-entrant for the same reason (a garbage collection can run a finalizer while the lock is held).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["BoundedCache"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

_MISSING = object()


class BoundedCache(Generic[K, V]):
    """At most ``maxsize`` values by key; the least recently used goes first. Thread-safe.

    >>> cache = BoundedCache(2)
    >>> cache.get_or_compute("a", lambda: 1), cache.get_or_compute("b", lambda: 2)
    (1, 2)
    >>> cache.get_or_compute("a", lambda: 10)  # stored: not computed again
    1
    >>> cache.get_or_compute("c", lambda: 3)  # "b" was used least recently: it goes
    3
    >>> sorted(cache.keys())
    ['a', 'c']
    >>> cache.get_or_compute("a", lambda: 11, valid=lambda value: value > 5)  # stale: computed again
    11
    """

    def __init__(self, maxsize: int) -> None:
        if isinstance(maxsize, bool) or not isinstance(maxsize, int) or maxsize < 1:
            raise ValueError(f"BoundedCache: maxsize must be a positive integer, got {maxsize!r}")
        self.maxsize = maxsize
        self._data: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.RLock()

    def __reduce__(self) -> tuple[type, tuple[int]]:
        """A copy (pickle, ``copy.deepcopy``) is an empty cache of the same size: a memo, not data (and a lock
        cannot be copied)."""
        return (type(self), (self.maxsize,))

    def get(self, key: K, default: V | None = None, *, valid: Callable[[V], bool] | None = None) -> V | None:
        """The stored value of ``key`` (marked as just used) when there is one and ``valid`` accepts it, else
        ``default``."""
        with self._lock:
            value = self._data.get(key, _MISSING)
            if value is _MISSING or (valid is not None and not valid(value)):
                return default
            self._data.move_to_end(key)
            return value

    def put(self, key: K, value: V) -> V:
        """Store ``value`` under ``key`` (replacing what was there), evicting the least recently used beyond
        ``maxsize``; returns ``value``."""
        with self._lock:
            evicted = self._store(key, value)
        del evicted  # released outside the lock (see the module docstring)
        return value

    def get_or_compute(self, key: K, compute: Callable[[], V], *, valid: Callable[[V], bool] | None = None) -> V:
        """The stored value of ``key``, or ``compute()`` stored and returned. ``compute`` runs without the lock; if
        another thread stored a (valid) value for ``key`` meanwhile, that one is returned and this one dropped."""
        found = self.get(key, _MISSING, valid=valid)
        if found is not _MISSING:
            return found
        value = compute()
        with self._lock:
            current = self._data.get(key, _MISSING)
            if current is not _MISSING and (valid is None or valid(current)):
                self._data.move_to_end(key)
                return current
            evicted = self._store(key, value)
        del evicted, current  # released outside the lock (see the module docstring)
        return value

    def discard(self, key: K) -> None:
        """Forget ``key`` (nothing happens when it is not stored)."""
        with self._lock:
            value = self._data.pop(key, None)
        del value  # released outside the lock

    def clear(self) -> None:
        """Forget every key."""
        with self._lock:
            values = list(self._data.values())
            self._data.clear()
        del values  # released outside the lock

    def keys(self) -> list[K]:
        """A snapshot of the stored keys, least recently used first."""
        with self._lock:
            return list(self._data)

    def __len__(self) -> int:
        with self._lock:
            return len(self._data)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._data

    def _store(self, key: K, value: V) -> list[V]:
        """Store under the lock; returns what left the table (the replaced and evicted values), for the caller to
        release after the lock."""
        left = [] if (old := self._data.get(key, _MISSING)) is _MISSING else [old]
        self._data[key] = value
        self._data.move_to_end(key)
        while len(self._data) > self.maxsize:
            left.append(self._data.popitem(last=False)[1])
        return left
