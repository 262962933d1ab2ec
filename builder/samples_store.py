"""The storage of a samples pack (``python -m builder samples``): identity, parquet shards, manifest.

The layout is the internals pack's (:mod:`builder.internals_store`): a pack's **identity** (:func:`samples_identity`:
weights, engine, generation config, prompt, stored candidates, dtype) is written once in ``manifest.json`` and every
later run must ask for the same (:func:`builder.internals_store.check_identity`); shards are content-addressed files
written atomically before the manifest, rewritten atomically under the pack's lock, names them
(:class:`PackWriter`): a killed run loses at most the samples it had not flushed, and a (generation_id,
sample_index) is never listed twice, even when several ``--shard`` processes write one pack.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from builder.internals_store import check_identity, read_manifest
from much_dataset import schema
from much_dataset._version import __version__
from much_dataset.samples import FORMAT, MANIFEST, SHARDS, pack_index

__all__ = ["samples_identity", "check_identity", "read_manifest", "done_pairs", "shard_bytes", "PackWriter",
           "trim_candidates", "SEED_RULE"]

#: How a sample's seed is derived (much_dataset.samples.sample_seed), recorded in the manifest.
SEED_RULE = "seed + 1 + sample_index"


def samples_identity(*, model: str, weights: str, engine: str, config: dict[str, Any], prompt_style: str,
                  stored_candidates: int, dtype: str) -> dict[str, Any]:
    """The keys every run into a pack must agree on (``config``: the generation config record, id included)."""
    return {"format": FORMAT, "model": model, "weights_sha256": weights, "engine": engine,
            "generation_config": config[schema.GENERATION_CONFIG], "config": config, "prompt_style": prompt_style,
            "stored_candidates": int(stored_candidates), "dtype": dtype, "seed_rule": SEED_RULE,
            "sampler": {key: config[key] for key in ("temperature", "top_p", "top_k", "max_new_tokens", "greedy")}}


def done_pairs(manifest: dict[str, Any] | None) -> set[tuple[str, int]]:
    """The (generation_id, sample_index) pairs a manifest lists."""
    if not manifest:
        return set()
    return {(gid, index) for gid, by_index in pack_index(manifest).items() for index in by_index}


def trim_candidates(row: dict[str, Any], keep: int) -> dict[str, Any]:
    """``row`` with ``keep`` candidates per position (the sampled token appended when it ranked lower): what a pack
    with ``stored_candidates < 24`` stores, AFTER the full row was validated."""
    if keep >= schema.TOP_K:
        return row
    ids_rows, value_rows = [], []
    for token, ids, values in zip(row[schema.OUTPUT_TOKENS], row[schema.LOGITS_TOKEN_IDS], row[schema.LOGITS_VALUES],
                                  strict=True):
        head_ids, head_values = list(ids[:keep]), list(values[:keep])
        if token not in head_ids:
            at = list(ids).index(token)
            head_ids.append(ids[at])
            head_values.append(values[at])
        ids_rows.append(head_ids)
        value_rows.append(head_values)
    return {**row, schema.LOGITS_TOKEN_IDS: ids_rows, schema.LOGITS_VALUES: value_rows}


def _arrow_schema() -> Any:
    import pyarrow as pa

    sampling = pa.struct([("temperature", pa.float64()), ("top_p", pa.float64()), ("top_k", pa.int64()),
                          ("max_new_tokens", pa.int64()), ("seed", pa.int64())])
    return pa.schema([
        (schema.GENERATION_ID, pa.string()), (schema.SAMPLE_INDEX, pa.int32()), (schema.OUTPUT, pa.string()),
        (schema.OUTPUT_TOKENS, pa.list_(pa.int32())), (schema.LOGITS_TOKEN_IDS, pa.list_(pa.list_(pa.int32()))),
        (schema.LOGITS_VALUES, pa.list_(pa.list_(pa.float32()))), (schema.FINISHED, pa.bool_()),
        (schema.SAMPLING, sampling), (schema.SAMPLE_ID, pa.string()), (schema.GENERATION_CONFIG, pa.string()),
        (schema.LANG, pa.string()), (schema.WIKI_URL, pa.string()), (schema.PROMPT, pa.string()),
        ("engine", pa.string()), ("engine_version", pa.string()),
    ])


def shard_bytes(rows: list[dict[str, Any]]) -> bytes:
    """The parquet bytes of sample rows (zstd; ids int32, probabilities float32 as the hub stores them)."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    target = _arrow_schema()
    names = set(target.names)
    sampling_keys = [field.name for field in target.field(schema.SAMPLING).type]
    table = pa.Table.from_pylist([{**{k: v for k, v in row.items() if k in names},
                                   schema.SAMPLING: {k: row[schema.SAMPLING][k] for k in sampling_keys}}
                                  for row in rows], schema=target)
    buffer = io.BytesIO()
    pq.write_table(table, buffer, compression="zstd", compression_level=9, use_dictionary=False,
                   write_statistics=False)
    return buffer.getvalue()


