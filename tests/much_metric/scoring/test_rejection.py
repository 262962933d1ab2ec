"""much_metric.scoring._rejection against a straightforward LM-Polygraph-style implementation."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from much_metric.scoring import _rejection as rejection
from much_metric.scoring._bootstrap import resample_counts
from much_metric.scoring._ranking import sort_claims


def polygraph_area(uncertainty, quality, max_rejection=1.0):
    """LM-Polygraph's PredictionRejectionArea: argsort ascending, cumulative mean, reversed, averaged."""
    n = len(uncertainty)
    n_rej = int(max_rejection * n)
    sorted_quality = np.asarray(quality, float)[np.argsort(uncertainty, kind="stable")]
    cumsum = np.cumsum(sorted_quality)[-n_rej:]
    return np.sum((cumsum / np.arange(n - n_rej + 1, n + 1))[::-1]) / n_rej


def polygraph_prr(uncertainty, hallucinated, max_rejection=1.0):
    quality = (~np.asarray(hallucinated)).astype(float)
    area = polygraph_area(uncertainty, quality, max_rejection)
    oracle = polygraph_area(-quality, quality, max_rejection)
    random = quality.mean()  # the exact expectation of LM-Polygraph's shuffled estimate
    return (area - random) / (oracle - random)


def tie_averaged_prr(uncertainty, hallucinated, max_rejection=1.0):
    """Mean of the LM-Polygraph PRR over every order of the tied claims (brute force, tiny inputs)."""
    uncertainty = np.asarray(uncertainty, float)
    values = []
    groups = [np.flatnonzero(uncertainty == u) for u in np.unique(uncertainty)]
    for perms in itertools.product(*(itertools.permutations(g) for g in groups)):
        order = np.concatenate([np.array(p) for p in perms])
        ranks = np.empty(len(order))
        ranks[order] = np.arange(len(order))  # distinct scores reproducing this order
        values.append(polygraph_prr(ranks, hallucinated, max_rejection))
    return float(np.mean(values))


@settings(max_examples=200, deadline=None)
@given(st.integers(2, 60), st.floats(0.05, 1.0), st.integers(0, 2**32 - 1))
def test_distinct_scores_match_polygraph(n, alpha, seed):
    rng = np.random.default_rng(seed)
    scores = rng.permutation(n).astype(float) + rng.random()
    hallucinated = rng.random(n) < rng.random()
    with np.errstate(invalid="ignore", divide="ignore"):
        expected = polygraph_prr(scores, hallucinated, alpha) if int(alpha * n) else np.nan
    np.testing.assert_allclose(rejection.prr(scores, hallucinated, max_rejection=alpha), expected, rtol=0,
                               atol=1e-10, equal_nan=True)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.booleans()), min_size=2, max_size=7), st.sampled_from([1.0, 0.5, 0.7]))
def test_ties_are_the_mean_over_tie_orders(claims, alpha):
    scores = np.array([c[0] for c in claims], float)
    hallucinated = np.array([c[1] for c in claims])
    if not 0 < hallucinated.sum() < len(claims) or int(alpha * len(claims)) == 0:
        return
    with np.errstate(invalid="ignore", divide="ignore"):  # oracle == random when only rejection 0 is averaged
        expected = tie_averaged_prr(scores, hallucinated, alpha)
    np.testing.assert_allclose(rejection.prr(scores, hallucinated, max_rejection=alpha), expected, rtol=0,
                               atol=1e-10, equal_nan=True)


def test_hand_computed():
    # 4 claims, uncertainties 0.1 < 0.2 < 0.3 < 0.4, labels correct, hallucinated, correct, hallucinated.
    # Kept k = 4..1 (least uncertain first): quality 2/4, 2/3, 1/2, 1 -> area = (0.5 + 2/3 + 0.5 + 1) / 4 = 2/3.
    # Oracle: 2/4, 2/3, 1, 1 -> 19/24 ; random 1/2 -> PRR = (2/3 - 1/2) / (19/24 - 1/2) = (1/6) / (7/24) = 4/7.
    scores, hallucinated = [0.1, 0.2, 0.3, 0.4], np.array([False, True, False, True])
    assert rejection.prr(scores, hallucinated) == pytest.approx(4 / 7)
    # max_rejection 0.5: first 2 points: area (1/2 + 2/3)/2 = 7/12, oracle the same -> PRR 1
    assert rejection.prr(scores, hallucinated, max_rejection=0.5) == pytest.approx(1.0)
    assert rejection.prr([4, 3, 2, 1], np.array([True, True, False, False])) == 1.0
    assert rejection.prr([1, 2, 3, 4], np.array([True, True, False, False])) == pytest.approx(-1.0)
    curve = rejection.rejection_curve(scores, hallucinated)
    np.testing.assert_allclose(curve["quality"], [0.5, 2 / 3, 0.5, 1.0])
    np.testing.assert_allclose(curve["oracle"], [0.5, 2 / 3, 1.0, 1.0])
    np.testing.assert_allclose(curve["rejection"], [0, 0.25, 0.5, 0.75])


