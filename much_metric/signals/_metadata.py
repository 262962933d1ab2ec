"""Per-sample metadata of a MUCH-signals file (e.g. which NLI model scored each sample), kept readable by
:func:`much_metric.signals.read_signals` and the MUCH-signals layout.

* ``.parquet``: one JSON object ``{generation_id: {key: value}}`` in the schema metadata under ``much.samples``
  (columns unchanged; readers that ignore schema metadata see a plain MUCH-signals file);
* ``.jsonl``: a ``metadata`` field ``{key: value}`` on each record of that generation (extra fields are ignored by
  ``read_signals``).

:func:`much_metric.signals.write_signals` rewrites the whole file, so call :func:`add_sample_metadata` after it
(it merges with the metadata that was there before, which the caller reads first with
:func:`read_sample_metadata`).
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

__all__ = ["PARQUET_KEY", "add_sample_metadata", "read_sample_metadata"]

PARQUET_KEY = b"much.samples"
_FIELD = "metadata"


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
