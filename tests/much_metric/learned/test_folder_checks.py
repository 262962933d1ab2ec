"""Issue #31: a tampered detector folder is refused before anything is built, with the file and the field named
(no traceback, no 480 GB allocation, no MemoryError); bad training options and checkpoints are refused too."""

from __future__ import annotations

import json
import os
import shutil
import warnings

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("safetensors")

from safetensors.numpy import load, save  # noqa: E402

from much_metric.learned import DetectorFolderError, LinearDetector, SequenceDetector, load_detector  # noqa: E402
from tests.much_metric.learned._synthetic import planted_rows  # noqa: E402


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("fitted")
    train, validation = planted_rows(24, seed=70), planted_rows(8, seed=71)
    for name, model in (("linear", LinearDetector(max_epochs=1)), ("sequence", SequenceDetector(max_epochs=1,
                                                                                                hidden=4))):
        model.fit(train, validation, progress=False).save(root / name)
    return root


def _copy(folders, kind, tmp_path):
    target = tmp_path / f"tampered-{kind}"
    shutil.copytree(folders / kind, target)
    return target


def _edit_config(folder, change):
    config = json.loads((folder / "config.json").read_text())
    change(config)
    (folder / "config.json").write_text(json.dumps(config))


def _edit_weights(folder, change):
    weights = load((folder / "weights.safetensors").read_bytes())
    change(weights)
    (folder / "weights.safetensors").write_bytes(save(weights))


