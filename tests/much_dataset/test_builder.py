"""MuchBuilder: rows/{train,test}.jsonl -> typed dataset; configs filter by lang; rows validated while building."""

from __future__ import annotations

import json
import os

import datasets
import numpy as np
import pytest

from much_dataset import schema, synthetic
from much_dataset.builder import MuchBuilder, read_rows_jsonl
from much_dataset.validation import InvalidSampleError, rows_to_table
from tests.much_dataset._helpers import write_rows

ROWS = synthetic.make_rows(30, seed=8)
SPLIT_ROWS = {"train": ROWS[:22], "test": ROWS[22:]}


def _build(data_dir, cache, config="all", **kwargs):
    builder = MuchBuilder(config_name=config, data_dir=str(data_dir), cache_dir=str(cache), **kwargs)
    builder.download_and_prepare()
    return builder, builder.as_dataset()


def _assert_rows_equal(dataset, rows):
    assert len(dataset) == len(rows)
    for got, row in zip(dataset, rows, strict=True):
        for name in dataset.column_names:
            if name == schema.LOGITS_VALUES:
                np.testing.assert_array_equal(np.asarray(got[name], np.float32), np.asarray(row[name], np.float32))
            else:
                assert got[name] == row[name], (row[schema.GENERATION_ID], name)


def test_round_trip_all_config_equals_input(tmp_path):
    folder = write_rows(tmp_path / "out", SPLIT_ROWS)
    _, ds = _build(folder, tmp_path / "cache")
    assert set(ds) == {"train", "test"}
    for split, rows in SPLIT_ROWS.items():
        assert ds[split].features == schema.features()
        assert isinstance(ds[split].features[schema.LOGITS_TOKEN_IDS], datasets.Array2D)
        _assert_rows_equal(ds[split], rows)


@pytest.mark.parametrize("lang", schema.LANGUAGES)
def test_language_config_keeps_only_that_language(tmp_path, lang):
    folder = write_rows(tmp_path / "out", SPLIT_ROWS)
    _, ds = _build(folder, tmp_path / "cache", config=lang)
    for split, rows in SPLIT_ROWS.items():
        _assert_rows_equal(ds[split], [row for row in rows if row[schema.LANG] == lang])


def test_data_dir_may_be_the_rows_folder_itself(tmp_path):
    folder = write_rows(tmp_path / "out", SPLIT_ROWS)
    _, ds = _build(folder / "rows", tmp_path / "cache", config="de")
    assert set(ds["train"][schema.LANG]) == {"de"}


def test_rows_without_stopword_mask(tmp_path):
    rows = synthetic.make_rows(8, seed=4, with_stopword_mask=False)
    folder = write_rows(tmp_path / "out", {"train": rows[:5], "test": rows[5:]})
    _, ds = _build(folder, tmp_path / "cache")
    assert ds["train"].features == schema.features(with_stopword_mask=False)
    _assert_rows_equal(ds["test"], rows[5:])


def test_invalid_row_raises_naming_sample_and_field(tmp_path):
    rows = [dict(row) for row in SPLIT_ROWS["test"]]
    rows[3] = {**rows[3], schema.TOKEN_CHUNKS: rows[3][schema.TOKEN_CHUNKS][::-1]}
    folder = write_rows(tmp_path / "out", {"train": SPLIT_ROWS["train"], "test": rows})
    with pytest.raises(Exception) as caught:  # datasets wraps generator errors in DatasetGenerationError
        _build(folder, tmp_path / "cache")
    error = caught.value if isinstance(caught.value, InvalidSampleError) else caught.value.__cause__
    assert isinstance(error, InvalidSampleError)
    assert (error.generation_id, error.field) == (rows[3][schema.GENERATION_ID], schema.TOKEN_CHUNKS)


def test_drop_mode_leaves_bad_rows_out_and_reports_them(tmp_path):
    rows = [json.loads(json.dumps(row)) for row in SPLIT_ROWS["train"]]
    rows[0][schema.LOGITS_VALUES][1][0] = -1.0
    rows[5][schema.LABELS][0] = 0
    rows.append(dict(rows[2]))  # duplicate generation_id
    folder = write_rows(tmp_path / "out", {"train": rows, "test": SPLIT_ROWS["test"]})
    builder, ds = _build(folder, tmp_path / "cache", on_error="drop")
    expected = [row for index, row in enumerate(rows) if index not in (0, 5, len(rows) - 1)]
    _assert_rows_equal(ds["train"], expected)
    assert sorted((p.generation_id, p.field) for p in builder.problems) == sorted([
        (rows[0][schema.GENERATION_ID], schema.LOGITS_VALUES),
        (rows[5][schema.GENERATION_ID], schema.LABELS),
        (rows[2][schema.GENERATION_ID], schema.GENERATION_ID),
    ])


