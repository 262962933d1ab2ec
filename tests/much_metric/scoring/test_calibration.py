"""much_metric.scoring._calibration against scikit-learn and a port of LM-Polygraph's ECE loop."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from much_metric.scoring import _calibration as calibration

sklearn_isotonic = pytest.importorskip("sklearn.isotonic")
sklearn_metrics = pytest.importorskip("sklearn.metrics")


def polygraph_ece(estimator, target, n_bins=20):
    """LM-Polygraph ``ECE(normalize=False)``: confidences = -estimator, first bin closed, then (lo, hi]."""
    confidences, target = -np.asarray(estimator), np.asarray(target, float)
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    value = 0.0
    for i in range(n_bins):
        lo, hi = edges[i], edges[i + 1]
        in_bin = (confidences > lo) & (confidences <= hi) if i > 0 else (confidences >= lo) & (confidences <= hi)
        if in_bin.any():
            value += in_bin.sum() / len(confidences) * abs(target[in_bin].mean() - confidences[in_bin].mean())
    return value


def _data(seed, n=400, ties=False):
    rng = np.random.default_rng(seed)
    scores = rng.random(n)
    if ties:
        scores = np.round(scores, 1)
    hallucinated = rng.random(n) < scores ** 2
    return scores, hallucinated


@pytest.mark.parametrize("seed, ties", [(0, False), (1, True), (2, False)])
def test_isotonic_matches_sklearn(seed, ties):
    scores, hallucinated = _data(seed, ties=ties)
    test_scores = np.r_[np.random.default_rng(seed + 10).uniform(-0.2, 1.2, 300), scores[:50]]
    ours = calibration.fit_isotonic(scores, hallucinated).predict(test_scores)
    reference = sklearn_isotonic.IsotonicRegression(out_of_bounds="clip", y_min=0, y_max=1).fit(
        scores, hallucinated.astype(float)).predict(test_scores)
    np.testing.assert_allclose(ours, reference, rtol=0, atol=1e-12)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 8), st.booleans()), min_size=1, max_size=40))
def test_isotonic_property_matches_sklearn(claims):
    x = np.array([c[0] for c in claims], float)
    y = np.array([c[1] for c in claims])
    grid = np.linspace(-1, 9, 41)
    reference = sklearn_isotonic.IsotonicRegression(out_of_bounds="clip").fit(x, y.astype(float)).predict(grid)
    np.testing.assert_allclose(calibration.fit_isotonic(x, y).predict(grid), reference, atol=1e-12)


def test_isotonic_hand_computed():
    # outcomes by increasing score: 0, 1, 0, 1 -> PAV pools (1, 0) -> 0, .5, .5, 1
    cal = calibration.fit_isotonic([1, 2, 3, 4], np.array([False, True, False, True]))
    np.testing.assert_allclose(cal.y, [0, 0.5, 0.5, 1])
    np.testing.assert_allclose(cal.predict([0, 1.5, 2.5, 3.5, 9]), [0, 0.25, 0.5, 0.75, 1])


def test_binned_hand_computed_and_against_a_loop():
    scores = np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8])
    hallucinated = np.array([False, False, True, False, True, True, False, True])
    cal = calibration.fit_binned(scores, hallucinated, n_bins=4)
    np.testing.assert_allclose(cal.x, [0.1, 0.275, 0.45, 0.625, 0.8])  # quantile edges: pairs of claims
    np.testing.assert_allclose(cal.y, [0, 0.5, 1, 0.5])
    np.testing.assert_allclose(cal.predict([0.0, 0.2, 0.3, 0.6, 0.7, 2.0]), [0, 0, 0.5, 1, 0.5, 0.5])
    scores, hallucinated = _data(4)
    for strategy in ("quantile", "uniform"):
        cal = calibration.fit_binned(scores, hallucinated, n_bins=7, strategy=strategy)
        test = np.random.default_rng(5).uniform(-0.1, 1.1, 200)
        expected = []
        for s in test:  # straightforward: first bin whose right edge >= s, clamped
            b = min(next((i for i in range(7) if s <= cal.x[i + 1]), 6), 6)
            expected.append(cal.y[b])
        np.testing.assert_allclose(cal.predict(test), expected)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ece_matches_polygraph_loop_and_brier_matches_sklearn(seed):
    scores, hallucinated = _data(seed, ties=seed == 1)
    p = calibration.fit_isotonic(*_data(seed + 100)).predict(scores)
    for n_bins in (5, 15, 20):
        assert calibration.ece(p, hallucinated, n_bins=n_bins) == pytest.approx(
            polygraph_ece(p - 1.0, ~hallucinated, n_bins), abs=1e-12)
    assert calibration.brier(p, hallucinated) == pytest.approx(sklearn_metrics.brier_score_loss(hallucinated, p))


def test_ece_hand_computed_and_diagram():
    p = np.array([0.1, 0.1, 0.9, 0.9])
    y = np.array([False, True, True, True])
    # two bins over p: [0, .5) holds 0.1, 0.1 (rate .5, mean p .1); [.5, 1] holds 0.9 x2 (rate 1, mean .9)
    assert calibration.ece(p, y, n_bins=2) == pytest.approx(0.5 * 0.4 + 0.5 * 0.1)
    diagram = calibration.reliability_diagram(p, y, n_bins=2)
    np.testing.assert_allclose(diagram["centre"], [0.25, 0.75])
    np.testing.assert_allclose(diagram["rate"], [0.5, 1.0])
    np.testing.assert_allclose(diagram["confidence"], [0.1, 0.9])
    np.testing.assert_array_equal(diagram["count"], [2, 2])
    assert calibration.brier(p, y) == pytest.approx((0.01 + 0.81 + 0.01 + 0.01) / 4)


def test_calibration_fitted_on_one_split_lowers_ece_on_another():
    train, test = _data(7, n=3000), _data(8, n=3000)
    raw = np.clip(test[0] * 0.5, 0, 1)  # a miscalibrated probability
    calibrated = calibration.fit(*train, method="isotonic").predict(test[0])
    assert calibration.ece(calibrated, test[1]) < calibration.ece(raw, test[1]) / 2


def test_errors():
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        calibration.ece([0.5, 1.5], np.array([True, False]))
    with pytest.raises(TypeError, match="bool"):
        calibration.fit_isotonic([0.5, 0.2], np.array([1, -1]))
    with pytest.raises(ValueError, match=r"claim_scores\[1\]"):
        calibration.fit_binned([0.5, np.inf], np.array([True, False]))
    with pytest.raises(ValueError, match="method"):
        calibration.fit([0.5], np.array([True]), method="platt")
    with pytest.raises(ValueError, match="empty"):
        calibration.fit_isotonic([], np.array([], bool))


def test_ece_replicates_equal_expanded_claims():
    rng = np.random.default_rng(9)
    scores, hallucinated = _data(9, n=120)
    p = np.round(scores, 2)
    weights = rng.integers(0, 3, size=(15, scores.size))
    got = calibration.ece_replicates(p, hallucinated, weights, n_bins=10)
    for row, w in zip(got, weights, strict=True):
        assert row == pytest.approx(calibration.ece(np.repeat(p, w), np.repeat(hallucinated, w), n_bins=10))


def test_bootstrap_ece_equals_replicate_weights():
    from much_metric.scoring._bootstrap import resample_counts

    scores, hallucinated = _data(11, n=300)
    claim_sample = np.sort(np.random.default_rng(2).integers(0, 60, scores.size))
    p = np.round(scores, 2)
    got = calibration.bootstrap_ece(p, hallucinated, claim_sample, 60, n_resamples=40, random_state=4)
    weights = resample_counts(60, 40, np.random.default_rng(4))[:, claim_sample]
    np.testing.assert_allclose(got, calibration.ece_replicates(p, hallucinated, weights), atol=1e-12)
