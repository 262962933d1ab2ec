"""Signal files and their evaluation refuse what would give a wrong or empty table, and keep every number (#11, #12).
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from much_dataset import schema
from much_dataset.synthetic import make_rows
from much_metric.report import EvaluationOptions, evaluate_signals
from much_metric.scoring import MuchMetricWarning
from much_metric.signals import SignalsFormatError, read_signals, write_signals

ROW = {"generation_id": "g0", "signal_name": "s", "values": [0.25, 0.5]}


# -- empty, blank, undecodable and unreadable files ----------------------------------------------------------------

@pytest.mark.parametrize(("name", "content"), [("a.jsonl", b""), ("a.jsonl", b"\n  \n\t\n"),
                                                 ("a.parquet", None)])
def test_empty_or_blank_file_is_an_error_naming_it(tmp_path, name, content):
    path = tmp_path / name
    if content is None:  # a parquet file with the right columns and no row
        write_signals(path, [])
        assert pq.read_table(path).num_rows == 0
    else:
        path.write_bytes(content)
    with pytest.raises(SignalsFormatError, match="holds no record") as info:
        read_signals(path)
    assert str(path) in str(info.value)


def test_an_empty_file_in_a_folder_is_named(tmp_path):
    write_signals(tmp_path / "good.jsonl", [ROW])
    (tmp_path / "empty.jsonl").write_bytes(b"")
    with pytest.raises(SignalsFormatError, match=r"empty\.jsonl: the signal file holds no record"):
        read_signals(tmp_path)


def test_writing_into_an_empty_file_still_works(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_bytes(b"\n")
    assert write_signals(path, [ROW]) == 1
    np.testing.assert_array_equal(read_signals(path)["s"]["g0"], [0.25, 0.5])


def test_undecodable_bytes_name_the_file_and_line(tmp_path):
    path = tmp_path / "scores.jsonl"
    good = json.dumps(ROW).encode()
    path.write_bytes(good + b"\n" + good[:10] + b"\xff\xfe" + good[10:] + b"\n")
    with pytest.raises(SignalsFormatError, match=r"scores\.jsonl:2: not UTF-8 text \(byte 0xff at column 11") as info:
        read_signals(path)
    assert str(path) in str(info.value)


@pytest.mark.parametrize("content", [b"", b"PAR1 not really parquet", b"\x00" * 64])
def test_unreadable_parquet_names_the_file(tmp_path, content):
    path = tmp_path / "scores.parquet"
    path.write_bytes(content)
    with pytest.raises(SignalsFormatError, match="not a readable parquet file") as info:
        read_signals(path)
    assert str(path) in str(info.value)


# -- precision: float64 kept, float32 hub files read unchanged -----------------------------------------------------

AWKWARD = [1 / 3, 0.1 + 0.2, 1e-310, 1 - 2**-53, 123456.789012345678, np.nextafter(0.5, 1)]


@pytest.mark.parametrize("suffix", ["parquet", "jsonl"])
def test_every_float64_bit_is_kept(tmp_path, suffix):
    path = tmp_path / f"s.{suffix}"
    write_signals(path, [{**ROW, "values": AWKWARD}])
    got = read_signals(path)["s"]["g0"]
    assert got.dtype == np.float64
    assert got.tobytes() == np.asarray(AWKWARD, dtype=np.float64).tobytes()
    if suffix == "parquet":
        assert pq.read_schema(path).field("values").type.value_type == pa.float64()


def test_float32_parquet_from_the_hub_is_read_unchanged(tmp_path):
    path = tmp_path / "train-00000-of-00001.parquet"
    values32 = np.asarray(AWKWARD[:2] + [0.7], dtype=np.float32)
    pq.write_table(pa.table({"generation_id": ["g0"], "signal_name": ["s"],
                             "values": pa.array([values32], type=pa.list_(pa.float32()))}), path)
    got = read_signals(path)["s"]["g0"]
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, values32.astype(np.float64))
    # Rewriting a hub file (adding a record) widens its values exactly: nothing changes.
    write_signals(path, [{**ROW, "generation_id": "g1"}])
    np.testing.assert_array_equal(read_signals(path)["s"]["g0"], values32.astype(np.float64))


# -- coverage in the API -------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def rows():
    return make_rows(40, seed=3)


def _signal(rows, keep):
    rng = np.random.default_rng(0)
    return {"x": {r[schema.GENERATION_ID]: rng.random(len(r[schema.OUTPUT_TOKENS])) for r in rows[:keep]}}


def test_partial_coverage_warns_in_the_api(rows):
    with pytest.warns(MuchMetricWarning, match=r"signal 'x' \(f\.jsonl\): 4 of 40 samples have no values"):
        table = evaluate_signals(rows, _signal(rows, 36),
                                 evaluation=EvaluationOptions(bootstrap=None, min_coverage=0.9), source="f.jsonl")
    assert table.coverage == {"x": 0.9}
    assert table.missing == {"x": 4}
    assert table.results[0].coverage == 0.9
    assert table.results[0].score.n_samples == 36


def test_coverage_below_the_threshold_raises(rows):
    with pytest.raises(ValueError, match=r"covers 5 of the dataset's 40 samples \(12\.5%\), below min_coverage=95%"):
        evaluate_signals(rows, _signal(rows, 5), evaluation=EvaluationOptions(bootstrap=None), source="f.jsonl")
    with pytest.raises(ValueError, match="below min_coverage"):
        evaluate_signals(rows, _signal(rows, 37),
                         evaluation=EvaluationOptions(bootstrap=None))  # 92.5% < the default 95%
    with pytest.warns(MuchMetricWarning, match="35 of 40 samples have no values"):
        table = evaluate_signals(rows, _signal(rows, 5),
                                 evaluation=EvaluationOptions(bootstrap=None, min_coverage=0))  # accepted on request
    assert table.coverage == {"x": 5 / 40}


def test_full_coverage_is_reported_without_warning(rows, recwarn):
    table = evaluate_signals(rows, _signal(rows, 40), evaluation=EvaluationOptions(bootstrap=None))
    assert table.coverage == {"x": 1.0} and table.results[0].coverage == 1.0
    assert not [w for w in recwarn if "have no values" in str(w.message)]


@pytest.mark.parametrize("bad", [-0.1, 1.5, "0.9", None])
def test_min_coverage_must_be_a_fraction(rows, bad):
    with pytest.raises(ValueError, match=r"EvaluationOptions: min_coverage must be a number in \[0, 1\]"):
        evaluate_signals(rows, _signal(rows, 40), evaluation=EvaluationOptions(bootstrap=None, min_coverage=bad))


def test_no_signal_at_all_is_an_error(rows):
    with pytest.raises(ValueError, match=r"no signal to evaluate \(f\.jsonl\)"):
        evaluate_signals(rows, {}, evaluation=EvaluationOptions(bootstrap=None), source="f.jsonl")


# -- much run --out keeps the numbers of much run ----------------------------------------------------------------

_TIMING_KEYS = ("uq_seconds", "segmentation_seconds", "total_seconds", "samples_computed", "cost")


@pytest.mark.slow
def test_much_run_with_out_gives_bit_identical_metrics(tmp_path, monkeypatch, capsys):
    from much_metric.cli import main

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    base = ["run", "--source", "sample", "--signals", "token_likelihood,max_likelihood", "--bootstrap", "50",
            "--no-progress"]

    def run(*extra) -> dict:
        path = tmp_path / f"run{len(list(tmp_path.glob('*.json')))}.json"
        assert main([*base, "--json", str(path), *extra]) == 0
        return {r["signal_name"]: {k: v for k, v in r.items() if k not in _TIMING_KEYS}
                for r in json.loads(path.read_text())["results"]}

    plain = run()
    assert sorted(plain) == ["max_likelihood", "token_likelihood"]
    for fmt in ("parquet", "jsonl"):
        out = tmp_path / f"signals_{fmt}"
        assert run("--out", str(out), "--file-format", fmt) == plain  # json floats: repr round-trips, so bit-identical
        assert run("--out", str(out), "--file-format", fmt) == plain  # the rerun reads the files back
        evaluated = tmp_path / f"evaluate_{fmt}.json"
        assert main(["evaluate", "--source", "sample", "--scores", str(out), "--bootstrap", "50",
                     "--json", str(evaluated)]) == 0
        for result in json.loads(evaluated.read_text())["results"]:
            expected = plain[result["signal_name"]]
            for key, value in result.items():
                if key in expected:
                    assert value == expected[key], (fmt, result["signal_name"], key)
            assert result["roc_auc"] == expected["roc_auc"] and result["intervals"] == expected["intervals"]
    capsys.readouterr()