def test_duplicate_far_apart_is_caught(tmp_path):
    rows = SPLIT_ROWS["train"] + [SPLIT_ROWS["train"][1]]
    folder = write_rows(tmp_path / "out", {"train": rows, "test": SPLIT_ROWS["test"]})
    with pytest.raises(Exception) as caught:
        _build(folder, tmp_path / "cache")
    error = caught.value if isinstance(caught.value, InvalidSampleError) else caught.value.__cause__
    assert error.field == schema.GENERATION_ID and error.generation_id == rows[1][schema.GENERATION_ID]


def test_fast_arrow_reader_equals_python_json(tmp_path):
    """Differential: Arrow's JSON reader gives the same table as json.loads per line + pyarrow.Table.from_pylist."""
    folder = write_rows(tmp_path / "out", {"train": ROWS})
    path = folder / "rows" / "train.jsonl"
    fast = read_rows_jsonl(path)
    slow = rows_to_table([json.loads(line) for line in path.read_text().splitlines()])
    assert fast.column_names == slow.column_names
    for name in fast.column_names:
        assert fast[name].to_pylist() == slow[name].to_pylist(), name


def test_nan_and_wrong_types_fall_back_and_name_the_row(tmp_path):
    rows = [json.loads(json.dumps(row)) for row in SPLIT_ROWS["test"]]
    rows[2][schema.LOGITS_VALUES][3][0] = float("nan")  # json.dumps writes NaN: not JSON, Arrow rejects the file
    folder = write_rows(tmp_path / "nan", {"train": SPLIT_ROWS["train"], "test": rows})
    with pytest.raises(Exception) as caught:
        _build(folder, tmp_path / "cache")
    error = caught.value if isinstance(caught.value, InvalidSampleError) else caught.value.__cause__
    assert (error.generation_id, error.field) == (rows[2][schema.GENERATION_ID], schema.LOGITS_VALUES)
    rows = [json.loads(json.dumps(row)) for row in SPLIT_ROWS["test"]]
    rows[4][schema.LABELS] = ["yes"] * len(rows[4][schema.LABELS])
    folder = write_rows(tmp_path / "types", {"train": SPLIT_ROWS["train"], "test": rows})
    with pytest.raises(Exception) as caught:
        _build(folder, tmp_path / "cache2")
    error = caught.value if isinstance(caught.value, InvalidSampleError) else caught.value.__cause__
    assert (error.generation_id, error.field) == (rows[4][schema.GENERATION_ID], schema.LABELS)


def test_rebuilt_when_the_export_changes(tmp_path):
    folder = write_rows(tmp_path / "out", SPLIT_ROWS)
    _, first = _build(folder, tmp_path / "cache")
    assert len(first["train"]) == 22
    write_rows(folder, {"train": SPLIT_ROWS["train"][:10]})
    path = folder / "rows" / "train.jsonl"
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
    _, second = _build(folder, tmp_path / "cache")
    assert len(second["train"]) == 10


def test_missing_split_file_and_bad_json(tmp_path):
    folder = write_rows(tmp_path / "out", {"train": SPLIT_ROWS["train"]})
    with pytest.raises(FileNotFoundError, match="test.jsonl"):
        _build(folder, tmp_path / "cache")
    with (folder / "rows" / "test.jsonl").open("w") as handle:
        handle.write(json.dumps(SPLIT_ROWS["test"][0]) + "\n{not json\n")
    with pytest.raises(Exception) as caught:
        _build(folder, tmp_path / "cache2")
    assert "test.jsonl:2" in str(caught.value) + str(caught.value.__cause__)


def test_bad_options(tmp_path):
    folder = write_rows(tmp_path / "out", SPLIT_ROWS)
    with pytest.raises(ValueError, match="on_error"):
        MuchBuilder(config_name="all", data_dir=str(folder), cache_dir=str(tmp_path), on_error="skip")
    with pytest.raises(ValueError, match="splits"):
        MuchBuilder(config_name="all", data_dir=str(folder), cache_dir=str(tmp_path), splits=("trash",))
    with pytest.raises(ValueError, match="data_dir"):
        MuchBuilder(config_name="all", cache_dir=str(tmp_path)).download_and_prepare()
