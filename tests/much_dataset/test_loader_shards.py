"""A published folder whose shards disagree (#22): each problem is named at load time with the shard's path; a shard
written with plain pyarrow types is widened to the schema when that loses nothing; all-empty shards are an error."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import much_dataset
from much_dataset import card, schema, synthetic
from much_dataset.validation import InvalidFileError

ROWS = synthetic.make_rows(24, seed=21)
SPLIT_ROWS = {"train": ROWS[:16], "test": ROWS[16:]}


@pytest.fixture()
def folder(tmp_path):
    folder = tmp_path / "much"
    card.write_parquet_folder(SPLIT_ROWS, folder)
    return folder


def _shards(folder, split="train"):
    return sorted((folder / "data").glob(f"*/{split}-*.parquet"))


def test_a_shard_without_stopword_mask_is_named_at_load_time(folder):
    shard = _shards(folder)[1]
    table = pq.read_table(shard)
    pq.write_table(table.drop_columns([schema.STOPWORD_MASK]), shard)
    with pytest.raises(InvalidFileError) as caught:
        much_dataset.load(folder, split="train")
    assert caught.value.path == shard and caught.value.column == schema.STOPWORD_MASK
    assert str(shard) in str(caught.value) and "other shards" in str(caught.value)


def test_a_shard_without_a_much_column_is_named(folder):
    shard = _shards(folder)[0]
    pq.write_table(pq.read_table(shard).drop_columns([schema.LABELS]), shard)
    with pytest.raises(InvalidFileError) as caught:
        much_dataset.load(folder, split="train")
    assert caught.value.path == shard and caught.value.column == schema.LABELS


def test_all_shards_empty_is_an_error(folder):
    for shard in _shards(folder):
        table = pq.read_table(shard)
        pq.write_table(table.slice(0, 0), shard)
    with pytest.raises(InvalidFileError, match="no row") as caught:
        much_dataset.load(folder, split="train")
    assert str(_shards(folder)[0]) in str(caught.value)
    assert len(much_dataset.load(folder, split="test")) == len(SPLIT_ROWS["test"])  # the other split is fine


def test_one_empty_shard_among_full_ones_is_fine(folder):
    shard = _shards(folder)[0]
    n = pq.read_table(shard).num_rows
    pq.write_table(pq.read_table(shard).slice(0, 0), shard)
    assert len(much_dataset.load(folder, split="train")) == 16 - n


def test_a_plain_typed_shard_is_widened_to_the_schema(folder):
    expected = much_dataset.load(folder, split="train").to_dict()
    shard = _shards(folder)[2]
    plain = pa.Table.from_pylist(pq.read_table(shard).to_pylist())  # list<list<double>>, list<int64>, no metadata
    assert plain.schema.field(schema.LOGITS_VALUES).type == pa.list_(pa.list_(pa.float64()))
    pq.write_table(plain, shard)
    loaded = much_dataset.load(folder, split="train")
    assert loaded.features == much_dataset.load(folder, split="test").features
    got = loaded.to_dict()
    assert got[schema.GENERATION_ID] == expected[schema.GENERATION_ID]
    for name in schema.COLUMNS:
        assert got[name] == expected[name], name


@pytest.mark.parametrize(("column", "value", "found"), [
    (schema.LABELS, 300, "int8"),
    (schema.OUTPUT_TOKENS, 2**40, "int32"),
    (schema.LOGITS_VALUES, 1e300, "float32"),
])
def test_a_plain_shard_that_does_not_fit_the_schema_is_named(folder, column, value, found):
    shard = _shards(folder)[2]
    rows = pq.read_table(shard).to_pylist()
    cell = rows[1][column]
    if isinstance(cell[0], list):
        cell[0][0] = value
    else:
        cell[0] = value
    pq.write_table(pa.Table.from_pylist(rows), shard)
    with pytest.raises(InvalidFileError) as caught:
        much_dataset.load(folder, split="train")
    assert caught.value.path == shard and caught.value.column == column
    assert found in str(caught.value)


def test_a_hub_copy_with_plain_types_still_loads(tmp_path):
    (tmp_path / "hub" / "data").mkdir(parents=True)
    for split, rows in SPLIT_ROWS.items():
        table = pa.Table.from_pylist([{name: row[name] for name in schema.HUB_COLUMNS} for row in rows])
        pq.write_table(table, tmp_path / "hub" / "data" / f"{split}-00000-of-00001.parquet")
    with pytest.warns(UserWarning, match="stopword_mask"):
        loaded = much_dataset.load(tmp_path / "hub", split="train")
    np.testing.assert_allclose(np.asarray(loaded[0][schema.LOGITS_VALUES], dtype=np.float64),
                               np.asarray(SPLIT_ROWS["train"][0][schema.LOGITS_VALUES]), rtol=1e-6)
