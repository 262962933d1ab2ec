"""Training: the differentiable aggregation is the metric's, planted labels are found, kills resume exactly."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("safetensors")

import torch  # noqa: E402
from sklearn.metrics import log_loss  # noqa: E402

from much_metric.baselines import max_likelihood, token_arrays  # noqa: E402
from much_metric.learned import FEATURES, _data, _torch, train_detector  # noqa: E402
from much_metric.learned.features import sequence_inputs  # noqa: E402
from much_metric.scoring import AGGREGATORS, claim_layout, score  # noqa: E402
from much_metric.scoring.engine import aggregate_flat  # noqa: E402
from tests.much_metric.learned._synthetic import planted_rows  # noqa: E402


def _prepared(rows):
    inputs = sequence_inputs(rows)
    mean, std = _data.standardisation(inputs)
    return _data.prepare(rows, inputs, mean, std)


@pytest.mark.parametrize("stopword_handling", ["null", "exclude"])
@pytest.mark.parametrize("aggregator", AGGREGATORS)
def test_differentiable_aggregation_is_the_metrics(aggregator, stopword_handling):
    rows = planted_rows(12, seed=3)
    data = _prepared(rows)
    rng = np.random.default_rng(0)
    samples = rng.permutation(data.n_samples)[:9]  # a batch in another order than the data
    part = _data.batch(data, samples)
    logits = torch.from_numpy(rng.normal(0, 2, size=part.mask.shape).astype(np.float32))
    got, _ = _torch.claim_uncertainty(logits, part, aggregator=aggregator, stopword_handling=stopword_handling)
    chosen = [rows[i] for i in samples]
    layout = claim_layout([r["token_chunks"] for r in chosen], [len(r["output_tokens"]) for r in chosen],
                          labels=[r["labels"] for r in chosen], stopword_mask=[r["stopword_mask"] for r in chosen])
    flat_scores = 1 / (1 + np.exp(-logits.numpy().astype(np.float64)[part.mask]))
    expected = aggregate_flat(flat_scores, layout, aggregator=aggregator, stopword_handling=stopword_handling)
    np.testing.assert_allclose(got.numpy(), expected, rtol=2e-4, atol=2e-5)
    np.testing.assert_array_equal(part.target, (layout.labels == -1).astype(np.float32))


@pytest.mark.parametrize("aggregator", ["product", "mean"])
def test_claim_loss_is_the_binary_cross_entropy_of_the_claim_scores(aggregator):
    data = _prepared(planted_rows(10, seed=4))
    part = _data.batch(data, np.arange(data.n_samples))
    logits = torch.from_numpy(np.random.default_rng(1).normal(-1, 1, size=part.mask.shape).astype(np.float32))
    # "exclude": every claim keeps a scored token, so no claim score is exactly 0 (where both losses clip).
    uncertainty, _ = _torch.claim_uncertainty(logits, part, aggregator=aggregator, stopword_handling="exclude")
    assert uncertainty.min() > 1e-6
    loss = _torch.claim_loss(logits, part, aggregator=aggregator, stopword_handling="exclude")
    assert float(loss) == pytest.approx(log_loss(part.target, uncertainty.numpy().astype(np.float64)), rel=1e-4)


def _held_out_auc(rows, scores):
    return score(scores, [r["token_chunks"] for r in rows], [r["labels"] for r in rows],
                 [r["stopword_mask"] for r in rows]).roc_auc


@pytest.mark.parametrize("kind, options", [("linear", {"max_epochs": 60}),
                                           ("sequence", {"max_epochs": 6, "batch_size": 8, "learning_rate": 0.01})])
def test_detector_finds_the_planted_feature(tmp_path, kind, options):
    train, validation, test = planted_rows(160, seed=10), planted_rows(40, seed=11), planted_rows(80, seed=12)
    detector = train_detector(train, validation, tmp_path / kind, detector=kind, progress=False, seed=0, **options)
    arrays = token_arrays(test)
    learned = _held_out_auc(test, arrays.split(detector.token_scores(arrays)))
    baseline = _held_out_auc(test, max_likelihood(arrays))
    # The best possible token score (1 where the planted rank occurs) reaches about 0.91 on these claims: stopword
    # tokens score 0 under the metric's rule, so some hallucinated claims show no planted token.
    oracle = (arrays.candidate_ids[np.arange(arrays.n_tokens), 6] == arrays.output_tokens) * 0.9
    assert _held_out_auc(test, arrays.split(oracle)) > 0.88
    assert baseline < 0.6  # the planted signal is invisible to Max Likelihood
    assert learned > 0.82 and learned > baseline + 0.25, (learned, detector.config["training"])
    if kind == "linear":  # the largest standardised weight is on the planted feature (or the likelihood it drives)
        weights = np.abs(detector.weights["linear.weight"][0])
        assert FEATURES[int(weights.argmax())] in ("sampled_rank", "token_likelihood"), weights


def test_killed_training_resumes_to_the_same_detector(tmp_path):
    train, validation = planted_rows(40, seed=20), planted_rows(12, seed=21)
    options = {"detector": "sequence", "max_epochs": 4, "patience": 10, "progress": False, "hidden": 8}
    whole = train_detector(train, validation, tmp_path / "whole", **options)

    class Killed(Exception):
        pass

    def kill_after_two(epoch, state):
        if epoch == 2:
            raise Killed

    with pytest.raises(Killed):
        train_detector(train, validation, tmp_path / "killed", on_epoch=kill_after_two, **options)
    state = json.loads((tmp_path / "killed" / "checkpoint" / "state.json").read_text())
    assert state["epoch"] == 2 and not (tmp_path / "killed" / "config.json").exists()
    epochs_seen = []
    resumed = train_detector(train, validation, tmp_path / "killed", on_epoch=lambda e, s: epochs_seen.append(e),
                             **options)
    assert epochs_seen == [3, 4]  # only the missing epochs ran
    for name, value in whole.weights.items():
        np.testing.assert_allclose(resumed.weights[name], value, rtol=1e-5, atol=1e-6, err_msg=name)
    assert resumed.config["training"]["epochs"] == whole.config["training"]["epochs"] == 4
    # Re-running a finished run trains nothing more and rewrites the same detector.
    again = train_detector(train, validation, tmp_path / "killed", on_epoch=lambda e, s: epochs_seen.append(e),
                           **options)
    assert epochs_seen == [3, 4]
    np.testing.assert_array_equal(again.weights["read_out.weight"], resumed.weights["read_out.weight"])


def test_resuming_with_other_settings_or_data_is_refused(tmp_path):
    train, validation = planted_rows(20, seed=30), planted_rows(8, seed=31)
    train_detector(train, validation, tmp_path / "d", max_epochs=2, progress=False)
    with pytest.raises(ValueError, match="learning_rate"):
        train_detector(train, validation, tmp_path / "d", max_epochs=2, progress=False, learning_rate=0.5)
    with pytest.raises(ValueError, match="train_fingerprint"):
        train_detector(planted_rows(20, seed=32), validation, tmp_path / "d", max_epochs=2, progress=False)


def test_early_stopping_keeps_the_best_epoch(tmp_path):
    rows = planted_rows(60, seed=40)
    rng = np.random.default_rng(0)
    for row in rows:  # labels unrelated to the inputs: the validation loss soon stops improving
        row["labels"] = [*rng.choice([-1, 1], size=len(row["labels"]) - 1).tolist(), 1]
    detector = train_detector(rows[:45], rows[45:], tmp_path / "noise", max_epochs=40, patience=2,
                              learning_rate=0.3, batch_size=8, progress=False)
    training = detector.config["training"]
    assert training["epochs"] < 40 and training["epochs"] == training["best_epoch"] + 2
    history = json.loads((tmp_path / "noise" / "checkpoint" / "state.json").read_text())["history"]
    losses = [h["validation_loss"] for h in history]
    assert training["best_validation_loss"] == pytest.approx(min(losses))


def test_bad_options_are_refused(tmp_path):
    rows = planted_rows(8, seed=50)
    with pytest.raises(ValueError, match="detector must be one of"):
        train_detector(rows, rows, tmp_path, detector="forest")
    with pytest.raises(ValueError, match="aggregator must be one of"):
        train_detector(rows, rows, tmp_path, aggregator="median")
    with pytest.raises(ValueError, match="batch_size must be a positive integer"):
        train_detector(rows, rows, tmp_path, batch_size=0)
