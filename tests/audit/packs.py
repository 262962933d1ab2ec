"""Setups and checks of issue #44's audit cases (``tests/audit/table.py``): internals packs (random ones written
with the builder's own writers, SmolLM2 ones with a damaged shard), source rows with a bad field, a detector folder
whose training rows name nobody."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tests.audit.cases import CaseContext

__all__ = ["random_pack", "edit_manifest", "foreign_rows", "spoiled_pack", "damaged_smollm_pack", "pack_complete",
           "nothing_at", "source_rows", "foreign_training_rows", "embedded_samples_pack", "edit_shard_in_place",
           "nan_probability"]


def random_pack(rel: str = "pack", edit: Callable[[Path], None] | None = None) -> Callable[[CaseContext], None]:
    def setup(ctx: CaseContext) -> None:
        folder = ctx.copy(ctx.fixtures.random_pack(), rel)
        if edit:
            edit(folder)
    return setup


def edit_manifest(change: Callable[[dict], None]) -> Callable[[Path], None]:
    def edit(folder: Path) -> None:
        manifest = json.loads((folder / "manifest.json").read_text())
        change(manifest)
        (folder / "manifest.json").write_text(json.dumps(manifest))
    return edit


def foreign_rows(manifest: dict) -> None:
    """Rows of another pack added to the manifest, in a shard the manifest does not list."""
    manifest["rows"]["another-pack-row"] = {"n_tokens": 3, "shard": "f" * 64 + ".safetensors", "max_abs_diff": 0.0}


def spoiled_pack(position: tuple[int, int, int], value: float) -> Callable[[CaseContext], None]:
    """A random pack whose first row's ``attention_to_previous`` holds ``value`` at ``position`` (written with the
    builder's own writers: the bytes match the manifest, only the value is impossible)."""
    def setup(ctx: CaseContext) -> None:
        import numpy as np

        import much_dataset
        from builder.internals import InternalsOptions
        from builder.internals_store import commit_rows, pack_identity, write_shard

        class Config:
            num_hidden_layers, num_attention_heads, hidden_size = 6, 3, 4

        rows = much_dataset.load("sample", config="en", split="test")
        rng = np.random.default_rng(0)
        arrays, entries = {}, {}
        for index, (gid, tokens) in enumerate(zip(rows["generation_id"], rows["output_tokens"], strict=True)):
            attention = rng.random((len(tokens), 6, 3), dtype=np.float32)
            if index == 0:
                attention[position] = value
            arrays[f"{gid}/attention_to_previous"] = attention
            arrays[f"{gid}/hidden"] = np.zeros((len(tokens), 1, 4), np.float16)
            entries[gid] = {"n_tokens": len(tokens), "max_abs_diff": 0.0}
        folder = ctx.path("pack")
        folder.mkdir(parents=True)
        shard, size = write_shard(folder, arrays)
        identity = pack_identity("random", "0" * 64, Config, InternalsOptions(hidden_layers=(1,)), "f" * 64)
        commit_rows(folder, identity, (shard, size), {g: {**e, "shard": shard} for g, e in entries.items()}, {})
    return setup


def damaged_smollm_pack(how: str) -> Callable[[CaseContext], None]:
    """The SmolLM2 pack with its first listed shard truncated (``truncate``) or deleted (``delete``)."""
    def setup(ctx: CaseContext) -> None:
        folder = ctx.copy(ctx.fixtures.smollm_pack(), "p")
        first = sorted(json.loads((folder / "manifest.json").read_text())["shards"])[0]
        shard = folder / "shards" / first
        if how == "truncate":
            shard.write_bytes(shard.read_bytes()[:-64])
        else:
            shard.unlink()
    return setup


def pack_complete(rel: str, rows: int) -> Callable[[CaseContext], str | None]:
    """A pack that does not load, or holds fewer rows than it should, after a resume: reported complete wrongly."""
    def check(ctx: CaseContext) -> str | None:
        import much_dataset

        try:
            pack = much_dataset.load_internals(ctx.path(rel))
            if len(pack) != rows:
                return f"{rel} holds {len(pack)} rows after the resume, not {rows}"
            for gid in pack:
                pack[gid]
        except ValueError as error:
            return f"{rel} is unreadable after the resume: {error}"[:200]
        return None
    return check


def nothing_at(rel: str) -> Callable[[CaseContext], str | None]:
    return lambda ctx: f"{rel} was written" if ctx.path(rel).exists() else None


def source_rows(change: Callable[[list], None], rel: str = "rows.jsonl") -> Callable[[CaseContext], None]:
    def setup(ctx: CaseContext) -> None:
        rows = [{k: (list(v) if isinstance(v, tuple) else v) for k, v in r.items()}
                for r in ctx.fixtures.sample_rows()[:2]]
        change(rows)
        ctx.write(rel, "".join(json.dumps(r, default=str) + "\n" for r in rows))
    return setup


def foreign_training_rows(folder: Path) -> None:
    rows = json.loads((folder / "training_rows.json").read_text())
    rows["train"] = sorted(f"nobody-{i:05d}" for i in range(len(rows["train"])))
    (folder / "training_rows.json").write_text(json.dumps(rows))


def embedded_samples_pack(edit: Callable[[Path], None] | None = None, rel: str = "sp") -> Callable[[CaseContext], None]:
    """A copy of the embedded sample's samples pack at ``rel``, damaged by ``edit`` (issue #54's samples cases)."""
    def setup(ctx: CaseContext) -> None:
        from much_dataset.samples import SAMPLE_PACK_DIR

        folder = ctx.copy(SAMPLE_PACK_DIR, rel)
        if edit:
            edit(folder)
    return setup


def first_samples_shard(folder: Path) -> Path:
    return folder / "shards" / sorted(json.loads((folder / "manifest.json").read_text())["shards"])[0]


def edit_shard_in_place(folder: Path) -> None:
    """New bytes under the shard's old content address (same size)."""
    path = first_samples_shard(folder)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 1
    path.write_bytes(bytes(data))


def nan_probability(folder: Path) -> None:
    """A NaN probability in the first sample of an English row (one the ``--config en`` case scores), its shard
    rewritten under its new content address and the manifest following it (only the value is wrong)."""
    import math

    import pyarrow.parquet as pq

    from tests.builder._samples_fakes import forge

    manifest = json.loads((folder / "manifest.json").read_text())

    def lang(gid: str) -> str:
        table = pq.read_table(folder / "shards" / next(iter(manifest["rows"][gid])), columns=["generation_id", "lang"])
        return dict(zip(table["generation_id"].to_pylist(), table["lang"].to_pylist(), strict=True))[gid]

    gid = next(gid for gid in sorted(manifest["rows"]) if lang(gid) == "en")

    def change(rows, target):
        first = next(i for i, row in enumerate(rows) if row["generation_id"] == gid)
        rows[first]["logits_values"][1][0] = math.nan
        return rows, target

    forge(folder, change, gid)
