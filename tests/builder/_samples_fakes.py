"""Samples packs without a model: rows that keep every rule of a sample (probabilities sorted, summing below 1, the
sampled token among its candidates, the config's sampler and seed rule), written by the builder's own PackWriter."""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from builder.configs import GenerationConfig
from builder.samples_store import PackWriter, samples_identity
from much_dataset.samples import sample_seed

#: The config every fake pack is drawn with.
CONFIG = GenerationConfig(model_name="fake", max_new_tokens=8)
VOCAB = 50


def fake_rows(gid: str, indices: range, *, length: int = 3, prompt: str = "q") -> list[dict]:
    rows = []
    for index in indices:
        ids = [[(7 * index + t + k) % VOCAB for k in range(24)] for t in range(length)]
        values = [[0.04 / (k + 1) for k in range(24)] for _ in range(length)]
        rows.append({"generation_id": gid, "sample_index": index, "output": f"{gid} {index}",
                     "output_tokens": [r[0] for r in ids], "logits_token_ids": ids, "logits_values": values,
                     "finished": True, "sampling": {"temperature": CONFIG.temperature, "top_p": CONFIG.top_p,
                                                    "top_k": CONFIG.top_k, "max_new_tokens": CONFIG.max_new_tokens,
                                                    "seed": sample_seed(CONFIG.seed, index)},
                     "sample_id": f"s-{gid}-{index}", "generation_config": CONFIG.id, "lang": "en",
                     "wiki_url": f"https://en.wikipedia.org/wiki/{gid}", "prompt": prompt, "engine": "hf",
                     "engine_version": "0"})
    return rows


def fake_identity(*, weights: str = "0" * 64, dtype: str = "float32") -> dict:
    return samples_identity(model="fake", weights=weights, engine="hf", config=CONFIG.to_record(),
                            prompt_style="much", stored_candidates=24, dtype=dtype)


def fake_pack(path: Path, rows: list[dict], *, flush_every: int = 4, identity: dict | None = None,
              vocab_size: int | None = VOCAB) -> None:
    identity = {**(identity or fake_identity()), **({"vocab_size": vocab_size} if vocab_size else {})}
    writer = PackWriter(path, identity, flush_every=flush_every, n=4, source="s")
    for row in rows:
        writer.append(row)
    writer.close()


def edit_manifest(pack: Path, change: Callable[[dict], None]) -> None:
    manifest = json.loads((pack / "manifest.json").read_text())
    change(manifest)
    (pack / "manifest.json").write_text(json.dumps(manifest))


def forge(pack: Path, change: Callable[[list[dict], pa.Schema], tuple[list[dict], pa.Schema]],
          gid: str = "a") -> str:
    """Rewrite ``gid``'s shard with ``change(rows, schema)`` applied, under the new bytes' own content address, and
    point the manifest at it (bytes, sha256, n_samples, listing): the pack stays consistent, only the content is bad.
    Returns the new shard's name."""
    [old] = json.loads((pack / "manifest.json").read_text())["rows"][gid]
    table = pq.read_table(pack / "shards" / old)
    rows, target = change(table.to_pylist(), table.schema)
    buffer = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows, schema=target), buffer)
    payload = buffer.getvalue()
    name = f"{hashlib.sha256(payload).hexdigest()}.parquet"
    (pack / "shards" / name).write_bytes(payload)
    (pack / "shards" / old).unlink()

    def follow(manifest: dict) -> None:
        manifest["shards"].pop(old)
        manifest["shards"][name] = {"bytes": len(payload), "sha256": name.split(".")[0], "n_samples": len(rows)}
        for listing in manifest["rows"].values():
            if old in listing:
                listing[name] = listing.pop(old)

    edit_manifest(pack, follow)
    return name