def _cli_refuses(folder, capsys, *expected):
    """`much run --signals learned:FOLDER` exits 2 with one line naming the folder's problem, no traceback."""
    from much_metric.cli import main

    assert main(["run", "--source", "sample", "--signals", f"learned:{folder}", "--bootstrap", "0",
                 "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    for text in expected:
        assert text in err, err


def test_a_config_asking_for_a_huge_hidden_size_is_refused_before_any_allocation(folders, tmp_path, capsys):
    folder = _copy(folders, "sequence", tmp_path)
    _edit_config(folder, lambda c: c["hyperparameters"].update(hidden=200_000))
    with pytest.raises(DetectorFolderError, match=r"config.json: field 'hyperparameters.hidden' must be an integer in "
                                                  r"\[1, 1,024\], got 200000"):
        load_detector(folder)
    _cli_refuses(folder, capsys, "config.json", "hyperparameters.hidden")
    # A hidden size within bounds but not the weights' is a shape error on the first GRU tensor, not a crash.
    _edit_config(folder, lambda c: c["hyperparameters"].update(hidden=5))
    with pytest.raises(DetectorFolderError, match=r"field 'gru.weight_ih_l0' has shape \(12, 26\).*needs \(15, 26\)"):
        load_detector(folder)


def test_a_gru_tensor_of_the_wrong_shape_is_refused_naming_it(folders, tmp_path, capsys):
    folder = _copy(folders, "sequence", tmp_path)
    _edit_weights(folder, lambda w: w.update({"gru.weight_hh_l0": np.zeros((12, 7), np.float32)}))
    with pytest.raises(DetectorFolderError, match=r"weights.safetensors: field 'gru.weight_hh_l0' has shape \(12, 7\)"):
        load_detector(folder)
    _cli_refuses(folder, capsys, "weights.safetensors", "gru.weight_hh_l0")
    _edit_weights(folder, lambda w: w.pop("gru.weight_hh_l0"))
    with pytest.raises(DetectorFolderError, match="field 'gru.weight_hh_l0' is missing"):
        load_detector(folder)


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_weights_linked_to_the_zero_device_or_oversized_are_refused_unread(folders, tmp_path, capsys):
    folder = _copy(folders, "linear", tmp_path)
    (folder / "weights.safetensors").unlink()
    (folder / "weights.safetensors").symlink_to("/dev/zero")
    with pytest.raises(DetectorFolderError, match="weights.safetensors is not a regular file"):
        load_detector(folder)
    _cli_refuses(folder, capsys, "weights.safetensors is not a regular file")
    (folder / "weights.safetensors").unlink()
    with open(folder / "weights.safetensors", "wb") as handle:  # sparse: 1 GiB on disk costs nothing
        handle.truncate(1 << 30)
    with pytest.raises(DetectorFolderError, match="has 1,073,741,824 bytes, more than"):
        load_detector(folder)


def test_an_infinite_bias_is_refused_and_a_constant_detector_is_warned_about(folders, tmp_path, capsys):
    folder = _copy(folders, "linear", tmp_path)
    _edit_weights(folder, lambda w: w.update({"linear.bias": np.array([np.inf], np.float32)}))
    with pytest.raises(DetectorFolderError, match="field 'linear.bias' holds 1 non-finite value"):
        load_detector(folder)
    _cli_refuses(folder, capsys, "linear.bias", "non-finite")
    # Finite but so large that every token gets the same score: loads, and scoring says it ranks nothing.
    _edit_weights(folder, lambda w: w.update({"linear.bias": np.array([1e30], np.float32)}))
    with pytest.warns(RuntimeWarning, match="every token gets the same score"):
        load_detector(folder).token_scores(planted_rows(3, seed=72))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        load_detector(folders / "linear").token_scores(planted_rows(3, seed=72))


@pytest.mark.parametrize("rows, field", [
    ({"train": ["b", "a"], "validation": ["c"]}, "field 'train' must be sorted"),
    ({"train": ["a"], "validation": ["a"]}, "field 'validation' shares 1 generation_id"),
    ({"train": []}, "exactly the keys 'train' and 'validation'"),
    ({"train": [1], "validation": ["c"]}, "field 'train' must be a non-empty list of generation_ids"),
])
def test_training_rows_are_checked(folders, tmp_path, rows, field):
    folder = _copy(folders, "linear", tmp_path)
    (folder / "training_rows.json").write_text(json.dumps(rows))
    with pytest.raises(DetectorFolderError, match=field):
        load_detector(folder)
    (folder / "training_rows.json").unlink()
    with pytest.raises(DetectorFolderError, match="training_rows.json is missing"):
        load_detector(folder)


@pytest.mark.parametrize("change, message", [
    (lambda c: c.update(aggregator="median"), "field 'aggregator' must be one of"),
    (lambda c: c.update(stopword_handling="drop"), "field 'stopword_handling'"),
    (lambda c: c.update(version=1), "field 'version' is 1; this toolkit reads version 2"),
    (lambda c: c.update(detector="forest"), "field 'detector' must be one of"),
])
def test_config_fields_are_checked(folders, tmp_path, change, message):
    folder = _copy(folders, "linear", tmp_path)
    _edit_config(folder, change)
    with pytest.raises(DetectorFolderError, match=message):
        load_detector(folder)


def test_non_float32_or_extra_tensors_are_refused(folders, tmp_path):
    folder = _copy(folders, "linear", tmp_path)
    _edit_weights(folder, lambda w: w.update({"linear.weight": w["linear.weight"].astype(np.float64)}))
    with pytest.raises(DetectorFolderError, match="field 'linear.weight' must be float32"):
        load_detector(folder)
    folder = _copy(folders, "linear", tmp_path / "x")
    _edit_weights(folder, lambda w: w.update({"extra": np.zeros(1, np.float32)}))
    with pytest.raises(DetectorFolderError, match="field 'extra' is not a parameter of a linear detector"):
        load_detector(folder)
    folder = _copy(folders, "linear", tmp_path / "y")
    _edit_weights(folder, lambda w: w.update({"input_std": np.zeros_like(w["input_std"])}))
    with pytest.raises(DetectorFolderError, match="field 'input_std' must be positive"):
        load_detector(folder)


@pytest.mark.parametrize("args, message", [
    (["--learning-rate", "1e300"], "--learning-rate must be a number in (0, 10], got 1e+300"),
    (["--learning-rate", "nan"], "--learning-rate must be a number in (0, 10], got nan"),
    (["--detector", "sequence", "--hidden", "0"], "--hidden must be an integer in [1, 1,024], got 0"),
    (["--hidden", "8"], "--hidden applies to the sequence and claim_head detectors"),
    (["--max-epochs", "0"], "--max-epochs must be an integer"),
])
def test_much_train_refuses_bad_options_before_loading_data(tmp_path, capsys, monkeypatch, args, message):
    from much_metric.cli import main
    from much_metric.cli import train as train_command

    monkeypatch.setattr(train_command, "load_with_origin", lambda *a: pytest.fail("the data was loaded"))
    assert main(["train", "--out", str(tmp_path / "d"), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err, err


def test_much_train_with_a_truncated_checkpoint_exits_2_naming_it(tmp_path, capsys):
    from much_metric.cli import main

    out = tmp_path / "d"
    command = ["train", "--source", "sample", "--fold", "es", "--out", str(out), "--max-epochs", "1", "--no-progress"]
    assert main(command) == 0
    state = out / "checkpoint" / "state.safetensors"
    state.write_bytes(state.read_bytes()[:100])
    capsys.readouterr()
    assert main(command) == 2
    err = capsys.readouterr().err
    assert "checkpoint does not verify" in err and str(out / "checkpoint") in err and "Traceback" not in err


def test_much_train_without_torch_names_the_learned_extra(tmp_path, capsys, monkeypatch):
    import importlib.util

    from much_metric.cli import main

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a))
    assert main(["train", "--out", str(tmp_path / "d")]) == 2
    err = capsys.readouterr().err
    assert "much train needs torch: install the extra 'learned'" in err and "[models]" not in err, err


def test_training_rows_that_are_not_the_recorded_ones_are_refused(folders, tmp_path):
    """Issue #44: a training_rows.json naming other rows (well formed, sorted) is refused, by the digest config.json
    records and, in a folder written before the digest, by the recorded counts."""
    folder = _copy(folders, "linear", tmp_path)
    rows = json.loads((folder / "training_rows.json").read_text())
    fake = {"train": sorted(f"nobody-{i:04d}" for i in range(len(rows["train"]))), "validation": rows["validation"]}
    (folder / "training_rows.json").write_text(json.dumps(fake))
    with pytest.raises(DetectorFolderError, match=r"training_rows.json does not hold the rows config.json records"):
        load_detector(folder)
    config = json.loads((folder / "config.json").read_text())
    del config["training_data"]["rows_sha256"]  # an older folder: its counts still decide
    (folder / "config.json").write_text(json.dumps(config))
    fake["train"] = fake["train"][:-1]
    (folder / "training_rows.json").write_text(json.dumps(fake))
    with pytest.raises(DetectorFolderError, match=r"field 'train' lists \d+ generation_ids, config.json records"):
        load_detector(folder)
    (folder / "training_rows.json").write_text(json.dumps(rows))
    assert load_detector(folder).training_rows == rows
