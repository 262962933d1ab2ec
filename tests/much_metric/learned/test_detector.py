"""Detector folders (safetensors + JSON + training rows, no pickle), the learned:<folder> baseline, `much train` /
`much run`, and the live monitor running a learned detector."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("safetensors")

import much_dataset  # noqa: E402
from much_metric.baselines import resolve, token_arrays  # noqa: E402
from much_metric.learned import (  # noqa: E402
    KINDS,
    DetectorFolderError,
    LinearDetector,
    SequenceDetector,
    load_detector,
    make_folds,
    row_info,
)
from tests.much_metric.learned._synthetic import planted_rows  # noqa: E402


@pytest.fixture(scope="module")
def sample():
    return much_dataset.load("sample", split="test")


@pytest.fixture(scope="module")
def detectors(tmp_path_factory, sample):
    """A linear and a small sequence detector trained for 2 epochs on the sample's leave-one-language-out fold 'de'."""
    fold = make_folds(row_info(sample), "leave-one-language-out", only="de")[0]
    folder = tmp_path_factory.mktemp("detectors")
    out = {}
    models = {"linear": LinearDetector(max_epochs=2), "sequence": SequenceDetector(max_epochs=2, hidden=8)}
    for kind, model in models.items():
        model.fit(sample.select(fold.train), sample.select(fold.validation), checkpoint=folder / kind / "checkpoint",
                  protocol={"name": "leave-one-language-out", "fold": fold.name, "data": "sample"}, progress=False)
        model.save(folder / kind)
        out[kind] = model.detector_
    return out, fold


def sample_ids(rows):
    return [much_dataset.load("sample", split="test")["generation_id"][i] for i in rows]


def test_folder_holds_json_safetensors_and_a_card_never_a_pickle(detectors):
    found, _ = detectors
    for kind, detector in found.items():
        files = sorted(p.relative_to(detector.folder).as_posix() for p in detector.folder.rglob("*") if p.is_file())
        assert files == ["card.md", "checkpoint/state.json", "checkpoint/state.safetensors", "config.json",
                         "training_rows.json", "weights.safetensors"]
        for path in detector.folder.rglob("*"):
            if path.is_file():
                assert not path.read_bytes().startswith(b"\x80"), f"{path} looks like a pickle"
        config = json.loads((detector.folder / "config.json").read_text())
        assert config["format"] == "much-learned-detector" and config["detector"] == kind
        assert config["aggregator"] == "product" and config["protocol"]["fold"] == "lang=de"
        assert len(config["training_data"]["fingerprint"]) == 64
        rows = json.loads((detector.folder / "training_rows.json").read_text())
        _, fold = detectors
        assert rows == {"train": sorted(sample_ids(fold.train)), "validation": sorted(sample_ids(fold.validation))}
        card = (detector.folder / "card.md").read_text()
        assert f"ROC-AUC {config['validation']['roc_auc']:.4f}" in card and "leave-one-language-out" in card


def test_loaded_detector_scores_as_trained(detectors, sample):
    found, fold = detectors
    test = sample.select(fold.test[:20])
    for detector in found.values():
        loaded = load_detector(detector.folder)
        scores = loaded.token_scores(test)
        assert scores.shape == (token_arrays(test).n_tokens,) and ((scores > 0) & (scores < 1)).all()
        # exact: the same weights, inputs and kernels in this process (a saved float32 file read back bit for bit)
        np.testing.assert_array_equal(scores, detector.token_scores(test))


def test_numpy_linear_inference_equals_the_torch_model(detectors, sample):
    import torch

    from much_metric.learned import _data, _torch
    from much_metric.learned.features import token_features

    detector = detectors[0]["linear"]
    test = sample.select(range(10))
    model = _torch.build(KINDS["linear"], 30, random_state=0)
    model.load_state_dict({k: torch.from_numpy(v) for k, v in detector.weights.items() if k.startswith("linear.")})
    prepared = _data.prepare(test, token_features(test), detector.weights["input_mean"], detector.weights["input_std"])
    expected = _torch.token_logits(model, _data.batch(prepared, np.arange(10)))
    np.testing.assert_allclose(detector.token_logits(test), expected, rtol=1e-5, atol=1e-5)


def test_sequence_scores_are_causal(detectors, sample):
    detector = detectors[0]["sequence"]
    row = sample[0]
    full = detector.token_scores([row])
    cut = 7
    prefix = {**row, "output_tokens": row["output_tokens"][:cut], "logits_token_ids": row["logits_token_ids"][:cut],
              "logits_values": row["logits_values"][:cut], "stopword_mask": row["stopword_mask"][:cut],
              "token_chunks": [chunk for chunk in row["token_chunks"] if max(chunk) < cut]}
    np.testing.assert_allclose(detector.token_scores([prefix]), full[:cut], rtol=1e-5, atol=1e-6)


def test_bad_folders_are_refused_naming_the_file(tmp_path, detectors):
    with pytest.raises(DetectorFolderError, match="config.json is missing"):
        load_detector(tmp_path)
    source = detectors[0]["linear"].folder
    bad = _copy(source, tmp_path / "bad")
    (bad / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match="config.json is not valid JSON"):
        load_detector(bad)
    config = json.loads((source / "config.json").read_text())
    (bad / "config.json").write_text(json.dumps({**config, "inputs": config["inputs"][:-1]}))
    with pytest.raises(ValueError, match="field 'inputs' differs"):
        load_detector(bad)
    (bad / "config.json").write_text(json.dumps(config))
    (bad / "weights.safetensors").write_bytes(b"\x80\x04garbage")
    with pytest.raises(ValueError, match="weights.safetensors is not a readable safetensors file"):
        load_detector(bad)


