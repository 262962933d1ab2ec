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
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from builder.errors import BuilderError
from builder.internals_store import check_identity, read_manifest, repair_under_lock
from much_dataset import schema
from much_dataset._version import __version__
from much_dataset.decoded_text import Decoder
from much_dataset.samples import FORMAT, MANIFEST, SHARDS, pack_index
from much_dataset.samples_checks import IDENTITY_KEYS, METADATA_KEY, arrow_schema, identity_digest

__all__ = ["samples_identity", "check_identity", "read_manifest", "done_pairs", "shard_bytes", "PackWriter",
           "trim_candidates", "SEED_RULE", "merge_commit", "failure_key", "repair_samples_pack"]

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


def shard_bytes(rows: list[dict[str, Any]], identity: dict[str, Any] | None = None) -> bytes:
    """The parquet bytes of sample rows (zstd; ids int32, probabilities float32 as the hub stores them), with the
    pack identity they were drawn under in the file's metadata (:data:`much_dataset.samples_checks.IDENTITY_KEYS`:
    a manifest that claims another identity over these bytes is refused by the pack check)."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    target = arrow_schema()
    if identity is not None:
        record = {key: identity.get(key) for key in IDENTITY_KEYS}
        target = target.with_metadata({METADATA_KEY: json.dumps(record, sort_keys=True).encode("utf-8")})
    names = set(target.names)
    sampling_keys = [field.name for field in target.field(schema.SAMPLING).type]
    table = pa.Table.from_pylist([{**{k: v for k, v in row.items() if k in names},
                                   schema.SAMPLING: {k: row[schema.SAMPLING][k] for k in sampling_keys}}
                                  for row in rows], schema=target)
    buffer = io.BytesIO()
    pq.write_table(table, buffer, compression="zstd", compression_level=9, use_dictionary=False,
                   write_statistics=False)
    return buffer.getvalue()


def failure_key(pair: tuple[str, int]) -> str:
    """The manifest's ``failures`` key of a (generation_id, sample_index) pair (JSON keys are text; written, never
    parsed back)."""
    return f"{pair[0]}#{pair[1]}"


def merge_commit(manifest: dict[str, Any], shard: tuple[str, int, int] | None, pairs: list[tuple[str, int]],
                 failures: dict[tuple[str, int], str]) -> list[tuple[str, int]]:
    """Merge one flush into ``manifest`` in place, in time linear in the manifest and the flush: ``shard`` (name,
    bytes, samples in it) lists the ``pairs`` it holds that no shard lists yet; a failure is recorded unless its
    pair is stored, and a stored pair's old failure is dropped. Returns the pairs newly listed."""
    done = done_pairs(manifest)
    new = list(dict.fromkeys(pair for pair in pairs if pair not in done))
    if shard is not None and new:
        name, size, count = shard
        manifest["shards"][name] = {"bytes": size, "sha256": name.split(".")[0], "n_samples": count}
        for gid, index in new:
            manifest["rows"].setdefault(gid, {}).setdefault(name, []).append(index)
            manifest["failures"].pop(failure_key((gid, index)), None)
        done.update(new)
    else:
        new = []
    manifest["failures"].update({failure_key(pair): reason for pair, reason in failures.items() if pair not in done})
    manifest["n_rows"] = len(manifest["rows"])
    manifest["n_samples"] = len(done)
    return new


def _value_damage(pack: Path, manifest: dict[str, Any], shards: list[str], decode: Decoder | None,
                  rows: Mapping[str, Mapping[str, Any]]) -> list[Any]:
    """The shards among ``shards`` (readable, what the manifest says) holding a sample whose values break a rule of
    the readers (:func:`much_dataset.samples_checks.value_problems`, the text rule with ``decode``, and
    :func:`~much_dataset.samples_checks.row_field_problems` against ``rows``, the run's answers), as damage naming
    the first such sample."""
    import pyarrow.parquet as pq

    from much_dataset.packs import ShardDamage
    from much_dataset.samples_checks import row_field_problems, value_problems

    index = pack_index(manifest)
    damage = []
    for shard in shards:
        table = pq.read_table(pack / SHARDS / shard)
        listed = [index.get(gid, {}).get(int(i)) == shard for gid, i in zip(
            table[schema.GENERATION_ID].to_pylist(), table[schema.SAMPLE_INDEX].to_pylist(), strict=True)]
        problems = sorted((p for p in [*value_problems(table, manifest, decode=decode),
                                       *row_field_problems(table, rows)] if listed[p[0]]), key=lambda p: p[0])
        if problems:
            row, column, reason = problems[0]
            pairs = tuple((gid, i) for gid, by_index in index.items() for i, name in by_index.items() if name == shard)
            damage.append(ShardDamage(shard, pairs, f"generation_id={table[schema.GENERATION_ID][row].as_py()!r}, "
                                                    f"sample_index {table[schema.SAMPLE_INDEX][row].as_py()}, "
                                                    f"column {column!r}, {reason}"))
    return damage


def _take_out(pack: Path, manifest: dict[str, Any], broken: set[str]) -> None:
    """Remove the ``broken`` shards from the manifest (their listings, then answers left without one) and from the
    pack folder."""
    for gid in list(manifest["rows"]):
        listing = manifest["rows"][gid]
        if isinstance(listing, dict):
            for shard in broken:
                listing.pop(shard, None)
        if not isinstance(listing, dict) or not listing:
            del manifest["rows"][gid]
    for shard in broken:
        manifest.get("shards", {}).pop(shard, None)
        path = pack / SHARDS / shard
        if Path(shard).name == shard and path.is_file():
            path.unlink()


