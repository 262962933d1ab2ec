"""Resumable, idempotent JSONL artifacts shared by every builder step, safe under kills and concurrent writers.

A step writes its results with a :class:`JsonlStore`: one JSON object per line, keyed by a field (usually
``generation_id``). ``done_keys()`` tells a rerun what to skip. Guarantees:

* **Concurrent writers.** Each append takes an advisory lock on the file (``fcntl.flock`` on a hidden sibling
  ``.<name>.lock``, see :mod:`builder._locks`), re-reads what other processes appended since, and writes the record
  only if its key is not there yet. Several processes (the shards of ``scripts/cluster/generate.sbatch``, two
  overlapping ``annotate`` runs) can therefore append to one file: every key is written once.
* **Kills.** A record is written with one ``write`` + ``fsync`` under the lock, so a kill loses at most the record in
  flight, left as a torn line (a prefix of a record without its newline). The next writer finds it under the lock
  and cuts it off before appending. A torn fragment that an unlocked writer (an older builder) glued to the next
  record's line is repaired the same way: the whole record after it is kept, the fragment dropped with a warning --
  the later rows are never lost and a torn line never stops the later steps.
* Secrets (API keys, ``Authorization`` values) are masked in every record written (:mod:`builder._redact`).
* A line that no kill leaves -- garbage, a JSON value that is not an object, a record without its key -- is not
  guessed at: reading the file raises :class:`CorruptLineError` (a :class:`~builder.errors.BuilderError`) naming the
  file and the line and saying how to repair, and the file is left as it is.
* Per-item failures go to a sibling ``<name>.failures.jsonl`` (same locking) with their reason instead of stopping
  the run; a later success for the same key supersedes the failure.

Whole-file outputs (exports, cards) are written with :func:`atomic_write_bytes` / :func:`atomic_write_text`
(temporary file + ``os.replace``), so readers never see half a file; a temporary left by a kill is removed by the
next run (:func:`builder._locks.clean_stale`).

Not guaranteed: locks are advisory (a process that does not use this module is not stopped) and ``flock`` is not
reliable on every network file system (NFS before v4, some FUSE mounts).
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from builder._locks import atomic_write_bytes, atomic_write_text, locked
from builder._redact import redact
from builder.errors import BuilderError

__all__ = ["CorruptLineError", "JsonlStore", "Shard", "atomic_write_bytes", "atomic_write_text", "read_store",
           "parse_jsonl"]


class CorruptLineError(BuilderError):
    """A line of a builder artifact that is not a record (and not what a killed writer leaves)."""


def _corrupt(path: str | os.PathLike, number: int, what: str) -> CorruptLineError:
    return CorruptLineError(f"{path}:{number}: {what}; delete that line (the step redoes its item on the next run) or "
                            "fix it by hand -- it was not written by an interrupted builder step")


def _recover(line: str) -> tuple[dict[str, Any], str] | None:
    """The whole record (and its text) at the end of a line that starts with a torn fragment, if there is one."""
    position = line.find("{", 1)
    while position != -1:
        try:
            record = json.loads(line[position:])
        except ValueError:  # JSONDecodeError, or an integer past Python's digit limit
            position = line.find("{", position + 1)
            continue
        return (record, line[position:]) if isinstance(record, dict) else None
    return None


def _parse(data: bytes, path: str | os.PathLike) -> tuple[list[tuple[dict[str, Any], str, int]], list[int]]:
    """``[(record, its text, its line number)]`` and the numbers of the torn lines."""
    records: list[tuple[dict[str, Any], str, int]] = []
    torn: list[int] = []
    lines = data.decode("utf-8", errors="replace").split("\n")
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as error:  # JSONDecodeError, or an integer past Python's digit limit
            if number == len(lines):  # no newline after it: the process died while writing this record
                torn.append(number)
                continue
            recovered = _recover(line)
            if recovered is None:
                raise _corrupt(path, number, f"corrupt JSONL record, not JSON ({error})") from None
            torn.append(number)
            records.append((*recovered, number))
            continue
        if not isinstance(record, dict):
            raise _corrupt(path, number, f"a JSON {type(record).__name__}, not an object (each line is one record)")
        records.append((record, line, number))
    return records, torn


def parse_jsonl(data: bytes, path: str | os.PathLike) -> tuple[list[dict[str, Any]], list[int]]:
    """Records of JSONL bytes and the (1-based) numbers of the torn lines met.

    A line that does not parse is torn when it is the unterminated last line (a write cut by a kill) or when a whole
    record follows the fragment on the same line (the next append after such a kill); the record is kept and the
    fragment dropped. Any other unparsable line raises ``ValueError`` naming the file and the line.
    """
    records, torn = _parse(data, path)
    return [record for record, _, _ in records], torn


def read_store(path: str | os.PathLike) -> Iterator[dict[str, Any]]:
    """Records of a JSONL file; torn lines (see :func:`parse_jsonl`) are skipped, with a warning for those that are
    not the last line (the last one may be a write still in flight)."""
    path = Path(path)
    if not path.exists():
        return
    data = path.read_bytes()
    records, torn = parse_jsonl(data, path)
    inside = [n for n in torn if n != data.count(b"\n") + 1]
    if inside:
        warnings.warn(f"{path}: skipped torn record fragment(s) at line(s) {inside} (left by a killed writer; the "
                      "next run of the step that writes this file repairs it)", stacklevel=2)
    yield from records


class JsonlStore:
    """An append-only JSONL file of records unique by ``key``, shared safely between processes (module docstring).

    A second writer of the same key (another process, or a rerun after a crash) is told, not duplicated:

    >>> import tempfile
    >>> from pathlib import Path
    >>> from builder.store import JsonlStore
    >>> out = Path(tempfile.mkdtemp())
    >>> store = JsonlStore(out / "generations.jsonl", key="generation_id")
    >>> store.append({"generation_id": "a", "output": "Paris."})
    True
    >>> rerun = JsonlStore(out / "generations.jsonl", key="generation_id")
    >>> "a" in rerun, rerun.append({"generation_id": "a", "output": "Lyon."}), len(rerun)
    (True, False, 1)
    >>> [record["output"] for record in rerun.records()]
    ['Paris.']
    """

    def __init__(self, path: str | os.PathLike, *, key: str = "generation_id") -> None:
        self.path = Path(path)
        self.key = key
        self.failures_path = self.path.with_name(self.path.name.removesuffix(".jsonl") + ".failures.jsonl")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._keys: set[str] = set()
        self._written: set[str] = set()  # keys this store appended itself
        self._offset = 0  # bytes of the file already parsed into _keys
        with locked(self.path):
            self._repair()
            self._refresh()

    def _repair(self) -> None:
        """Under the lock: drop torn fragments and duplicate keys (kept: the first record), keeping every other."""
        if not self.path.exists() or self.path.stat().st_size == 0:
            return
        data = self.path.read_bytes()
        records, torn = _parse(data, self.path)
        unique: dict[str, str] = {}
        for record, text, number in records:
            if self.key not in record:
                raise _corrupt(self.path, number, f"the record has no {self.key!r} (the key of this file)")
            unique.setdefault(str(record[self.key]), text)
        if not torn and len(unique) == len(records):
            return
        if torn:
            warnings.warn(f"{self.path}: repaired {len(torn)} torn record fragment(s) at line(s) {torn} left by a "
                          "killed writer; the records after them are kept, the torn items will be redone",
                          stacklevel=3)
        if len(unique) != len(records):
            warnings.warn(f"{self.path}: dropped {len(records) - len(unique)} duplicate record(s) (same {self.key})",
                          stacklevel=3)
        if len(unique) == len(records) and torn == [data.count(b"\n") + 1]:
            _cut_torn_tail(self.path)  # only an unterminated last line: truncate in place, no rewrite
        else:
            atomic_write_bytes(self.path, "".join(text + "\n" for text in unique.values()).encode("utf-8"))
        self._offset = 0
        self._keys.clear()

    def _refresh(self) -> None:
        """Under the lock: read what was appended since the last read (by this or another process)."""
        if not self.path.exists():
            self._offset, self._keys = 0, set()
            return
        with self.path.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            if size < self._offset:  # rewritten by a repair: start over
                self._offset, self._keys = 0, set()
            handle.seek(self._offset)
            data = handle.read()
        complete = data[: data.rfind(b"\n") + 1]
        keys = []
        try:
            if len(complete) != len(data):
                raise ValueError("torn tail")  # under the lock, so its writer is dead
            for line in complete.splitlines():
                if line.strip():
                    record = json.loads(line)
                    if not isinstance(record, dict) or self.key not in record:
                        raise ValueError("not a record")  # _repair names the line
                    keys.append(str(record[self.key]))
        except ValueError:  # JSONDecodeError too
            self._repair()
            self._refresh_all()
            return
        self._keys.update(keys)
        self._offset += len(complete)

    def _refresh_all(self) -> None:
        data = self.path.read_bytes() if self.path.exists() else b""
        records, _ = parse_jsonl(data, self.path)
        self._keys = {str(r[self.key]) for r in records}
        self._offset = len(data)

    def __contains__(self, key: object) -> bool:
        return str(key) in self._keys

    def __len__(self) -> int:
        return len(self._keys)

    def done_keys(self) -> frozenset[str]:
        return frozenset(self._keys)

    def refresh(self) -> frozenset[str]:
        """Re-read the keys other processes have stored since (under the lock); returns them all."""
        with locked(self.path):
            self._refresh()
        return self.done_keys()

    def records(self) -> Iterator[dict[str, Any]]:
        return read_store(self.path)

    def append(self, record: dict[str, Any]) -> bool:
        """Append one record durably, unless another process stored its key meanwhile (then returns False).

        Raises ``KeyError`` if this store itself wrote the key before (a caller that did not check). A key that
        another writer stored, learnt by an earlier refresh after the caller's check, returns False: that race is
        the normal case of two overlapping runs.
        """
        key = str(record[self.key])
        if key in self._written:
            raise KeyError(f"{self.path.name}: {self.key}={key!r} is already stored")
        if key in self._keys:
            return False
        text = redact(json.dumps(record, ensure_ascii=False, separators=(",", ":")), patterns=False)
        line = (text + "\n").encode("utf-8")
        with locked(self.path):
            self._refresh()  # what other writers appended, and a torn tail cut off
            if key in self._keys:
                return False
            with self.path.open("ab") as handle:
                handle.write(line)
                handle.flush()
                os.fsync(handle.fileno())
            self._offset += len(line)
        self._keys.add(key)
        self._written.add(key)
        return True

    def extend(self, records: Iterable[dict[str, Any]]) -> int:
        """Append the records whose key is not stored yet; returns how many were written."""
        written = 0
        for record in records:
            if str(record[self.key]) not in self._keys:
                written += self.append(record)
        return written

    def record_failure(self, key: str, reason: str, **extra: Any) -> None:
        """Record that ``key`` failed (with a human-readable reason); the run goes on."""
        line = redact(json.dumps({self.key: key, "reason": reason, **extra}, ensure_ascii=False)) + "\n"
        with locked(self.failures_path):
            _cut_torn_tail(self.failures_path)
            with self.failures_path.open("a", encoding="utf-8") as handle:
                handle.write(line)
                handle.flush()
                os.fsync(handle.fileno())

    def failures(self) -> dict[str, dict[str, Any]]:
        """Latest failure per key, for keys that have not succeeded since."""
        latest = {str(r[self.key]): r for r in read_store(self.failures_path)}
        return {k: v for k, v in latest.items() if k not in self._keys}


def _cut_torn_tail(path: Path) -> None:
    """Under the file's lock: truncate an unterminated last line (a write cut by a kill) before appending."""
    if not path.exists():
        return
    with path.open("rb+") as handle:
        data = handle.read()
        if data and not data.endswith(b"\n"):
            handle.truncate(data.rfind(b"\n") + 1)


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
