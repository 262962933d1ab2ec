"""scoring._floors: the constant baseline equals its closed forms; the random baseline is seeded and near 0.5."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from much_metric.scoring import _calibration as calibration
from much_metric.scoring import _floors as floors

sklearn_metrics = pytest.importorskip("sklearn.metrics")


@settings(max_examples=50, deadline=None)
@given(st.lists(st.booleans(), min_size=1, max_size=200))
def test_constant_baseline_equals_closed_forms(labels):
    hallucinated = np.array(labels)
    computed = floors.constant_baseline(hallucinated)
    expected = floors.constant_expected(hallucinated)
    for key, value in computed.items():
        np.testing.assert_allclose(value, expected[key], atol=1e-12, equal_nan=True, err_msg=key)
    pi = hallucinated.mean()
    assert expected["brier"] == pytest.approx(calibration.brier(np.full(hallucinated.size, pi), hallucinated))
    assert calibration.ece(np.full(hallucinated.size, pi), hallucinated) == pytest.approx(expected["ece"], abs=1e-12)


def test_constant_baseline_against_sklearn():
    hallucinated = np.random.default_rng(0).random(500) < 0.3
    computed = floors.constant_baseline(hallucinated)
    constant = np.zeros(hallucinated.size)
    assert computed["roc_auc"] == sklearn_metrics.roc_auc_score(hallucinated, constant) == 0.5
    assert computed["average_precision"] == pytest.approx(sklearn_metrics.average_precision_score(hallucinated,
                                                                                                  constant))
    precision, recall, _ = sklearn_metrics.precision_recall_curve(hallucinated, constant)
    assert computed["pr_auc"] == pytest.approx(sklearn_metrics.auc(recall, precision))


def test_random_baseline_is_seeded_and_near_chance():
    hallucinated = np.random.default_rng(1).random(20_000) < 0.25
    a = floors.random_baseline(hallucinated, random_state=3)
    assert a == floors.random_baseline(hallucinated, random_state=3)
    assert a != floors.random_baseline(hallucinated, random_state=4)
    scores = floors.random_scores(hallucinated.size, random_state=3)
    assert a["roc_auc"] == pytest.approx(sklearn_metrics.roc_auc_score(hallucinated, scores))
    assert abs(a["roc_auc"] - 0.5) < 0.02 and abs(a["average_precision"] - hallucinated.mean()) < 0.02
    assert abs(a["prr"]) < 0.05


def test_errors():
    with pytest.raises(TypeError, match="bool"):
        floors.constant_baseline(np.array([1, -1]))
    with pytest.raises(ValueError, match="empty"):
        floors.random_baseline(np.array([], bool))
