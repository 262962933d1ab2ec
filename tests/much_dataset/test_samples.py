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


def test_load_samples_returns_eight_samples_for_every_row_the_pack_holds(rows, tmp_path):
    """Every row of the pack has its 8 samples, in the sample's row order; a row the pack does not hold yet (the pack
    is drawn by scripts/data/make_sample_samples.py, resumable, rows in --shard order) is named by the error."""
    manifest = read_samples_manifest("sample")
    positions = [i for i, gid in enumerate(rows[schema.GENERATION_ID]) if gid in manifest["rows"]]
    assert len(positions) == manifest["n_rows"] > 0
    held = rows.select(positions)
    samples = much_dataset.load_samples("sample", dataset=held, n=8, cache_dir=tmp_path)
    assert samples.num_rows == 8 * held.num_rows == manifest["n_samples"]
    table = samples.select_columns([schema.GENERATION_ID, schema.SAMPLE_INDEX, schema.OUTPUT_TOKENS,
                                    schema.LOGITS_TOKEN_IDS, schema.SAMPLING]).to_list()
    assert [(r[schema.GENERATION_ID], r[schema.SAMPLE_INDEX]) for r in table] == [
        (gid, i) for gid in held[schema.GENERATION_ID] for i in range(8)]
    for row in table:
        assert row[schema.SAMPLING]["seed"] == sample_seed(1234, row[schema.SAMPLE_INDEX])
        for token, ids in zip(row[schema.OUTPUT_TOKENS], row[schema.LOGITS_TOKEN_IDS], strict=True):
            assert token in ids and len(ids) in (8, 9)
    grouped = much_dataset.samples_by_row(samples, held)
    assert len(grouped) == held.num_rows and set(grouped.counts) == {8}
    if held.num_rows < rows.num_rows:
        first = next(gid for gid in rows[schema.GENERATION_ID] if gid not in manifest["rows"])
        with pytest.raises(much_dataset.samples.MissingSamplesError, match=f"generation_id={first!r}"):
            much_dataset.load_samples("sample", dataset=rows, cache_dir=tmp_path)