class PackWriter:
    """The ``store`` :func:`builder.generation.run_engine` appends validated sample rows to: buffered, flushed as one
    shard + one manifest update every ``flush_every`` samples and at :meth:`close`."""

    def __init__(self, pack: Path, identity: dict[str, Any], *, flush_every: int, n: int, source: str) -> None:
        self.pack, self.identity, self.flush_every, self.n, self.source = pack, identity, flush_every, n, source
        self.rows: list[dict[str, Any]] = []
        self.failures: dict[str, str] = {}
        self.stored = 0
        self.manifest: dict[str, Any] | None = read_manifest(pack)

    def append(self, row: dict[str, Any]) -> bool:
        """Buffer a validated sample; a full buffer becomes a shard. True: stored (run_engine's writer contract)."""
        self.rows.append(row)
        if len(self.rows) >= self.flush_every:
            self.flush()
        return True

    def record_failure(self, key: str, reason: str) -> None:
        """Remember why a sample could not be drawn; the manifest lists it at the next commit."""
        self.failures[key.split("/", 1)[-1]] = reason

    def close(self) -> dict[str, Any] | None:
        """Flush what is buffered and return the manifest as committed (None: nothing was ever stored)."""
        self.flush()
        if self.manifest is None or self.failures:
            self._commit(None, 0, [])
        return self.manifest

    def flush(self) -> None:
        """Write the buffered samples as one content-addressed shard, then name it in the manifest."""
        if not self.rows and not self.failures:
            return
        rows, self.rows = self.rows, []
        name, size = None, 0
        if rows:
            payload = shard_bytes(rows)
            name, size = f"{hashlib.sha256(payload).hexdigest()}.parquet", len(payload)
            target = self.pack / SHARDS / name
            target.parent.mkdir(parents=True, exist_ok=True)
            if not target.exists():  # content-addressed: an existing file of this name holds these bytes
                from builder._locks import atomic_write_bytes

                atomic_write_bytes(target, payload)
        self._commit(name, size, rows)

    def _commit(self, shard: str | None, size: int, rows: list[dict[str, Any]]) -> None:
        from builder._locks import atomic_write_text, locked

        with locked(self.pack / MANIFEST):
            manifest = read_manifest(self.pack) or {**self.identity, "rows": {}, "shards": {}, "failures": {}}
            done = done_pairs(manifest)
            new = [row for row in rows if (row[schema.GENERATION_ID], int(row[schema.SAMPLE_INDEX])) not in done]
            if shard is not None and new:
                manifest["shards"][shard] = {"bytes": size, "sha256": shard.split(".")[0], "n_samples": len(rows)}
                for row in new:
                    gid, index = row[schema.GENERATION_ID], int(row[schema.SAMPLE_INDEX])
                    manifest["rows"].setdefault(gid, {}).setdefault(shard, []).append(index)
                    manifest["failures"].pop(f"{gid}#{index}", None)
                    done.add((gid, index))
            manifest["failures"].update({key: reason for key, reason in self.failures.items()
                                         if tuple(key.rsplit("#", 1)) not in {(g, str(i)) for g, i in done}})
            self.failures = {}
            versions = {str(row.get("engine_version")) for row in new}
            manifest["engine_versions"] = sorted(set(manifest.get("engine_versions", [])) | versions)
            manifest["sources"] = sorted({*manifest.get("sources", []), self.source})
            manifest["n"] = max(int(manifest.get("n", 0)), self.n)
            manifest["n_rows"] = len(manifest["rows"])
            manifest["n_samples"] = len(done)
            manifest["toolkit_version"] = __version__
            atomic_write_text(self.pack / MANIFEST, json.dumps(manifest, indent=1, sort_keys=True) + "\n")
        self.stored += len(new)
        self.manifest = manifest
