"""much_dataset.load on local folders: never stale after an in-place rewrite; bad files named with their column."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import much_dataset
from much_dataset import card, schema, synthetic
from much_dataset.validation import InvalidFileError
from tests.much_dataset._helpers import write_rows

ROWS = synthetic.make_rows(24, seed=21)
SPLIT_ROWS = {"train": ROWS[:16], "test": ROWS[16:]}


def _shard(folder, split="train"):
    return sorted((folder / "data").glob(f"*/{split}-*.parquet"))[0]


@pytest.mark.parametrize("keep_mtime", [False, True])
def test_published_folder_rewritten_in_place_is_reloaded(tmp_path, keep_mtime):
    folder = tmp_path / "much"
    card.write_parquet_folder(SPLIT_ROWS, folder)
    assert len(much_dataset.load(folder, split="train", cache_dir=tmp_path / "cache")) == 16
    shard = _shard(folder)
    stat = shard.stat()
    table = pq.read_table(shard)
    pq.write_table(table.slice(0, 1), shard)  # in place, same path
    if keep_mtime:  # a copy tool that preserves times must not fool the loader either
        os.utime(shard, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    again = much_dataset.load(folder, split="train", cache_dir=tmp_path / "cache")
    assert len(again) == 16 - len(table) + 1


def test_published_folder_relabelled_in_place_gives_the_new_labels(tmp_path):
    folder = tmp_path / "much"
    card.write_parquet_folder(SPLIT_ROWS, folder)
    first = much_dataset.load(folder, split="test", cache_dir=tmp_path / "cache")
    flipped = [dict(row, labels=[-label for label in row[schema.LABELS]]) for row in SPLIT_ROWS["test"]]
    card.write_parquet_folder({"train": SPLIT_ROWS["train"], "test": flipped}, folder)
    second = much_dataset.load(folder, split="test", cache_dir=tmp_path / "cache")
    assert [list(x) for x in second[schema.LABELS]] == [[-v for v in x] for x in first[schema.LABELS]]


def test_rows_folder_rewritten_in_place_is_reloaded(tmp_path):
    folder = write_rows(tmp_path / "out", SPLIT_ROWS)
    path = folder / "rows" / "train.jsonl"
    assert len(much_dataset.load(folder, split="train", cache_dir=tmp_path / "cache")) == 16
    stat = path.stat()
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    # Same size and mtime, other content: the rows of two rows swapped.
    path.write_text("".join([lines[1], lines[0], *lines[2:]]), encoding="utf-8")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    again = much_dataset.load(folder, split="train", cache_dir=tmp_path / "cache")
    assert list(again[schema.GENERATION_ID][:2]) == [ROWS[1][schema.GENERATION_ID], ROWS[0][schema.GENERATION_ID]]


@pytest.mark.parametrize("damage", ["truncated", "random bytes"])
def test_unreadable_parquet_shard_names_the_file(tmp_path, damage):
    folder = tmp_path / "much"
    card.write_parquet_folder(SPLIT_ROWS, folder)
    shard = _shard(folder, "test")
    data = shard.read_bytes()
    shard.write_bytes(data[: len(data) // 2] if damage == "truncated" else os.urandom(len(data)))
    with pytest.raises(InvalidFileError) as caught:
        much_dataset.load(folder, cache_dir=tmp_path / "cache")
    assert caught.value.path == shard
    assert str(shard) in str(caught.value)


def _hub_copy(tmp_path, mutate):
    """A folder laid out like a snapshot of orailix/MUCH, with one column of the train shard rewritten by mutate."""
    (tmp_path / "hub" / "data").mkdir(parents=True)
    paths = {}
    for split, rows in SPLIT_ROWS.items():
        table = pa.Table.from_pylist([{name: row[name] for name in schema.HUB_COLUMNS} for row in rows])
        if split == "train":
            table = mutate(table)
        paths[split] = tmp_path / "hub" / "data" / f"{split}-00000-of-00001.parquet"
        pq.write_table(table, paths[split])
    return tmp_path / "hub", paths


def _as_float(table, column, row, shift):
    values = table[column].to_pylist()
    values = [[float(v) for v in vs] if vs is not None else None for vs in values]
    values[row][0] += shift
    return table.set_column(table.schema.get_field_index(column), column, pa.array(values, pa.list_(pa.float64())))


@pytest.mark.parametrize("column", [schema.LABELS, schema.OUTPUT_TOKENS, schema.HUMAN_LABELS_0])
def test_non_integral_ints_name_the_file_the_column_and_the_row(tmp_path, column):
    folder, paths = _hub_copy(tmp_path, lambda t: _as_float(t, column, 3, 0.5))
    with pytest.raises(InvalidFileError) as caught:
        much_dataset.load(folder, cache_dir=tmp_path / "cache")
    assert (caught.value.path, caught.value.column) == (paths["train"], column)
    assert caught.value.generation_id == SPLIT_ROWS["train"][3][schema.GENERATION_ID]
    assert "1.5" in str(caught.value) or ".5" in str(caught.value)


def test_integral_floats_are_accepted(tmp_path):
    folder, _ = _hub_copy(tmp_path, lambda t: _as_float(t, schema.LABELS, 3, 0.0))
    with pytest.warns(UserWarning, match="stopword_mask"):
        ds = much_dataset.load(folder, split="train", cache_dir=tmp_path / "cache")
    assert [list(x) for x in ds[schema.LABELS]] == [r[schema.LABELS] for r in SPLIT_ROWS["train"]]


def test_nested_float_token_ids_name_the_file(tmp_path):
    def mutate(table):
        values = table[schema.LOGITS_TOKEN_IDS].to_pylist()
        values = [[[float(v) for v in ids] for ids in row] for row in values]
        values[2][1][4] += 0.5
        typ = pa.list_(pa.list_(pa.float64()))
        return table.set_column(table.schema.get_field_index(schema.LOGITS_TOKEN_IDS), schema.LOGITS_TOKEN_IDS,
                                pa.array(values, typ))

    folder, paths = _hub_copy(tmp_path, mutate)
    with pytest.raises(InvalidFileError) as caught:
        much_dataset.load(folder, cache_dir=tmp_path / "cache")
    assert (caught.value.path, caught.value.column) == (paths["train"], schema.LOGITS_TOKEN_IDS)
    assert caught.value.generation_id == SPLIT_ROWS["train"][2][schema.GENERATION_ID]


def test_float_labels_in_rows_jsonl_name_the_file_and_the_column(tmp_path):
    import copy

    rows = copy.deepcopy(SPLIT_ROWS["train"])
    rows[5][schema.LABELS][0] = 1.5
    folder = write_rows(tmp_path / "out", {"train": rows, "test": SPLIT_ROWS["test"]})
    with pytest.raises(ValueError) as caught:
        much_dataset.load(folder, cache_dir=tmp_path / "cache")
    text = str(caught.value)
    assert "train.jsonl" in text and schema.LABELS in text and rows[5][schema.GENERATION_ID] in text
