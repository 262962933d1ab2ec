"""much_dataset.card: the card YAML and the published parquet folder load with plain datasets.load_dataset."""

from __future__ import annotations

import datasets
import numpy as np
import pytest
import yaml

from much_dataset import card, schema, synthetic
from much_dataset.validation import InvalidSampleError

ROWS = synthetic.make_rows(40, seed=5)
SPLIT_ROWS = {"train": ROWS[:28], "test": ROWS[28:]}


def _front_matter(path):
    text = path.read_text(encoding="utf-8")
    assert text.startswith("---\n")
    header, _, body = text[4:].partition("\n---\n")
    return yaml.safe_load(header), body


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    out = tmp_path_factory.mktemp("much")
    card.write_parquet_folder(SPLIT_ROWS, out)
    return out


def test_card_yaml_declares_every_config_and_the_schema_features(folder):
    meta, body = _front_matter(folder / card.CARD_FILENAME)
    assert [c["config_name"] for c in meta["configs"]] == list(card.CONFIG_NAMES)
    assert meta["configs"][0].get("default") is True
    fr = next(c for c in meta["configs"] if c["config_name"] == "fr")
    assert fr["data_files"] == [{"split": "train", "path": "data/fr/train-*.parquet"},
                                {"split": "test", "path": "data/fr/test-*.parquet"}]
    for info in meta["dataset_info"]:
        # The library's own parser must read back exactly the schema's features (Array2D included).
        assert datasets.Features._from_yaml_list(info["features"]) == schema.features()
    sizes = {
        info["config_name"]: {s["name"]: s["num_examples"] for s in info["splits"]} for info in meta["dataset_info"]
    }
    n_fr_train = sum(row[schema.LANG] == "fr" for row in SPLIT_ROWS["train"])
    assert sizes["fr"]["train"] == n_fr_train
    assert sizes["all"] == {"train": 28, "test": 12}
    assert "MUCH" in body


def test_shards_follow_the_documented_layout(folder):
    for lang in schema.LANGUAGES:
        for split in schema.SPLITS:
            assert (folder / card.shard_path(lang, split)).is_file()
    assert card.is_parquet_folder(folder)
    assert not card.is_parquet_folder(folder / "data")


def test_load_dataset_language_config_is_typed_and_filtered(folder, tmp_path):
    ds = datasets.load_dataset(str(folder), "fr", cache_dir=str(tmp_path))
    assert set(ds) == {"train", "test"}
    train = ds["train"]
    assert train.features == schema.features()
    assert isinstance(train.features[schema.LOGITS_VALUES], datasets.Array2D)
    assert set(train[schema.LANG]) == {"fr"}
    expected = [row for row in SPLIT_ROWS["train"] if row[schema.LANG] == "fr"]
    assert list(train[schema.GENERATION_ID]) == [row[schema.GENERATION_ID] for row in expected]
    batch = train.with_format("numpy", dtype=None)[:]
    for got_values, got_ids, row in zip(batch[schema.LOGITS_VALUES], batch[schema.LOGITS_TOKEN_IDS], expected,
                                        strict=True):
        assert got_values.dtype == np.float32 and got_values.shape == (len(row[schema.OUTPUT_TOKENS]), 24)
        np.testing.assert_array_equal(got_values, np.asarray(row[schema.LOGITS_VALUES], dtype=np.float32))
        assert got_ids.dtype == np.int32
        np.testing.assert_array_equal(got_ids, np.asarray(row[schema.LOGITS_TOKEN_IDS]))


def test_load_dataset_default_config_is_all(folder, tmp_path):
    ds = datasets.load_dataset(str(folder), cache_dir=str(tmp_path))
    assert {split: len(part) for split, part in ds.items()} == {"train": 28, "test": 12}
    assert set(ds["test"][schema.GENERATION_ID]) == {row[schema.GENERATION_ID] for row in SPLIT_ROWS["test"]}
    assert ds["test"].features == schema.features()


def test_rows_round_trip_exactly(folder, tmp_path):
    ds = datasets.load_dataset(str(folder), "all", split="train", cache_dir=str(tmp_path))
    by_id = {row[schema.GENERATION_ID]: row for row in ds}
    for row in SPLIT_ROWS["train"]:
        got = by_id[row[schema.GENERATION_ID]]
        for name in schema.COLUMNS:
            if name == schema.LOGITS_VALUES:
                np.testing.assert_array_equal(np.asarray(got[name], np.float32), np.asarray(row[name], np.float32))
            else:
                assert got[name] == row[name], name


def test_without_stopword_mask_and_with_empty_language(tmp_path):
    rows = [row for row in synthetic.make_rows(12, seed=2, with_stopword_mask=False) if row[schema.LANG] != "de"]
    out = tmp_path / "out"
    sizes = card.write_parquet_folder({"train": rows[:6], "test": rows[6:]}, out)
    assert sizes["de"] == {"train": 0, "test": 0}
    meta, _ = _front_matter(out / card.CARD_FILENAME)
    assert [c["config_name"] for c in meta["configs"]] == ["all", "en", "fr", "es"]
    with pytest.raises(ValueError, match="de"):
        datasets.load_dataset(str(out), "de", cache_dir=str(tmp_path / "cache"))
    ds = datasets.load_dataset(str(out), "es", split="test", cache_dir=str(tmp_path / "cache"))
    assert schema.STOPWORD_MASK not in ds.column_names and set(ds[schema.LANG]) == {"es"}


def test_write_validates_rows(tmp_path):
    rows = synthetic.make_rows(5, seed=1)
    rows[3][schema.LABELS].append(schema.CORRECT)
    with pytest.raises(InvalidSampleError) as caught:
        card.write_parquet_folder({"train": rows}, tmp_path)
    assert (caught.value.generation_id, caught.value.field) == (rows[3][schema.GENERATION_ID], schema.LABELS)
    assert not (tmp_path / card.CARD_FILENAME).exists()


def test_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="trash"):
        card.write_parquet_folder({"trash": ROWS[:2]}, tmp_path)
    with pytest.raises(ValueError, match="config"):
        card.data_files("it")
    with pytest.raises(ValueError, match="lack the column"):
        card.write_parquet_folder({"train": [{schema.GENERATION_ID: "x"}]}, tmp_path, validate=False)
    rows = synthetic.make_rows(3, seed=0)
    rows[1][schema.LANG] = "it"
    with pytest.raises(ValueError, match="lang outside"):
        card.write_parquet_folder({"train": rows}, tmp_path, validate=False)