def test_registry_resolves_learned_folders(detectors, sample):
    from much_metric.learned.plugin import stored_name

    detector = detectors[0]["linear"]
    spec = resolve(f"learned:{detector.folder}")
    rows = sample.select(range(5))
    np.testing.assert_array_equal(spec.compute(token_arrays(rows), {}, {}), detector.token_scores(rows))
    name = spec.stored_name({})
    assert name == stored_name(str(detector.folder)) and name.startswith("learned_linear-") and "/" not in name
    assert resolve(name).display == f"Learned ({name[len('learned_'):]})"
    assert stored_name(str(detectors[0]["sequence"].folder)) != name
    with pytest.raises(ValueError, match="not a learned detector folder"):
        resolve("learned:/no/such/folder")
    assert spec.display == "Learned linear (linear; leave-one-language-out, held out lang=de)"
    with pytest.raises(ValueError, match="compute them with --signals learned:"):
        resolve(name).compute(token_arrays(rows), {}, {})


def test_much_train_then_much_run_on_the_sample(tmp_path, capsys):
    from much_metric.cli import main

    out = tmp_path / "linear-fr"
    assert main(["train", "--source", "sample", "--protocol", "leave-one-language-out", "--fold", "fr",
                 "--detector", "linear", "--out", str(out), "--max-epochs", "2", "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "leave-one-language-out [lang=fr] held-out test" in printed and "Max Likelihood ROC-AUC" in printed
    # issue 57: the paired difference to Max Likelihood, with its interval and p-value, beside the two values
    assert re.search(r"Δ ROC-AUC vs Max Likelihood [+-]\d\.\d{3} \[[+-]\d\.\d{3}, [+-]\d\.\d{3}\] p=\d\.\d{3}",
                     " ".join(printed.split()))
    assert "shared a Wikipedia article" in printed
    assert main(["run", "--source", "sample", "--config", "fr", "--signals", f"learned:{out},max_likelihood",
                 "--bootstrap", "0", "--no-progress", "--out", str(tmp_path / "signals")]) == 0
    printed = capsys.readouterr().out
    assert "Learned linear (linear-fr; 150 lang=fr test rows)" in printed
    assert "Max Likelihood" in printed and "rows left out" not in printed  # fr rows never trained it
    assert len(list((tmp_path / "signals").glob("learned_linear-fr-*.parquet"))) == 1
    assert main(["train", "--source", "sample", "--protocol", "auto-to-manual", "--out", str(tmp_path / "x")]) == 2
    assert "test-only" in capsys.readouterr().err


def test_monitor_runs_a_learned_detector_online_with_the_offline_scores(detectors, sample):
    from much_dataset.stopwords import stopword_mask
    from much_metric import Aggregation, aggregate_claims
    from much_metric.models import load_tokenizer
    from much_metric.monitor import ClaimMonitor

    tokenizer = load_tokenizer("smollm2")
    for kind, detector in detectors[0].items():
        row = sample[3]
        monitor = ClaimMonitor(tokenizer, f"learned:{detector.folder}", threshold=0.5)
        online = [c for i, t in enumerate(row["output_tokens"])
                  for c in monitor.push(t, row["logits_token_ids"][i], row["logits_values"][i])]
        online += monitor.finish()
        offline = detector.token_scores([row])
        assert [c.token_indices for c in online] == row["token_chunks"]
        np.testing.assert_allclose(np.concatenate([c.token_scores for c in online]), offline, rtol=1e-5, atol=1e-6,
                                   err_msg=kind)
        mask = stopword_mask(row["output_tokens"], tokenizer)
        expected = aggregate_claims([offline], [row["token_chunks"]], [mask],
                                    aggregation=Aggregation(drop_last_chunk=False))[0]
        np.testing.assert_allclose([c.score for c in online], expected, rtol=1e-5, atol=1e-6, err_msg=kind)


def test_training_rows_from_synthetic_data_score_everywhere(tmp_path):
    model = LinearDetector(max_epochs=1).fit(planted_rows(20, seed=60), planted_rows(8, seed=61), progress=False)
    assert np.isfinite(model.token_scores(planted_rows(3, seed=62))).all()


def _copy(source, target):
    import shutil

    shutil.copytree(source, target, ignore=shutil.ignore_patterns("checkpoint"))
    return target


def test_sample_scores_are_what_score_takes_and_a_flat_array_gets_a_pointer(detectors, sample):
    """Issue 57: ``load_detector(...).token_scores(split)`` is one flat array, which ``score`` refused with "must be
    a 1-D sequence"; ``sample_scores`` gives one array per sample, and the flat array's error says how to split it."""
    from much_metric import score

    found, fold = detectors
    test = sample.select(fold.test[:20])
    loaded = load_detector(found["linear"].folder)
    per_sample = loaded.sample_scores(test)
    assert [len(s) for s in per_sample] == [len(t) for t in test["output_tokens"]]
    np.testing.assert_array_equal(np.concatenate(per_sample), loaded.token_scores(test))
    result = score(per_sample, test["token_chunks"], test["labels"], test["stopword_mask"])
    assert 0 <= result.roc_auc <= 1
    with pytest.raises(ValueError, match=r"one flat sequence .*sample_scores.*score_claims"):
        score(loaded.token_scores(test), test["token_chunks"], test["labels"], test["stopword_mask"])
