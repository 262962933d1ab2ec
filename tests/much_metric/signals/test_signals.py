import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from much_dataset import schema
from much_metric.signals._files import SignalsFormatError, read_signals, write_signals


def _rows(signal="token_likelihood", n=5, seed=0):
    rng = np.random.default_rng(seed)
    return [
        {"generation_id": f"g{i}", "signal_name": signal, "values": rng.random(int(rng.integers(1, 9))).tolist()}
        for i in range(n)
    ]


@pytest.mark.parametrize("suffix", ["jsonl", "parquet"])
def test_round_trip(tmp_path, suffix):
    path = tmp_path / f"signals.{suffix}"
    rows = _rows() + _rows("ccp_24_8_M", seed=1)
    assert write_signals(path, rows) == 10
    got = read_signals(path)
    assert sorted(got) == ["ccp_24_8_M", "token_likelihood"]
    for row in rows:
        values = got[row["signal_name"]][row["generation_id"]]
        assert values.dtype == np.float64
        # Both encodings keep float64 exactly (#11: much run --out must evaluate the numbers it computed).
        np.testing.assert_array_equal(values, row["values"])


@pytest.mark.parametrize("suffix", ["jsonl", "parquet"])
def test_rewriting_a_pair_replaces_it(tmp_path, suffix):
    path = tmp_path / f"s.{suffix}"
    write_signals(path, _rows())
    write_signals(path, _rows())  # same rows again: nothing duplicated
    assert write_signals(path, [{"generation_id": "g2", "signal_name": "token_likelihood", "values": [0.5, 0.25]},
                                {"generation_id": "g9", "signal_name": "token_likelihood", "values": [1.0]}]) == 6
    got = read_signals(path)["token_likelihood"]
    assert len(got) == 6
    np.testing.assert_array_equal(got["g2"], [0.5, 0.25])
    if suffix == "jsonl":
        assert len(path.read_text().splitlines()) == 6


def test_parquet_has_the_hub_schema(tmp_path):
    path = tmp_path / "s.parquet"
    write_signals(path, _rows())
    table = pq.read_table(path)
    assert table.column_names == list(schema.SIGNAL_COLUMNS)
    assert table.schema.field("values").type.value_type == pa.float64()


def test_hub_style_parquet_via_datasets(tmp_path):
    import datasets

    rows = _rows(n=4)
    path = tmp_path / "train-00000-of-00001.parquet"
    datasets.Dataset.from_list(rows, features=schema.signal_features()).to_parquet(str(path))
    got = read_signals(path)["token_likelihood"]
    np.testing.assert_allclose(got["g3"], rows[3]["values"], rtol=1e-6)


def test_reference_jsonl_with_duplicates_keeps_last_and_warns(tmp_path):
    # The reference's writer appends duplicates (docs/reference-behaviour.md#duplicate-signal-rows); reading must not
    # count a pair twice.
    path = tmp_path / "token_likelihood.jsonl"
    lines = [{"generation_id": "a", "signal_name": "token_likelihood", "values": [0.1, 0.2]},
             {"generation_id": "a", "signal_name": "token_likelihood", "values": [0.3, 0.4]}]
    path.write_text("\n".join(json.dumps(x, separators=(",", ":")) for x in lines) + "\n")
    with pytest.warns(UserWarning, match="1 duplicate"):
        got = read_signals(path)
    np.testing.assert_array_equal(got["token_likelihood"]["a"], [0.3, 0.4])


def test_folder_and_selection(tmp_path):
    write_signals(tmp_path / "a.jsonl", _rows("max_likelihood"))
    write_signals(tmp_path / "b.parquet", _rows("token_entropy_24"))
    assert sorted(read_signals(tmp_path)) == ["max_likelihood", "token_entropy_24"]
    assert list(read_signals(tmp_path, signal_names=["max_likelihood"])) == ["max_likelihood"]
    with pytest.raises(KeyError, match=r"\['nope'\] not found"):
        read_signals(tmp_path, signal_names=["nope"])


def test_nested_mapping_input_round_trips(tmp_path):
    path = tmp_path / "s.jsonl"
    write_signals(path, _rows())
    copy = tmp_path / "copy.parquet"
    write_signals(copy, read_signals(path))
    for gid, values in read_signals(path)["token_likelihood"].items():
        np.testing.assert_allclose(read_signals(copy)["token_likelihood"][gid], values, rtol=1e-7)


@pytest.mark.parametrize(
    ("record", "pattern"),
    [
        ({"generation_id": "x1", "signal_name": "s", "values": [0.1, float("nan")]}, r"'x1'.*non-finite.*token 1"),
        ({"generation_id": "x1", "signal_name": "s", "values": []}, r"'x1'.*non-empty 1-D"),
        ({"generation_id": "x1", "signal_name": "s", "values": ["a"]}, r"'x1'.*a str at token 0.*real numbers"),
        ({"generation_id": "x1", "signal_name": "", "values": [0.1]}, r"'x1'.*signal_name"),
        ({"generation_id": "", "signal_name": "s", "values": [0.1]}, r"generation_id.*non-empty string"),
        ({"generation_id": "x1", "values": [0.1]}, r"lacks field\(s\) \['signal_name'\]"),
    ],
)
def test_bad_records_are_refused_before_writing(tmp_path, record, pattern):
    path = tmp_path / "s.jsonl"
    write_signals(path, _rows())
    before = path.read_bytes()
    with pytest.raises(SignalsFormatError, match=pattern):
        write_signals(path, [*_rows(seed=5), record])
    assert path.read_bytes() == before  # nothing written


def test_file_errors(tmp_path):
    with pytest.raises(SignalsFormatError, match="must end with .jsonl or .parquet"):
        write_signals(tmp_path / "s.csv", _rows())
    with pytest.raises(FileNotFoundError):
        read_signals(tmp_path / "missing.jsonl")
    with pytest.raises(FileNotFoundError, match="no .jsonl or .parquet"):
        read_signals(tmp_path)
    (tmp_path / "bad.jsonl").write_text('{"generation_id": "a"\n')
    with pytest.raises(SignalsFormatError, match=r"bad.jsonl:1: not a JSON object"):
        read_signals(tmp_path / "bad.jsonl")


@pytest.mark.parametrize("suffix", ["jsonl", "parquet"])
def test_files_without_signal_name_are_named_after_the_file(tmp_path, suffix):
    import datasets

    rows = [{"generation_id": "g0", "values": [0.1, 0.9]}, {"generation_id": "g1", "values": [0.4]}]
    path = tmp_path / f"my_method.{suffix}"
    if suffix == "jsonl":
        path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    else:
        datasets.Dataset.from_list(rows).to_parquet(str(path))
    got = read_signals(path)
    assert list(got) == ["my_method"]
    np.testing.assert_allclose(got["my_method"]["g0"], [0.1, 0.9])