def test_undefined_cases_are_nan():
    assert np.isnan(rejection.prr([0.1, 0.2], np.array([True, True])))
    assert np.isnan(rejection.prr([0.1, 0.2], np.array([False, False])))
    assert np.isnan(rejection.prr([0.1, 0.2, 0.3], np.array([False, True, False]), max_rejection=0.2))
    assert np.isnan(rejection.prr([], np.array([], bool)))


def test_bad_input():
    with pytest.raises(TypeError, match="bool"):
        rejection.prr([0.1, 0.2], np.array([1, -1]))
    with pytest.raises(ValueError, match=r"claim_scores\[1\]"):
        rejection.prr([0.1, np.nan], np.array([True, False]))
    with pytest.raises(ValueError, match="max_rejection"):
        rejection.prr([0.1, 0.2], np.array([True, False]), max_rejection=0)
    with pytest.raises(ValueError, match="integer"):
        rejection.prr_from_counts(np.array([[0, 0.5]]), np.array([[0, 1]]))


@pytest.mark.parametrize("alpha", [1.0, 0.5, 0.3])
def test_weighted_replicates_equal_expanded_claims(alpha):
    rng = np.random.default_rng(3)
    n_samples, n_claims = 40, 150
    claim_sample = rng.integers(0, n_samples, n_claims)
    scores = np.round(rng.random(n_claims), 1)  # many ties
    hallucinated = rng.random(n_claims) < 0.3 + 0.4 * scores
    counts = resample_counts(n_samples, 25, rng)
    sorted_claims = sort_claims(scores, hallucinated)
    got = rejection.prr_replicates(sorted_claims, counts[:, claim_sample[sorted_claims.order]].astype(float),
                                   max_rejection=alpha)
    for replicate in range(counts.shape[0]):
        multiplicity = counts[replicate, claim_sample]
        expected = rejection.prr(np.repeat(scores, multiplicity), np.repeat(hallucinated, multiplicity),
                                 max_rejection=alpha)
        assert got[replicate] == pytest.approx(expected, abs=1e-10)


def test_bootstrap_prr_is_seeded_and_centred():
    rng = np.random.default_rng(0)
    n_samples = 300
    claim_sample = np.repeat(np.arange(n_samples), 4)
    hallucinated = rng.random(claim_sample.size) < 0.3
    scores = hallucinated + rng.normal(0, 1, claim_sample.size)
    a = rejection.bootstrap_prr(scores, hallucinated, claim_sample, n_samples, n_resamples=200, random_state=1)
    b = rejection.bootstrap_prr(scores, hallucinated, claim_sample, n_samples, n_resamples=200, random_state=1)
    np.testing.assert_array_equal(a, b)
    assert a.shape == (200,)
    assert abs(np.median(a) - rejection.prr(scores, hallucinated)) < 0.05


def test_bootstrap_metrics_and_prr_agree_with_separate_paths():
    from much_metric.scoring._bootstrap import bootstrap_distribution

    rng = np.random.default_rng(0)
    claim_sample = np.repeat(np.arange(150), 3)
    hallucinated = rng.random(claim_sample.size) < 0.3
    scores = np.round(hallucinated + rng.normal(0, 1, claim_sample.size), 1)
    both = rejection.bootstrap_metrics_and_prr(scores, hallucinated, claim_sample, 150, n_resamples=120,
                                               random_state=2)
    np.testing.assert_allclose(both["prr"], rejection.bootstrap_prr(scores, hallucinated, claim_sample, 150,
                                                                    n_resamples=120, random_state=2))
    (reference,) = bootstrap_distribution([scores], hallucinated, claim_sample, 150, n_resamples=120,
                                          random_state=2)
    # same metric code; replicates agree when both draw their counts in the same batches (100 here)
    np.testing.assert_allclose(both["roc_auc"], reference["roc_auc"])
