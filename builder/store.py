"""Resumable, idempotent JSONL artifacts shared by every builder step.

A step writes its results with a :class:`JsonlStore`: one JSON object per line, keyed by a field (usually
``generation_id``). Appends are flushed and fsynced per record, so a killed run loses at most the record in flight;
a torn last line (the process died mid-write) is ignored on read and dropped on the next open. ``done_keys()`` tells
a rerun what to skip, and :meth:`JsonlStore.append` refuses a key that is already present, so rerunning a step never
duplicates rows. Per-item failures go to a sibling ``<name>.failures.jsonl`` with their reason instead of stopping
the run; a later success for the same key supersedes the failure.

Whole-file outputs (exports, cards) are written with :func:`atomic_write_bytes` / :func:`atomic_write_text`
(temporary file + ``os.replace``), so readers never see half a file.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from much_metric.fileio import atomic_write_bytes, atomic_write_text

__all__ = ["JsonlStore", "Shard", "atomic_write_bytes", "atomic_write_text", "read_jsonl"]


def read_jsonl(path: str | os.PathLike) -> Iterator[dict[str, Any]]:
    """Records of a JSONL file; a torn (unparsable) final line is skipped, a torn line elsewhere is an error."""
    path = Path(path)
    if not path.exists():
        return
    with path.open("r", encoding="utf-8") as handle:
        lines = handle.readlines()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            yield json.loads(line)
        except json.JSONDecodeError as error:
            if number == len(lines) and not line.endswith("\n"):
                return  # the process died while writing this record
            raise ValueError(f"{path}:{number}: corrupt JSONL record ({error})") from error


class JsonlStore:
    """An append-only JSONL file of records unique by ``key``.

    >>> store = JsonlStore(out / "generations.jsonl", key="generation_id")  # doctest: +SKIP
    >>> if item_id not in store: store.append({"generation_id": item_id, ...})  # doctest: +SKIP
    """

    def __init__(self, path: str | os.PathLike, *, key: str = "generation_id") -> None:
        self.path = Path(path)
        self.key = key
        self.failures_path = self.path.with_name(self.path.name.removesuffix(".jsonl") + ".failures.jsonl")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._repair_torn_tail()
        self._keys: set[str] = {str(record[key]) for record in read_jsonl(self.path)}

    def _repair_torn_tail(self) -> None:
        if not self.path.exists() or self.path.stat().st_size == 0:
            return
        data = self.path.read_bytes()
        if data.endswith(b"\n"):
            return
        keep = data[: data.rfind(b"\n") + 1]
        atomic_write_bytes(self.path, keep)

    def __contains__(self, key: object) -> bool:
        return str(key) in self._keys

    def __len__(self) -> int:
        return len(self._keys)

    def done_keys(self) -> frozenset[str]:
        return frozenset(self._keys)

    def records(self) -> Iterator[dict[str, Any]]:
        return read_jsonl(self.path)

    def append(self, record: dict[str, Any]) -> None:
        """Append one record (durably). Raises ``KeyError`` if its key is already stored."""
        key = str(record[self.key])
        if key in self._keys:
            raise KeyError(f"{self.path.name}: {self.key}={key!r} is already stored")
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())
        self._keys.add(key)

    def extend(self, records: Iterable[dict[str, Any]]) -> int:
        """Append the records whose key is not stored yet; returns how many were written."""
        written = 0
        for record in records:
            if str(record[self.key]) not in self._keys:
                self.append(record)
                written += 1
        return written

    def record_failure(self, key: str, reason: str, **extra: Any) -> None:
        """Record that ``key`` failed (with a human-readable reason); the run goes on."""
        line = json.dumps({self.key: key, "reason": reason, **extra}, ensure_ascii=False) + "\n"
        with self.failures_path.open("a", encoding="utf-8") as handle:
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())

    def failures(self) -> dict[str, dict[str, Any]]:
        """Latest failure per key, for keys that have not succeeded since."""
        latest = {str(r[self.key]): r for r in read_jsonl(self.failures_path)}
        return {k: v for k, v in latest.items() if k not in self._keys}


class Shard:
    """``--shard i/n``: this process handles the items whose position modulo ``n`` equals ``i`` (0-based)."""

    def __init__(self, index: int = 0, count: int = 1) -> None:
        if count < 1 or not 0 <= index < count:
            raise ValueError(f"invalid shard {index}/{count}: need 0 <= i < n")
        self.index, self.count = index, count

    @classmethod
    def parse(cls, text: str | None) -> Shard:
        if not text:
            return cls()
        try:
            index, count = (int(part) for part in text.split("/"))
        except ValueError as error:
            raise ValueError(f"--shard must look like i/n (e.g. 0/4), got {text!r}") from error
        return cls(index, count)

    def select(self, items: Iterable[Any]) -> Iterator[Any]:
        for position, item in enumerate(items):
            if position % self.count == self.index:
                yield item

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"