def repair_samples_pack(pack: Path, *, decode: Decoder | None = None,
                        rows: Mapping[str, Mapping[str, Any]] | None = None) -> tuple[dict[str, Any] | None, list[Any]]:
    """Check the pack as its readers do (:func:`much_dataset.samples_checks.samples_pack_damage` with content
    hashes, and every listed sample's values; with ``decode``, the pack's tokenizer, each text equal to its decoded
    tokens; with ``rows``, ``generation_id -> answer``, each sample's prompt, wiki_url and lang its answer's) and take
    the samples of every damaged shard out of the manifest, under the pack's lock
    (:func:`builder.internals_store.repair_under_lock`), so that the run redraws them; a damaged shard file is
    removed (its name would otherwise block a redrawn shard, and nothing lists it any more). Returns the manifest
    (None: no pack yet) and the damage found."""
    from much_dataset.samples_checks import count_problem, identity_problem, samples_pack_damage

    def find_damage(manifest: dict[str, Any]) -> list[Any]:
        edited = identity_problem(manifest)
        if edited is not None:
            raise BuilderError(f"{pack / MANIFEST}: {edited}; use another --out")
        damage = samples_pack_damage(pack, manifest, hashes=True)
        miscounted = None if damage else count_problem(manifest)
        if miscounted is not None:
            raise BuilderError(f"{pack / MANIFEST}: {miscounted}; use another --out")
        broken = {found.shard for found in damage}
        sound = sorted({name for listing in manifest["rows"].values() if isinstance(listing, dict)
                        for name in listing} - broken)
        return damage + _value_damage(pack, manifest, sound, decode, rows or {})

    def take_out(manifest: dict[str, Any], damage: list[Any]) -> None:
        _take_out(pack, manifest, {found.shard for found in damage})
        manifest["n_rows"] = len(manifest["rows"])
        manifest["n_samples"] = len(done_pairs(manifest))

    return repair_under_lock(pack, FORMAT, find_damage, take_out)


def _holds(path: Path, name: str) -> bool:
    """Whether ``path`` exists and hashes to its content address ``name`` (a damaged file is rewritten)."""
    from much_dataset.packs import PackError, verify_shard

    try:
        verify_shard(path)
    except PackError:
        return False
    return name == path.name


class PackWriter:
    """The ``store`` :func:`builder.generation.run_engine` appends validated sample rows to: buffered, flushed as one
    shard + one manifest update every ``flush_every`` samples and at :meth:`close`. ``identity`` may carry the
    model's ``vocab_size`` beside it (written into a new manifest, never compared)."""

    def __init__(self, pack: Path, identity: dict[str, Any], *, flush_every: int, n: int, source: str) -> None:
        self.pack, self.identity, self.flush_every, self.n, self.source = pack, identity, flush_every, n, source
        self.rows: list[dict[str, Any]] = []
        self.failures: dict[tuple[str, int], str] = {}
        self.stored = 0
        self.manifest: dict[str, Any] | None = read_manifest(pack)

    def append(self, row: dict[str, Any]) -> bool:
        """Buffer a validated sample; a full buffer becomes a shard. True: stored (run_engine's writer contract)."""
        self.rows.append(row)
        if len(self.rows) >= self.flush_every:
            self.flush()
        return True

    def record_failure(self, pair: tuple[str, int], reason: str) -> None:
        """Remember why sample ``pair`` (generation_id, sample_index) could not be drawn; the manifest lists it at
        the next commit."""
        self.failures[(str(pair[0]), int(pair[1]))] = reason

    def close(self) -> dict[str, Any] | None:
        """Flush what is buffered and return the manifest as committed (None: nothing was ever stored)."""
        self.flush()
        if self.manifest is None or self.failures:
            self._commit(None, [], set())
        return self.manifest

    def flush(self) -> None:
        """Write the buffered samples as one content-addressed shard, then name it in the manifest."""
        if not self.rows and not self.failures:
            return
        rows, self.rows = self.rows, []
        shard = None
        if rows:
            payload = shard_bytes(rows, self.identity)
            name = f"{hashlib.sha256(payload).hexdigest()}.parquet"
            target = self.pack / SHARDS / name
            target.parent.mkdir(parents=True, exist_ok=True)
            if not _holds(target, name):  # content-addressed: a file of this name that hashes to it holds these bytes
                from builder._locks import atomic_write_bytes

                atomic_write_bytes(target, payload)
            shard = (name, len(payload), len(rows))
        self._commit(shard, [(row[schema.GENERATION_ID], int(row[schema.SAMPLE_INDEX])) for row in rows],
                     {str(row.get("engine_version")) for row in rows})

    def _commit(self, shard: tuple[str, int, int] | None, pairs: list[tuple[str, int]], versions: set[str]) -> None:
        from builder._locks import atomic_write_text, locked

        failures, self.failures = self.failures, {}
        with locked(self.pack / MANIFEST):  # read, merge (linear) and write: nothing else under the lock
            manifest = read_manifest(self.pack) or {**self.identity, "identity_sha256": identity_digest(self.identity),
                                                    "rows": {}, "shards": {}, "failures": {}}
            new = merge_commit(manifest, shard, pairs, failures)
            if new:
                manifest["engine_versions"] = sorted(set(manifest.get("engine_versions", [])) | versions)
            manifest.setdefault("engine_versions", [])
            if self.identity.get("vocab_size"):  # the model's, when the engine knows it (not part of the identity)
                manifest.setdefault("vocab_size", int(self.identity["vocab_size"]))
            manifest["sources"] = sorted({*manifest.get("sources", []), self.source})
            manifest["n"] = max(int(manifest.get("n", 0)), self.n)
            manifest["toolkit_version"] = __version__
            atomic_write_text(self.pack / MANIFEST, json.dumps(manifest, indent=1, sort_keys=True) + "\n")
        self.stored += len(new)
        self.manifest = manifest
