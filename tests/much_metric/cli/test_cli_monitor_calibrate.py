"""``much monitor --calibrate FOLDER`` works on an export folder (several splits), and the threshold options are
checked before the model loads."""

from __future__ import annotations

import pytest

from much_dataset import card, synthetic
from much_metric import models
from much_metric.cli import main
from much_metric.cli.monitor import _calibration_data
from much_metric.models import load_tokenizer
from much_metric.monitor import ClaimMonitor

ROWS = synthetic.make_rows(30, seed=5)


class _ModelReached(ValueError):
    pass


@pytest.fixture
def model_load_forbidden(monkeypatch):
    def load(*args, **kwargs):
        raise _ModelReached("model load reached")

    monkeypatch.setattr(models, "load_causal_lm", load)


@pytest.mark.parametrize(("argv", "message"), [
    (["--threshold", "nan"], "--threshold must be a finite number"),
    (["--calibrate", "sample", "--target-fpr", "1.5"], "--target-fpr must be in [0, 1]"),
    (["--calibrate", "sample", "--target-precision", "0"], "--target-precision must be in (0, 1]"),
    (["--calibrate", "sample", "--target-fpr", "0.1", "--target-precision", "0.5"], "not both"),
    (["--target-fpr", "0.1"], "need --calibrate"),
])
def test_threshold_options_fail_before_the_model_loads(argv, message, capsys, model_load_forbidden):
    assert main(["monitor", "--model", "smollm2", "--prompt", "hi", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("much monitor: error: ") and message in err and "model load reached" not in err


@pytest.mark.parametrize("splits", [("train", "test"), ("train",)])
def test_export_folder_is_loaded_before_the_model(splits, tmp_path, capsys, model_load_forbidden):
    folder = tmp_path / "much"
    card.write_parquet_folder({name: ROWS[:20] if name == "train" else ROWS[20:] for name in splits}, folder)
    data = _calibration_data(str(folder))
    assert len(data) == (10 if "test" in splits else 20)  # the human-labelled test split when there is one
    assert main(["monitor", "--model", "smollm2", "--prompt", "hi", "--calibrate", str(folder)]) == 2
    assert "model load reached" in capsys.readouterr().err  # the folder loaded fine; the model comes after


def test_calibration_on_an_export_folder_sets_the_threshold(tmp_path):
    folder = tmp_path / "much"
    card.write_parquet_folder({"train": ROWS[:20], "test": ROWS[20:]}, folder)
    monitor = ClaimMonitor(load_tokenizer("smollm2"), "max_likelihood", aggregation="max")
    result = monitor.calibrate(_calibration_data(str(folder)), target_fpr=0.2)
    assert monitor.threshold == result.threshold
    assert result.fpr <= 0.2
