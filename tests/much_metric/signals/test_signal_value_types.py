"""Signal files whose ``values`` are not real numbers are refused, naming the file, the row and the type found (#22):
never strings parsed as numbers, timestamps read as microseconds, nested lists flattened or booleans read as 0/1."""

from __future__ import annotations

import datetime
import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from much_metric.signals import SignalsFormatError, read_signals, write_signals


def _parquet(path, values: pa.Array) -> None:
    n = len(values)
    pq.write_table(pa.table({"generation_id": pa.array([f"g{i}" for i in range(n)]),
                             "signal_name": pa.array(["s"] * n), "values": values}), path)


@pytest.mark.parametrize(("values", "found"), [
    (pa.array([["0.5", "0.25"], ["1"]], type=pa.list_(pa.string())), "string"),
    (pa.array([[datetime.datetime(2024, 1, 1)], [datetime.datetime(2024, 1, 2)]], type=pa.list_(pa.timestamp("us"))),
     "timestamp"),
    (pa.array([[[0.5, 0.25]], [[1.0]]], type=pa.list_(pa.list_(pa.float64()))), "list<element: double>>"),
    (pa.array([[True, False], [True]], type=pa.list_(pa.bool_())), "bool"),
    (pa.array([0.5, 0.25], type=pa.float64()), "double"),  # a scalar column: one number per row, not per token
    (pa.array([["a"], ["b"]], type=pa.list_(pa.dictionary(pa.int8(), pa.string()))), "dictionary"),
])
def test_parquet_values_of_the_wrong_type_are_refused(tmp_path, values, found):
    path = tmp_path / "scores.parquet"
    _parquet(path, values)
    with pytest.raises(SignalsFormatError, match="values") as info:
        read_signals(path)
    message = str(info.value)
    assert str(path) in message and "row 0" in message and found in message


@pytest.mark.parametrize("item", [pa.float16(), pa.float32(), pa.float64(), pa.int8(), pa.int64(), pa.uint32()])
def test_parquet_values_of_any_real_number_type_are_read(tmp_path, item):
    path = tmp_path / "scores.parquet"
    _parquet(path, pa.array([[0, 1], [1]], type=pa.list_(item)))
    np.testing.assert_array_equal(read_signals(path)["s"]["g0"], [0.0, 1.0])
    _parquet(path, pa.array([[0, 1], [1]], type=pa.large_list(item)))
    np.testing.assert_array_equal(read_signals(path)["s"]["g0"], [0.0, 1.0])


@pytest.mark.parametrize(("values", "found"), [
    (["0.5", "0.25"], "str"),
    ([True, 0.5], "bool"),
    ([False, True], "bool"),
    ([[0.5, 0.25]], "list"),
    (0.5, "float"),  # a scalar instead of a list
    ("0.5", "str"),
    ({"a": 1}, "dict"),
    ([0.5, None], "NoneType"),
])
def test_jsonl_values_of_the_wrong_type_are_refused(tmp_path, values, found):
    path = tmp_path / "scores.jsonl"
    good = {"generation_id": "g0", "signal_name": "s", "values": [0.5]}
    bad = {"generation_id": "g1", "signal_name": "s", "values": values}
    path.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(SignalsFormatError) as info:
        read_signals(path)
    message = str(info.value)
    assert f"{path}:2" in message and "'g1'" in message and found in message


@pytest.mark.parametrize(("digits", "error"), [(400, "too large for a float64 at token 1"),
                                               (5000, "not a JSON object")])  # past Python's int-parsing limit
def test_a_huge_json_integer_is_a_clear_error(tmp_path, digits, error):
    path = tmp_path / "scores.jsonl"
    path.write_text('{"generation_id": "g0", "signal_name": "s", "values": [0.5, 1' + "0" * digits + "]}\n")
    with pytest.raises(SignalsFormatError, match=rf"scores\.jsonl:1.*{error}"):
        read_signals(path)


def test_json_integers_and_floats_are_numbers(tmp_path):
    path = tmp_path / "scores.jsonl"
    path.write_text('{"generation_id": "g0", "signal_name": "s", "values": [0, 1, 0.5, 10000000000000000000000]}\n')
    np.testing.assert_array_equal(read_signals(path)["s"]["g0"], [0.0, 1.0, 0.5, 1e22])


@pytest.mark.parametrize("values", [["0.5"], [True], np.array([True, False]), np.array(["0.5"]),
                                    np.array(["2024-01-01"], dtype="datetime64[us]")])
def test_writing_values_that_are_not_numbers_is_refused(tmp_path, values):
    with pytest.raises(SignalsFormatError, match="values"):
        write_signals(tmp_path / "a.jsonl", [{"generation_id": "g0", "signal_name": "s", "values": values}])
    assert not (tmp_path / "a.jsonl").exists()


def test_writing_numpy_numbers_still_works(tmp_path):
    rows = [{"generation_id": "g0", "signal_name": "s", "values": np.array([1, 2], dtype=np.int32)},
            {"generation_id": "g1", "signal_name": "s", "values": [np.float32(0.5), np.int64(3), 2]}]
    write_signals(tmp_path / "a.parquet", rows)
    read = read_signals(tmp_path / "a.parquet")["s"]
    np.testing.assert_array_equal(read["g0"], [1.0, 2.0])
    np.testing.assert_array_equal(read["g1"], [0.5, 3.0, 2.0])


def test_much_evaluate_reports_a_wrongly_typed_file_in_one_line(tmp_path, capsys, monkeypatch):
    from much_metric.cli import main

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    path = tmp_path / "scores.parquet"
    _parquet(path, pa.array([["0.5"], ["1"]], type=pa.list_(pa.string())))
    assert main(["evaluate", "--source", "sample", "--scores", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("much evaluate: error: ") and err.count("\n") == 1, err
    assert str(path) in err and "string>" in err and "row 0" in err
