"""Issue #44: a pack is what its manifest says (much_dataset.packs, used by load_internals): shards replaced by
another pack's, rows of another pack added, an edited byte, a wrong token count are refused naming the shard; and
impossible values (attention outside [0, 1] or summing above 1, non-finite hidden states) are refused as the row is
read, naming the pack, the generation_id, the array and the position."""

from __future__ import annotations

import json

import numpy as np
import pytest

from much_dataset.internals import InternalsError, load_internals
from much_dataset.packs import PackError, pack_damage, verify_shard
from tests.much_dataset.test_internals import _make_pack

pytest.importorskip("safetensors")


def _manifest(path):
    return json.loads((path / "manifest.json").read_text())


def _save(path, manifest):
    (path / "manifest.json").write_text(json.dumps(manifest))


def test_a_shard_replaced_by_a_shard_of_another_pack_is_refused(tmp_path):
    """The other pack has 6 layers x 3 heads, this one 4 x 3: its shard under this shard's name (same rows) is
    refused when the pack is opened, by the layer count the manifest gives."""
    _, shard = _make_pack(tmp_path / "mine", {"a": 3, "b": 5})
    _, other = _make_pack(tmp_path / "other", {"a": 3, "b": 5}, layers=6)
    (tmp_path / "mine" / "shards" / shard).write_bytes((tmp_path / "other" / "shards" / other).read_bytes())
    with pytest.raises(InternalsError, match=rf"{shard}.*(bytes, the manifest lists|\(3, 6, 3\).*\(3, 4, 3\))"):
        load_internals(tmp_path / "mine")


def test_rows_of_another_pack_added_to_the_manifest_are_refused(tmp_path):
    _make_pack(tmp_path / "mine", {"a": 3})
    _, other = _make_pack(tmp_path / "other", {"z": 4}, layers=6, heads=2)
    (tmp_path / "mine" / "shards" / other).write_bytes((tmp_path / "other" / "shards" / other).read_bytes())
    manifest = _manifest(tmp_path / "mine")
    manifest["rows"]["z"] = _manifest(tmp_path / "other")["rows"]["z"]
    _save(tmp_path / "mine", manifest)
    with pytest.raises(InternalsError, match=rf"{other}: not listed in the manifest's shards"):
        load_internals(tmp_path / "mine")
    manifest["shards"][other] = _manifest(tmp_path / "other")["shards"][other]  # listed too: the shapes disagree
    _save(tmp_path / "mine", manifest)
    with pytest.raises(InternalsError, match=r"row 'z', array 'attention_to_previous': F32 \(4, 6, 2\), the "
                                             r"manifest says F32 \(4, 4, 3\)"):
        load_internals(tmp_path / "mine")


def test_a_manifest_token_count_or_a_foreign_row_does_not_pass(tmp_path):
    _, shard = _make_pack(tmp_path, {"a": 3, "b": 5})
    manifest = _manifest(tmp_path)
    manifest["rows"]["a"]["n_tokens"] = 4
    _save(tmp_path, manifest)
    with pytest.raises(InternalsError, match=r"row 'a', array .*\(3, .*the manifest says .*\(4, "):
        load_internals(tmp_path)
    manifest["rows"]["a"]["n_tokens"] = 3
    del manifest["rows"]["b"]
    _save(tmp_path, manifest)
    with pytest.raises(InternalsError, match=r"holds arrays of 1 row\(s\) the manifest does not list.*'b'"):
        load_internals(tmp_path)


def test_an_edited_byte_is_found_by_the_content_address_before_the_row_is_used(tmp_path):
    expected, shard = _make_pack(tmp_path, {"a": 3, "b": 5})
    path = tmp_path / "shards" / shard
    data = bytearray(path.read_bytes())
    data[-3] ^= 0xFF  # same size, same header: only the hash tells
    path.write_bytes(bytes(data))
    pack = load_internals(tmp_path)  # sizes and headers match
    with pytest.raises(InternalsError, match=rf"{shard}: its bytes hash to .*not to the content address.*builder "
                                             "internals"):
        pack["a"]
    with pytest.raises(PackError, match="hash"):
        verify_shard(path)
    damage = pack_damage(tmp_path, _manifest(tmp_path), expect=lambda gid, entry: {}, hashes=True)
    assert [d.shard for d in damage] == [shard] and set(damage[0].rows) == {"a", "b"}


def _pack_with(tmp_path, change, **kwargs):
    """A pack whose row 'b' was changed by ``change(arrays)`` before it was written (the bytes match the manifest:
    only the values are impossible)."""
    from builder.internals import InternalsOptions
    from builder.internals_store import commit_rows, pack_identity, write_shard

    options = InternalsOptions(hidden_layers=(1,), **kwargs)

    class _Config:
        num_hidden_layers, num_attention_heads, hidden_size = 2, 3, 4

    rng = np.random.default_rng(0)
    arrays = {"attention_to_previous": rng.uniform(0, 0.5, (5, 2, 3)).astype(np.float32),
              "hidden": np.zeros((5, 1, 4), np.float16)}
    if kwargs.get("attention_to_self"):
        arrays["attention_to_self"] = rng.uniform(0, 0.4, (5, 2, 3)).astype(np.float32)
    change(arrays)
    shard, size = write_shard(tmp_path, {f"b/{k}": v for k, v in arrays.items()})
    commit_rows(tmp_path, pack_identity("tiny", "0" * 64, _Config, options, "f" * 64), (shard, size),
                {"b": {"n_tokens": 5, "shard": shard, "max_abs_diff": 0.0}}, {})
    return load_internals(tmp_path)


@pytest.mark.parametrize("change, match", [
    (lambda a: a["attention_to_previous"].__setitem__((2, 1, 0), -0.5),
     r"array 'attention_to_previous', position \(token 2, layer 1, head 0\): attention weight -0.5 is not in"),
    (lambda a: a["attention_to_previous"].__setitem__((4, 0, 2), 7.0),
     r"array 'attention_to_previous', position \(token 4, layer 0, head 2\): attention weight 7.0"),
    (lambda a: a["attention_to_previous"].__setitem__((0, 0, 0), np.nan),
     r"array 'attention_to_previous', position \(token 0, layer 0, head 0\): attention weight nan"),
    (lambda a: a["hidden"].__setitem__((3, 0, 2), np.inf),
     r"array 'hidden', position \(token 3, hidden_layers\[0\], channel 2\): value inf is not finite"),
    (lambda a: (a["attention_to_previous"].__setitem__((1, 1, 1), 0.8),
                a["attention_to_self"].__setitem__((1, 1, 1), 0.3)),
     r"array 'attention_to_previous\+attention_to_self', position \(token 1, layer 1, head 1\): .*sum to 1.1 > 1"),
], ids=["negative", "seven", "nan", "hidden-inf", "sum-above-1"])
def test_impossible_values_are_refused_naming_pack_row_array_and_position(tmp_path, change, match):
    pack = _pack_with(tmp_path, change, attention_to_self=True)
    with pytest.raises(InternalsError, match=rf"internals pack {tmp_path}: generation_id='b', {match}"):
        pack["b"]


def test_possible_values_pass(tmp_path):
    pack = _pack_with(tmp_path, lambda a: None, attention_to_self=True)
    assert pack["b"]["attention_to_previous"].shape == (5, 2, 3)
