"""``much calibrate --conformal`` writes a threshold file from the metric's claim scores; ``much monitor --conformal``
reads it back and flags (or drops) what the filter does not keep, on SmolLM2's live claims."""

from __future__ import annotations

import json

import numpy as np
import pytest

from much_metric.cli import main
from much_metric.conformal import filter_claims, load_calibration
from tests.much_metric._monitor_helpers import monitored_runs


@pytest.fixture(scope="module")
def signals(tmp_path_factory):
    folder = tmp_path_factory.mktemp("signals")
    assert main(["run", "--source", "sample", "--signals", "token_entropy_24,max_likelihood", "--bootstrap", "0",
                 "--out", str(folder)]) == 0
    return folder


def _calibrate(signals, tmp_path, *argv):
    path = tmp_path / "thresholds.json"
    code = main(["calibrate", "--conformal", "--source", "sample", "--scores", str(signals), "--signal",
                 "token_entropy_24", "--output", str(path), *argv])
    return code, path


def test_calibrate_writes_a_threshold_file_from_the_metrics_claim_scores(signals, tmp_path, capsys):
    import much_dataset
    from much_metric.conformal import calibrate, claims_from_token_scores
    from much_metric.signals import read_signals

    code, path = _calibrate(signals, tmp_path, "--alpha", "0.1", "--by", "lang")
    assert code == 0
    out = capsys.readouterr().out
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["method"] == "conformal-answer" and data["signal"] == "token_entropy_24" and data["alpha"] == 0.1
    assert data["aggregation"] == {"aggregator": "product", "stopword_handling": "null"}
    sample = much_dataset.load("sample", split="test")
    langs = np.asarray(sample["lang"])
    for lang, group in data["groups"].items():
        assert group["n_answers"] == int((langs == lang).sum())
        assert f"lang={lang}: {group['n_answers']} answers" in out
    assert sorted(data["calibration_rows"]) == sorted(sample["generation_id"])
    # the same thresholds as calibrating by hand on much_metric.aggregate_claims' claim scores
    by_id = read_signals(signals / "token_entropy_24.parquet")["token_entropy_24"]
    claims = claims_from_token_scores([by_id[g] for g in sample["generation_id"]], sample, groups=["lang"])
    by_hand = calibrate(claims, alpha=0.1, by="lang")
    loaded = load_calibration(path)
    assert {k: g.threshold for k, g in loaded.groups.items()} == {k: g.threshold for k, g in by_hand.groups.items()}
    assert loaded.calibration_hash == by_hand.calibration_hash


@pytest.mark.parametrize(("argv", "message"), [
    (["--by", "lang", "--min-answers", "151"], "group lang='de' has 150 calibration answers, fewer than the minimum"),
    (["--alpha", "1.5"], "--alpha must be in (0, 1)"),
])
def test_calibrate_refuses_bad_input_with_exit_2(signals, tmp_path, capsys, argv, message):
    code, path = _calibrate(signals, tmp_path, *argv)
    assert code == 2 and message in capsys.readouterr().err and not path.exists()


def test_calibrate_needs_the_conformal_switch_and_one_signal(signals, tmp_path, capsys):
    assert main(["calibrate", "--source", "sample", "--scores", str(signals), "--output",
                 str(tmp_path / "t.json")]) == 2
    assert "needs --conformal" in capsys.readouterr().err
    assert main(["calibrate", "--conformal", "--source", "sample", "--scores", str(signals), "--output",
                 str(tmp_path / "t.json")]) == 2
    assert "pick one with --signal" in capsys.readouterr().err


@pytest.fixture()
def monitor_cli(monkeypatch, capsys):
    from much_metric import models

    llm, _ = monitored_runs()
    monkeypatch.setattr(models, "load_causal_lm", lambda name, device=None: (llm.model, llm.tokenizer))

    def call(*argv):
        capsys.readouterr()  # what came before (much calibrate's lines)
        code = main(["monitor", "--model", "smollm2", "--prompt", "Who wrote Les Misérables?", "--max-new-tokens",
                     "40", *argv])
        out, err = capsys.readouterr()
        return code, out, err

    return call


