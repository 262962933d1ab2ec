"""scoring._leaderboard against straightforward loops and scoring._bootstrap.paired_bootstrap."""

from __future__ import annotations

import numpy as np
import pytest

from much_metric.scoring import Bootstrap
from much_metric.scoring import _leaderboard as leaderboard
from much_metric.scoring._bootstrap import paired_bootstrap


def test_ranks_and_probabilities_hand_computed():
    replicates = np.array([[0.9, 0.8, 0.7],   # ranks 0 1 2
                           [0.8, 0.9, 0.7],   # 1 0 2
                           [0.9, 0.9, 0.1],   # 0 0 2 (tie)
                           [0.5, 0.6, 0.7]])  # 2 1 0
    np.testing.assert_array_equal(leaderboard.ranks(replicates), [[0, 1, 2], [1, 0, 2], [0, 0, 2], [2, 1, 0]])
    np.testing.assert_array_equal(leaderboard.ranks(replicates[0], higher_is_better=False), [2, 1, 0])
    p = leaderboard.rank_probabilities(replicates)
    np.testing.assert_allclose(p, [[0.5, 0.25, 0.25], [0.5, 0.5, 0], [0.25, 0, 0.75]])
    np.testing.assert_allclose(p.sum(axis=1), 1)


def test_rank_probabilities_against_loop():
    rng = np.random.default_rng(0)
    replicates = np.round(rng.random((300, 5)), 1)
    expected = np.zeros((5, 5))
    for row in replicates:
        for m in range(5):
            expected[m, sum(row[k] > row[m] for k in range(5))] += 1
    np.testing.assert_allclose(leaderboard.rank_probabilities(replicates), expected / 300)


def _methods(seed=0, n_samples=200):
    rng = np.random.default_rng(seed)
    claim_sample = np.repeat(np.arange(n_samples), rng.integers(1, 6, n_samples))
    hallucinated = rng.random(claim_sample.size) < 0.3
    noise = rng.normal(size=(3, claim_sample.size))
    scores = {"strong": hallucinated * 2.0 + noise[0], "weak": hallucinated * 0.5 + noise[1],
              "weak_twin": hallucinated * 0.5 + noise[2]}
    return scores, hallucinated, claim_sample, n_samples


def test_leaderboard_orders_methods_and_matches_paired_bootstrap():
    scores, hallucinated, claim_sample, n_samples = _methods()
    board = leaderboard.rank_claim_scores(scores, hallucinated, claim_sample, n_samples, metric="roc_auc",
                                    bootstrap=Bootstrap(n_resamples=300, random_state=5))
    names = [row["method"] for row in board["rows"]]
    assert names[0] == "strong"
    assert board["rows"][0]["rank"] == 0 and board["rows"][0]["rank_probability"] == 1.0
    assert board["rows"][1]["rank_probability"] < 1.0  # the two weak methods swap ranks across replicates
    low, high = board["rows"][0]["interval"]
    assert low <= board["rows"][0]["value"] <= high
    for a in range(3):
        for b in range(a + 1, 3):
            paired = paired_bootstrap(scores[names[a]], scores[names[b]], hallucinated, claim_sample, n_samples,
                                      n_resamples=300, random_state=5)["roc_auc"]
            assert board["p_values"][a, b] == pytest.approx(paired["p_value"])
            assert board["p_values"][b, a] == board["p_values"][a, b]
    assert board["p_values"][0, 1] < 0.01 and board["p_values"][1, 2] > 0.01


def test_errors():
    scores, hallucinated, claim_sample, n_samples = _methods()
    with pytest.raises(ValueError, match="metric"):
        leaderboard.rank_claim_scores(scores, hallucinated, claim_sample, n_samples, metric="accuracy")
    with pytest.raises(ValueError, match="'weak'"):
        leaderboard.rank_claim_scores({**scores, "weak": scores["weak"][:-1]}, hallucinated, claim_sample, n_samples)
    with pytest.raises(ValueError, match="no method"):
        leaderboard.rank_claim_scores({}, hallucinated, claim_sample, n_samples)
