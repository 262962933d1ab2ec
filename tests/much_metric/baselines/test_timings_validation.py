"""``timings.json`` and ``--generation-time`` are validated like signal files (#22): a negative time, a boolean, a
string or a JSON value of the wrong shape is a clear error naming the file, the signal and the field -- never shown
as ``<0.001s`` or ``1.0s``, never an AttributeError."""

from __future__ import annotations

import json

import pytest

from much_metric.baselines.runtime import generation_time, read_timings


def _write(tmp_path, payload, name="timings.json"):
    path = tmp_path / name
    path.write_text(payload if isinstance(payload, str) else json.dumps(payload), encoding="utf-8")
    return path


@pytest.mark.parametrize(("payload", "message"), [
    ({"ml": {"seconds": -3.0}}, r"signal 'ml': field 'seconds' is -3\.0"),
    ({"ml": {"seconds": True}}, r"signal 'ml': field 'seconds' is True \(bool\)"),
    ({"ml": {"seconds": "0.5"}}, r"signal 'ml': field 'seconds' is '0\.5' \(str\)"),
    ({"ml": {"seconds": None}}, r"field 'seconds' is None"),
    ({"ml": {"seconds": 1e400}}, r"field 'seconds' is inf"),
    ('{"ml": {"seconds": 1' + "0" * 400 + "}}", r"field 'seconds' is 1000"),  # an int beyond float64
    ({"ml": {"seconds": 1.0, "n_samples": -1}}, r"field 'n_samples' is -1"),
    ({"ml": {"seconds": 1.0, "n_tokens": 2.5}}, r"field 'n_tokens' is 2\.5"),
    ({"ml": 0.5}, r"signal 'ml': a float, not an object"),
    ({"ml": {"n_samples": 3}}, r"signal 'ml': no field 'seconds'"),
    ([{"seconds": 1}], r"a JSON list, not an object"),
    ('"x"', r"a JSON str, not an object"),
    ("{not json", r"not valid JSON"),
    ('{"ml": {"seconds": 1' + "0" * 5000 + "}}", r"not valid JSON"),  # past Python's int-parsing limit
])
def test_bad_timings_are_named(tmp_path, payload, message):
    path = _write(tmp_path, payload)
    with pytest.raises(ValueError, match=message) as caught:
        read_timings(path)
    assert str(path) in str(caught.value)


def test_good_timings_are_read(tmp_path):
    path = _write(tmp_path, {"ml": {"seconds": 0, "n_samples": 3, "n_tokens": 40, "reference_window": None},
                             "te": {"seconds": 1.5}})
    assert read_timings(path) == {"ml": {"seconds": 0.0, "n_samples": 3, "n_tokens": 40, "reference_window": None},
                                  "te": {"seconds": 1.5}}


@pytest.mark.parametrize(("payload", "message"), [
    ([1, 2], r"a JSON list, not an object"),
    ({"seconds_per_token": True}, r"'seconds_per_token' must be a positive number.*True"),
    ({"seconds_per_token": "0.1"}, r"'seconds_per_token' must be a positive number.*'0\.1'"),
    ({"seconds_per_token": 1e400}, r"'seconds_per_token' must be a positive number.*inf"),
    ({"seconds_per_token": 0.1, "extrapolate": "minutes"}, r"'extrapolate' must be 'tokens' or 'questions'"),
])
def test_bad_generation_time_files_are_named(tmp_path, payload, message):
    path = _write(tmp_path, payload, "generation_time.json")
    with pytest.raises(ValueError, match=message) as caught:
        generation_time(str(path), data_source="sample", n_samples=1, n_tokens=1)
    assert str(path) in str(caught.value)


@pytest.mark.parametrize("value", [True, False, -1, 0, float("nan"), float("inf"), "nan", "inf", "-2", "true"])
def test_bad_generation_time_values_are_refused(value):
    with pytest.raises(ValueError, match="generation.time"):
        generation_time(value, data_source="sample", n_samples=1, n_tokens=1)


def test_much_evaluate_reports_bad_timings_in_one_line(tmp_path, capsys, monkeypatch):
    import numpy as np

    import much_dataset
    from much_dataset import schema
    from much_metric.cli import main
    from much_metric.signals import write_signals

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    sample = much_dataset.load("sample", split="test")
    write_signals(tmp_path / "s.parquet", [
        {"generation_id": gid, "signal_name": "ml", "values": 1 - np.array([v[0] for v in values])}
        for gid, values in zip(sample[schema.GENERATION_ID], sample[schema.LOGITS_VALUES], strict=True)])
    _write(tmp_path, {"ml": {"seconds": -1}})
    capsys.readouterr()  # the loading above
    assert main(["evaluate", "--source", "sample", "--scores", str(tmp_path / "s.parquet"), "--rank", "roc_auc",
                 "--bootstrap", "0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("much evaluate: error: ") and err.count("\n") == 1 and "timings.json" in err