@pytest.mark.parametrize("guarantee", ["answer", "claim"])
def test_threshold_file_round_trips_through_much_monitor(signals, tmp_path, monitor_cli, guarantee):
    code, path = _calibrate(signals, tmp_path, "--alpha", "0.2", "--by", "lang", "--guarantee", guarantee)
    assert code == 0
    code, out, err = monitor_cli("--conformal", str(path), "--group", "en", "--json")
    assert code == 0, err
    records = [json.loads(line) for line in out.splitlines()]
    scored = [r for r in records if not r["eos"]]
    kept = filter_claims(path, [r["score"] for r in scored], group="en", drop=False)
    assert [r["flagged"] for r in scored] == [not k for k in kept]
    if guarantee == "answer":
        threshold = load_calibration(path).groups["en"].threshold
        assert all(r["flagged"] == (r["score"] >= threshold) for r in scored)
    code, out, err = monitor_cli("--conformal", str(path), "--group", "en", "--drop")
    assert code == 0 and "[[" not in out
    assert out.rstrip("\n") == "".join(r["text"] for r in records if not r["flagged"])
    assert f"{guarantee}-level conformal filter, alpha 0.2, lang=en" in err


@pytest.mark.parametrize(("argv", "message"), [
    (["--group", "it"], "lang='it' is outside the guarantee"),
    ([], "name the answer's lang"),
    (["--group", "en", "--method", "max_likelihood"], "was calibrated for signal 'token_entropy_24'"),
    (["--group", "en", "--threshold", "0.5"], "not two of them"),
])
def test_monitor_refuses_a_file_it_cannot_honour_before_the_model_loads(signals, tmp_path, monkeypatch, capsys,
                                                                         argv, message):
    from much_metric import models

    code, path = _calibrate(signals, tmp_path, "--alpha", "0.2", "--by", "lang")
    assert code == 0

    def no_model(*args, **kwargs):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(models, "load_causal_lm", no_model)
    capsys.readouterr()
    assert main(["monitor", "--model", "smollm2", "--prompt", "hi", "--conformal", str(path), *argv]) == 2
    assert message in capsys.readouterr().err
    assert main(["monitor", "--model", "smollm2", "--prompt", "hi", "--drop"]) == 2


def test_evaluate_claims_kept_prints_the_table_and_writes_it_to_json(signals, tmp_path, capsys):
    path = tmp_path / "metrics.json"
    assert main(["evaluate", "--source", "sample", "--scores", str(signals), "--bootstrap", "0", "--claims-kept",
                 "4", "--json", str(path)]) == 0
    out = capsys.readouterr().out
    assert "kept@0.05 [range]" in out and "claims kept by the answer-level conformal filter" in out
    detectors = json.loads(path.read_text(encoding="utf-8"))["claims_kept"]["detectors"]
    assert set(detectors) == {"Token Entropy-24", "Max Likelihood"}
    assert all(0 <= cell["kept"] <= cell["correct_kept"] <= 1 for d in detectors.values() for cell in d.values())
    assert main(["evaluate", "--source", "sample", "--scores", str(signals), "--claims-kept", "0"]) == 2


def test_calibrate_takes_a_claim_level_signal_as_given(tmp_path, capsys):
    """One score per claim (an ``@claim`` signal: a judge, a claim-level method): calibrated on its values as
    given, the same thresholds as claims_from_claim_scores + calibrate."""
    import much_dataset
    from much_metric.conformal import calibrate, claims_from_claim_scores

    sample = much_dataset.load("sample", split="test")
    rng = np.random.default_rng(0)
    per_chunk = [np.round(rng.random(len(chunks)), 3) for chunks in sample["token_chunks"]]
    scores = tmp_path / "judge.jsonl"
    scores.write_text("".join(json.dumps({"generation_id": g, "signal_name": "judge@claim", "values": v.tolist()})
                              + "\n" for g, v in zip(sample["generation_id"], per_chunk, strict=True)))
    path = tmp_path / "thresholds.json"
    assert main(["calibrate", "--conformal", "--source", "sample", "--scores", str(scores), "--alpha", "0.2",
                 "--by", "lang", "--output", str(path)]) == 0, capsys.readouterr().err
    loaded = load_calibration(path)
    assert loaded.signal == "judge@claim" and loaded.aggregation == {"level": "claim"}
    by_hand = calibrate(claims_from_claim_scores(per_chunk, sample, groups=["lang"]), alpha=0.2, by="lang")
    assert {k: g.threshold for k, g in loaded.groups.items()} == {k: g.threshold for k, g in by_hand.groups.items()}
