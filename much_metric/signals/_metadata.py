"""Per-sample metadata of a MUCH-signals file (e.g. which NLI model scored each sample), kept readable by
:func:`much_metric.signals.read_signals` and the MUCH-signals layout.

* ``.parquet``: one JSON object ``{generation_id: {key: value}}`` in the schema metadata under ``much.samples``
  (columns unchanged; readers that ignore schema metadata see a plain MUCH-signals file);
* ``.jsonl``: a ``metadata`` field ``{key: value}`` on each record of that generation (extra fields are ignored by
  ``read_signals``).

:func:`much_metric.signals.write_signals` rewrites the whole file, so call :func:`add_sample_metadata` after it
(it merges with the metadata that was there before, which the caller reads first with
:func:`read_sample_metadata`).

Signal-level metadata (one JSON object for the whole file, e.g. a learned detector's ``training_generation_ids``
and ``detector`` provenance, see :mod:`much_metric.signals._training`): :func:`read_signal_metadata` /
:func:`write_signal_metadata`; stored under ``much.signal`` in the parquet schema metadata, or as a
``signal_metadata`` field of the first record of a ``.jsonl`` file. Like the per-sample metadata, write it after
:func:`much_metric.signals.write_signals`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from much_dataset.jsonl import read_jsonl
from much_dataset.schema import GENERATION_ID
from much_metric.fileio import atomic_write_bytes

__all__ = ["PARQUET_KEY", "SIGNAL_KEY", "add_sample_metadata", "read_sample_metadata", "read_signal_metadata",
           "write_signal_metadata"]

PARQUET_KEY = b"much.samples"
SIGNAL_KEY = b"much.signal"
_FIELD = "metadata"
_SIGNAL_FIELD = "signal_metadata"


def read_sample_metadata(path: str | os.PathLike) -> dict[str, dict[str, Any]]:
    """``{generation_id: {key: value}}`` stored in a signal file ({} when the file or its metadata is absent)."""
    path = Path(path)
    if not path.exists() or path.stat().st_size == 0:
        return {}
    if path.suffix.lower() == ".parquet":
        import pyarrow.parquet as pq

        raw = (pq.read_schema(path).metadata or {}).get(PARQUET_KEY)
        return json.loads(raw) if raw else {}
    out: dict[str, dict[str, Any]] = {}
    for _, record in read_jsonl(path):
        if isinstance(record.get(_FIELD), dict):
            out.setdefault(record[GENERATION_ID], {}).update(record[_FIELD])
    return out


def add_sample_metadata(path: str | os.PathLike, metadata: Mapping[str, Mapping[str, Any]]) -> None:
    """Merge ``{generation_id: {key: value}}`` into the metadata of an existing signal file (atomic rewrite)."""
    path = Path(path)
    merged = read_sample_metadata(path)
    for generation_id, values in metadata.items():
        merged.setdefault(str(generation_id), {}).update(values)
    if path.suffix.lower() == ".parquet":
        import io

        import pyarrow.parquet as pq

        table = pq.read_table(path)
        schema_metadata = dict(table.schema.metadata or {})
        schema_metadata[PARQUET_KEY] = json.dumps(merged, sort_keys=True).encode("utf-8")
        buffer = io.BytesIO()
        pq.write_table(table.replace_schema_metadata(schema_metadata), buffer)
        atomic_write_bytes(path, buffer.getvalue())
        return
    lines = []
    for _, record in read_jsonl(path):
        if record.get(GENERATION_ID) in merged:
            record[_FIELD] = merged[record[GENERATION_ID]]
        lines.append(json.dumps(record, ensure_ascii=False, separators=(",", ":")))
    atomic_write_bytes(path, ("\n".join(lines) + "\n").encode("utf-8") if lines else b"")


def read_signal_metadata(path: str | os.PathLike) -> dict[str, Any]:
    """The signal-level metadata of a signal file ({} when absent); ``ValueError`` naming the file when it is not
    a JSON object."""
    path = Path(path)
    if not path.exists() or path.stat().st_size == 0:
        return {}
    if path.suffix.lower() == ".parquet":
        import pyarrow.parquet as pq

        raw = (pq.read_schema(path).metadata or {}).get(SIGNAL_KEY)
        value = json.loads(raw) if raw else {}
    else:
        value = next((record.get(_SIGNAL_FIELD, {}) for _, record in read_jsonl(path)), {})
    if not isinstance(value, dict):
        raise ValueError(f"{path}: the signal metadata must be a JSON object, got {type(value).__name__}")
    return value


def write_signal_metadata(path: str | os.PathLike, metadata: Mapping[str, Any]) -> None:
    """Replace the signal-level metadata of an existing signal file (atomic rewrite)."""
    path = Path(path)
    payload = json.dumps(dict(metadata), sort_keys=True)
    if path.suffix.lower() == ".parquet":
        import io

        import pyarrow.parquet as pq

        table = pq.read_table(path)
        schema_metadata = dict(table.schema.metadata or {})
        schema_metadata[SIGNAL_KEY] = payload.encode("utf-8")
        buffer = io.BytesIO()
        pq.write_table(table.replace_schema_metadata(schema_metadata), buffer)
        atomic_write_bytes(path, buffer.getvalue())
        return
    lines = []
    for index, (_, record) in enumerate(read_jsonl(path)):
        record.pop(_SIGNAL_FIELD, None)
        if index == 0:
            record[_SIGNAL_FIELD] = json.loads(payload)
        lines.append(json.dumps(record, ensure_ascii=False, separators=(",", ":")))
    atomic_write_bytes(path, ("\n".join(lines) + "\n").encode("utf-8") if lines else b"")
