"""much_dataset.load_internals: memory-mapped rows, the manifest, and clear errors for a pack that does not fit."""

from __future__ import annotations

import json

import numpy as np
import pytest

from much_dataset.internals import InternalsError, MissingRowError, load_internals

pytest.importorskip("safetensors")


def _make_pack(path, rows: dict[str, int], *, layers: int = 4, heads: int = 3, width: int = 8, seed: int = 0):
    """A pack written with the builder's own shard/manifest writers, from seeded random arrays."""
    from builder.internals import InternalsOptions
    from builder.internals_store import commit_rows, pack_identity, write_shard

    rng = np.random.default_rng(seed)
    options = InternalsOptions(hidden_layers=(1, 3))

    class _Config:
        num_hidden_layers, num_attention_heads, hidden_size = layers, heads, width

    identity = pack_identity("tiny", "0" * 64, _Config, options, "f" * 64)
    arrays, expected = {}, {}
    for gid, n in rows.items():
        expected[gid] = {"attention_to_previous": rng.random((n, layers, heads), dtype=np.float32),
                         "hidden": rng.standard_normal((n, 2, width)).astype(np.float16)}
        arrays.update({f"{gid}/{k}": v for k, v in expected[gid].items()})
    shard, size = write_shard(path, arrays)
    commit_rows(path, identity, (shard, size), {g: {"n_tokens": n, "shard": shard, "max_abs_diff": 0.0}
                                                for g, n in rows.items()}, {})
    return expected, shard


def test_rows_are_memory_mapped_and_equal_what_was_written(tmp_path):
    expected, _ = _make_pack(tmp_path, {"a": 3, "b-1": 5})
    pack = load_internals(tmp_path)
    assert len(pack) == 2 and set(pack) == {"a", "b-1"} and "a" in pack and "zz" not in pack
    assert pack.manifest["n_tokens"] == 8 and pack.manifest["hidden_layers"] == [1, 3]
    for gid, arrays in expected.items():
        got = pack[gid]
        assert isinstance(got["hidden"], np.memmap) and not got["hidden"].flags.writeable
        for name, value in arrays.items():
            np.testing.assert_array_equal(got[name], value)


def test_missing_row_and_another_dataset(tmp_path):
    _make_pack(tmp_path, {"a": 3, "b": 5})
    pack = load_internals(tmp_path)
    with pytest.raises(MissingRowError, match="generation_id='c'"):
        pack["c"]
    assert isinstance(MissingRowError("x"), ValueError) and pack.get("c") is None
    rows = [{"generation_id": "a", "output_tokens": [1, 2, 3]}, {"generation_id": "c", "output_tokens": [1]}]
    with pytest.raises(MissingRowError, match="generation_id='c'.*1 of 2 samples missing"):
        load_internals(tmp_path, dataset=rows)
    with pytest.raises(InternalsError, match="none of the 1 samples.*another dataset"):
        load_internals(tmp_path, dataset=[{"generation_id": "x", "output_tokens": [1]}])
    with pytest.raises(InternalsError, match="generation_id='b'.*5 tokens, the data 4"):
        load_internals(tmp_path, dataset=[{"generation_id": "b", "output_tokens": [1, 2, 3, 4]}])
    with pytest.raises(InternalsError, match="of model 'tiny'.*not 'other'"):
        load_internals(tmp_path, model="other")
    assert len(load_internals(tmp_path, model="tiny")) == 2


def test_truncated_and_missing_shards_and_bad_manifests(tmp_path):
    _, shard = _make_pack(tmp_path, {"a": 3, "b": 5})
    path = tmp_path / "shards" / shard
    data = path.read_bytes()
    path.write_bytes(data[:-10])
    with pytest.raises(InternalsError, match="truncated shard"):
        load_internals(tmp_path)["a"]
    path.write_bytes(data[:5])
    with pytest.raises(InternalsError, match="truncated shard"):
        load_internals(tmp_path)["a"]
    path.unlink()
    with pytest.raises(InternalsError, match="shard file is missing"):
        load_internals(tmp_path)["b"]
    with pytest.raises(InternalsError, match="not an internals pack"):
        load_internals(tmp_path / "nowhere")
    (tmp_path / "manifest.json").write_text(json.dumps({"format": "other"}))
    with pytest.raises(InternalsError, match="not a much-internals/1 manifest"):
        load_internals(tmp_path)
