"""The two conformal procedures against independent straightforward implementations written from the papers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from much_dataset.params import InvalidParameterError
from much_metric.conformal import (
    answer_level_threshold,
    answer_risk_scores,
    benjamini_hochberg,
    calibrate,
    conformal_p_values,
    min_answers_for,
    select_claims,
)
from tests.much_metric.conformal._synthetic import synthetic_claims


def _mohri_hashimoto_keep(cal_answers, test_answer, alpha):
    """The paper's procedure in its own terms (confidences, one Python loop per answer): r_i = the largest confidence
    of a hallucinated claim (-inf if none); q = the ceil((n+1)(1-alpha))-th smallest r_i (+inf past n); keep the
    claims of the new answer with confidence > q."""
    r = []
    for scores, hallucinated in cal_answers:
        confidences = [-s for s, h in zip(scores, hallucinated, strict=True) if h]
        r.append(max(confidences) if confidences else -math.inf)
    r.sort()
    k = math.ceil((len(r) + 1) * (1 - alpha))
    q = math.inf if k > len(r) else r[k - 1]
    return [-s > q for s in test_answer]


@pytest.mark.parametrize("alpha", [0.05, 0.1, 0.2, 0.5])
@pytest.mark.parametrize("seed", range(4))
def test_answer_level_threshold_matches_the_papers_procedure(alpha, seed):
    rng = np.random.default_rng(seed)
    cal_answers = []
    for _ in range(int(rng.integers(20, 60))):
        n = int(rng.integers(1, 5))
        # rounded scores: ties between answers' risk scores and test claims are exercised
        cal_answers.append((np.round(rng.normal(size=n), 1).tolist(), (rng.random(n) < 0.3).tolist()))
    test_answer = np.round(rng.normal(size=30), 1)
    scores = np.concatenate([a[0] for a in cal_answers])
    hallucinated = np.concatenate([a[1] for a in cal_answers]).astype(bool)
    answer = np.repeat(np.arange(len(cal_answers)), [len(a[0]) for a in cal_answers])
    threshold = answer_level_threshold(answer_risk_scores(scores, hallucinated, answer), alpha)
    assert (test_answer < threshold).tolist() == _mohri_hashimoto_keep(cal_answers, test_answer, alpha)


def test_answer_level_keeps_nothing_with_too_few_answers_and_min_answers_is_the_boundary():
    for alpha in (0.05, 0.1, 0.2):
        n = min_answers_for(alpha)
        risk = np.arange(n, dtype=float)
        assert answer_level_threshold(risk, alpha) > -math.inf
        assert answer_level_threshold(risk[:-1], alpha) == -math.inf


def _jin_candes_select(test_scores, cal_scores, cal_hallucinated, alpha):
    """Conformal selection written from the paper with loops: clipped calibration score (+inf for a correct claim),
    p_j = (1 + #{i: V_i <= V_j}) / (n + 1), then BH by scanning k = m .. 1."""
    n = len(cal_scores)
    clipped = [s if h else math.inf for s, h in zip(cal_scores, cal_hallucinated, strict=True)]
    p = [(1 + sum(1 for v in clipped if v <= t)) / (n + 1) for t in test_scores]
    m = len(p)
    ordered = sorted(p)
    k_star = 0
    for k in range(m, 0, -1):
        if ordered[k - 1] <= k * alpha / m:
            k_star = k
            break
    cut = ordered[k_star - 1] if k_star else -1.0
    return [pj <= cut for pj in p]


@pytest.mark.parametrize("alpha", [0.05, 0.1, 0.2])
@pytest.mark.parametrize("seed", range(5))
def test_conformal_selection_matches_a_loop_implementation(alpha, seed):
    rng = np.random.default_rng(100 + seed)
    n, m = int(rng.integers(30, 200)), int(rng.integers(1, 80))
    cal_hallucinated = rng.random(n) < 0.35
    cal_scores = np.round(rng.normal(size=n) + cal_hallucinated, 1)
    test_scores = np.round(rng.normal(size=m) + (rng.random(m) < 0.35), 1)
    ours = select_claims(test_scores, cal_scores[cal_hallucinated], n, alpha)
    assert ours.tolist() == _jin_candes_select(test_scores.tolist(), cal_scores.tolist(),
                                               cal_hallucinated.tolist(), alpha)


def test_p_values_are_small_for_low_uncertainty_and_bh_selects_a_prefix():
    p = conformal_p_values(np.array([-10.0, 10.0]), np.array([0.0, 1.0, 2.0]), 9)
    assert p[0] == pytest.approx(1 / 10) and p[1] == pytest.approx(4 / 10)
    selected = benjamini_hochberg(np.array([0.5, 0.01, 0.02, 0.9]), 0.1)
    assert selected.tolist() == [False, True, True, False]
    with pytest.raises(InvalidParameterError, match="alpha"):
        benjamini_hochberg(np.array([0.1]), 1.5)


def test_calibrate_refuses_a_small_group_naming_it_and_its_size():
    claims = synthetic_claims(200, seed=3)
    few = claims.subset((claims.groups["lang"] != "de") | np.isin(claims.answer, np.unique(claims.answer)[:30]))
    n_de = len(np.unique(few.answer[few.groups["lang"] == "de"]))
    assert 0 < n_de < 20
    with pytest.raises(InvalidParameterError, match=rf"lang='de' has {n_de} calibration answers.*minimum 20"):
        calibrate(few, alpha=0.1, by="lang")
    calibrate(few, alpha=0.1, by="lang", min_answers=n_de)  # the minimum is the user's to lower ...
    with pytest.raises(InvalidParameterError, match="minimum 19"):  # ... except below what alpha needs
        calibrate(few.subset(few.groups["lang"] == "de"), alpha=0.05, min_answers=1)


def test_per_group_sizes_are_shown():
    claims = synthetic_claims(200, seed=4)
    fitted = calibrate(claims, alpha=0.1, by="lang", guarantee="claim")
    for lang, group in fitted.groups.items():
        mine = claims.groups["lang"] == lang
        assert group.n_answers == len(np.unique(claims.answer[mine]))
        assert group.n_claims == mine.sum() and group.n_hallucinated == claims.hallucinated[mine].sum()
        assert f"{lang}: {group.n_answers} answers / {group.n_claims} claims" in fitted.describe()


def test_a_calibration_on_one_language_applied_to_another_is_outside_the_guarantee():
    claims = synthetic_claims(400, seed=5)
    english = claims.subset(claims.groups["lang"] == "en")
    fitted = calibrate(english, alpha=0.2, by="lang")
    french = claims.subset(claims.groups["lang"] == "fr")
    selection = fitted.apply(french)
    assert not selection.within_guarantee and selection.uncovered_groups == ("fr",)
    assert not selection.kept.any() and not selection.covered.any()
    same = fitted.apply(english)
    assert same.within_guarantee and same.kept.any()
