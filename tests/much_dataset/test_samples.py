"""much_dataset.load_samples("sample"): the embedded sample's samples pack (its observer's answers, 8 per row)."""

from __future__ import annotations

import pytest

import much_dataset
import much_dataset.samples
from much_dataset import schema
from much_dataset.samples import read_samples_manifest, sample_seed


@pytest.fixture(scope="module")
def rows():
    return much_dataset.load("sample", split="test")


def test_the_embedded_pack_is_the_observers_and_says_how_it_was_drawn():
    manifest = read_samples_manifest("sample")
    assert manifest["config"]["model_name"] == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert (manifest["config"]["temperature"], manifest["config"]["top_p"], manifest["config"]["top_k"]) == (1.0, 0.9,
                                                                                                             20)
    assert manifest["n"] == 8 and manifest["stored_candidates"] == 8 and manifest["engine"] == "hf"
    assert manifest["failures"] == {}
    assert "/" not in manifest["model"]  # named relatively: no path of the machine that drew it


def test_load_samples_returns_eight_samples_for_every_row_of_the_sample(rows, tmp_path):
    """All 606 rows of the embedded sample have their 8 samples, in the sample's row order, seeded by the rule."""
    manifest = read_samples_manifest("sample")
    assert manifest["n_rows"] == rows.num_rows == 606 and set(manifest["rows"]) == set(rows[schema.GENERATION_ID])
    samples = much_dataset.load_samples("sample", dataset=rows, n=8, cache_dir=tmp_path)
    assert samples.num_rows == 8 * rows.num_rows == manifest["n_samples"]
    table = samples.select_columns([schema.GENERATION_ID, schema.SAMPLE_INDEX, schema.OUTPUT_TOKENS,
                                    schema.LOGITS_TOKEN_IDS, schema.SAMPLING]).to_list()
    assert [(r[schema.GENERATION_ID], r[schema.SAMPLE_INDEX]) for r in table] == [
        (gid, i) for gid in rows[schema.GENERATION_ID] for i in range(8)]
    for row in table:
        assert row[schema.SAMPLING]["seed"] == sample_seed(1234, row[schema.SAMPLE_INDEX])
        for token, ids in zip(row[schema.OUTPUT_TOKENS], row[schema.LOGITS_TOKEN_IDS], strict=True):
            assert token in ids and len(ids) in (8, 9)
    grouped = much_dataset.samples_by_row(samples, rows)
    assert len(grouped) == rows.num_rows and set(grouped.counts) == {8}
    # a row of another dataset is named by the error (the pack was drawn for the sample's rows only)
    other = rows.select([0]).map(lambda r: {schema.GENERATION_ID: "not-a-sample-row"})
    with pytest.raises(much_dataset.samples.MissingSamplesError, match="generation_id='not-a-sample-row'"):
        much_dataset.load_samples("sample", dataset=other, cache_dir=tmp_path)


def test_the_embedded_pack_passes_the_one_pack_check_and_every_value_rule():
    """Issue #53: the embedded pack is what its manifest says (sizes, hashes, columns, ids) and every one of its
    4,848 samples keeps the value rules, token ids inside SmolLM2's vocabulary included."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from much_dataset.samples import SAMPLE_PACK_DIR, check_samples_pack
    from much_dataset.samples_checks import samples_pack_damage, value_problems

    manifest = read_samples_manifest("sample")
    assert manifest["vocab_size"] == 49152
    assert samples_pack_damage(SAMPLE_PACK_DIR, manifest) == []
    check_samples_pack("sample", manifest)
    table = pa.concat_tables([pq.read_table(SAMPLE_PACK_DIR / "shards" / name) for name in sorted(manifest["shards"])])
    assert table.num_rows == 4848 and value_problems(table, manifest) == []


def test_the_pack_names_read_from_much_dataset_samples_are_the_pack_modules():
    """The pack-level reading lives in much_dataset.samples_pack; every name much_dataset.samples offered before the
    split is still importable from it, the pack ones as the very objects of samples_pack (one SamplesError class)."""
    import much_dataset.samples_pack

    offered = {"FORMAT", "MANIFEST", "SHARDS", "SAMPLE", "SAMPLE_PACK_DIR", "SamplesError", "MissingSamplesError",
               "sample_seed", "read_samples_manifest", "is_samples_pack", "pack_index", "iter_pack_rows",
               "load_samples", "samples_by_row", "SamplesByRow", "check_samples_pack", "check_sample_texts"}
    assert set(much_dataset.samples.__all__) == offered
    shared = offered & set(much_dataset.samples_pack.__all__)
    assert len(shared) == 11
    for name in shared:
        assert getattr(much_dataset.samples, name) is getattr(much_dataset.samples_pack, name), name
    assert issubclass(much_dataset.samples.MissingSamplesError, much_dataset.samples_pack.SamplesError)
