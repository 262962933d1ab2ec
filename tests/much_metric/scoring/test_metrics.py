import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import auc, average_precision_score, precision_recall_curve, roc_auc_score
from sklearn.metrics import roc_curve as sk_roc_curve

from much_dataset import schema
from much_metric.scoring._api import aggregate_claims
from much_metric.scoring._ranking import METRICS, curve_metrics, pr_curve, roc_curve, sort_claims
from tests.much_metric._metric_helpers import columns, mushroom_rows


def loop_prr(y, s, max_rejection=1.0):
    """PRR by a loop over the number of kept claims: the expected correct count among the k most certain claims,
    a tied group entering in proportion (hypergeometric mean), LM-Polygraph's area discretisation."""
    y, s = np.asarray(y, bool), np.asarray(s, float)
    n, n_correct = len(y), int(np.count_nonzero(~y))
    values = np.unique(s)  # ascending: most certain first
    size = np.array([np.count_nonzero(s == v) for v in values])
    correct = np.array([np.count_nonzero((s == v) & ~y) for v in values])

    def area(quality_at):
        n_rej = int(max_rejection * n)
        return np.mean([quality_at(k) for k in range(n, n - n_rej, -1)])

    def method(k):
        below = np.cumsum(size) - size
        g = int(np.searchsorted(np.cumsum(size), k))  # group holding the k-th most certain claim
        return (correct[:g].sum() + (k - below[g]) * correct[g] / size[g]) / k

    a, oracle = area(method), area(lambda k: min(k, n_correct) / k)
    random = n_correct / n
    return (a - random) / (oracle - random)


def sklearn_metrics(y, s):
    """Every metric from scikit-learn's curves, following the definitions of much_metric.scoring._ranking."""
    precision, recall, _ = precision_recall_curve(y, s)
    fpr, tpr, _ = sk_roc_curve(y, s, drop_intermediate=False)
    # reference (docs/reference-behaviour.md#metrics): first index with recall <= 0.2
    first = int(np.flatnonzero(recall <= 0.2)[0])
    partial = auc(recall[first:], precision[first:]) / 0.2 if len(recall) - first >= 2 else 0.0
    rec_up, prec_up = recall[::-1], precision[::-1]
    clipped = np.minimum(rec_up, 0.2)
    partial_ap = float(np.sum(np.diff(clipped) * prec_up[1:]) / 0.2)
    qualifying = precision[:-1] >= 0.8  # sklearn's last point (recall 0, precision 1) is not a threshold
    return {
        "roc_auc": roc_auc_score(y, s),
        "pr_auc": auc(recall, precision),
        "average_precision": average_precision_score(y, s),
        "tpr_at_fpr_10": float(tpr[fpr <= 0.1].max()),
        "recall_at_precision_80": float(recall[:-1][qualifying].max()) if qualifying.any() else 0.0,
        "partial_pr_auc_recall_20": partial,
        "partial_average_precision_recall_20": partial_ap,
        "prr": loop_prr(y, s),
        "prr_50": loop_prr(y, s, 0.5) if len(y) >= 4 else float("nan"),
    }


def ours(y, s, weights=None):
    result = curve_metrics(sort_claims(np.asarray(s, float), np.asarray(y, bool)),
                           None if weights is None else weights)
    return {k: float(v[0]) for k, v in result.items()}


@pytest.fixture(scope="module")
def mushroom_claims():
    data = columns(mushroom_rows())
    claims = aggregate_claims(data["scores"], data[schema.TOKEN_CHUNKS], stopword_mask=data[schema.STOPWORD_MASK])
    y = np.concatenate([np.asarray(labels[:-1]) == schema.HALLUCINATED for labels in data[schema.LABELS]])
    return y, np.concatenate(claims)


def test_matches_sklearn_on_real_mushroom_claims(mushroom_claims):
    y, s = mushroom_claims
    assert 0.1 < y.mean() < 0.9 and len(y) > 2000
    expected, got = sklearn_metrics(y, s), ours(y, s)
    for key in METRICS:
        assert got[key] == pytest.approx(expected[key], abs=1e-12), key


@pytest.mark.parametrize("seed", range(8))
def test_matches_sklearn_with_heavy_ties(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 400))
    y = rng.random(n) < rng.uniform(0.1, 0.9)
    y[0], y[1] = True, False
    s = np.round(rng.random(n) + 0.6 * y, int(rng.integers(0, 3)))  # 1-3 decimals: many tied scores
    expected, got = sklearn_metrics(y, s), ours(y, s)
    for key in METRICS:
        assert got[key] == pytest.approx(expected[key], abs=1e-12), key


def test_operating_points_by_hand():
    # 4 positives, 6 negatives. Thresholds in decreasing order:
    #   0.9 P -> TP1 FP0 ; 0.8 N -> TP1 FP1 ; 0.7 P ; 0.6 P -> TP3 FP1 ; 0.5 N.. -> FP grows ; 0.1 P last.
    s = np.array([0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.15, 0.1])
    y = np.array([1, 0, 1, 1, 0, 0, 0, 0, 0, 1], bool)
    got = ours(y, s)
    # FPR <= 0.1 allows at most 0 false positives out of 6 (1/6 > 0.1): best TPR = 1/4, no interpolation.
    assert got["tpr_at_fpr_10"] == pytest.approx(0.25)
    # precision >= 0.8: (1/1) at recall 0.25, (3/4 = 0.75) fails -> 0.25.
    assert got["recall_at_precision_80"] == pytest.approx(0.25)


def test_single_class_gives_nan():
    s = np.array([0.1, 0.5, 0.7])
    all_negative = ours(np.zeros(3, bool), s)
    assert all(np.isnan(all_negative[k]) for k in METRICS)
    all_positive = ours(np.ones(3, bool), s)
    assert np.isnan(all_positive["roc_auc"]) and np.isnan(all_positive["tpr_at_fpr_10"])
    assert all_positive["average_precision"] == pytest.approx(1.0)
    assert all(np.isnan(v) for v in ours(np.zeros(0, bool), np.zeros(0)).values())


def test_curves_for_plots_match_sklearn(mushroom_claims):
    y, s = mushroom_claims
    fpr, tpr = roc_curve(s, y)
    sk_fpr, sk_tpr, _ = sk_roc_curve(y, s, drop_intermediate=False)
    np.testing.assert_allclose(fpr, sk_fpr)
    np.testing.assert_allclose(tpr, sk_tpr)
    precision, recall, thresholds = pr_curve(s, y)
    sk_precision, sk_recall, sk_thresholds = precision_recall_curve(y, s)
    np.testing.assert_array_equal(precision, sk_precision)
    np.testing.assert_array_equal(recall, sk_recall)
    np.testing.assert_array_equal(thresholds, sk_thresholds)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.booleans()), min_size=1, max_size=30))
def test_pr_curve_equals_sklearn_precision_recall_curve(items):
    """Differential: same arrays, same order, same lengths as scikit-learn (ties, one class, a single claim)."""
    import warnings

    s = np.array([i[0] / 3 for i in items], float)
    y = np.array([i[1] for i in items], bool)
    got = pr_curve(s, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # sklearn warns when no claim is hallucinated
        expected = precision_recall_curve(y, s)
    assert len(got) == 3
    for ours, theirs in zip(got, expected, strict=True):
        assert ours.shape == theirs.shape
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-15)


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 12), st.booleans(), st.integers(0, 3)), min_size=2, max_size=40),
)
def test_integer_weights_equal_repeated_claims(items):
    """The bootstrap's weighting == physically repeating claims (weight 0 = claim absent), sklearn as judge."""
    s = np.array([i[0] / 4 for i in items], float)
    y = np.array([i[1] for i in items], bool)
    w = np.array([i[2] for i in items], float)
    keep = np.repeat(np.arange(len(items)), w.astype(int))
    order = sort_claims(s, y).order
    got = {k: float(v[0]) for k, v in curve_metrics(sort_claims(s, y), w[order][None, :]).items()}
    y_rep, s_rep = y[keep], s[keep]
    if len(y_rep) == 0 or y_rep.all() or not y_rep.any():
        if not y_rep.any():
            assert np.isnan(got["average_precision"])
        if len(y_rep) == 0 or y_rep.all():
            assert np.isnan(got["roc_auc"])
        return
    expected = sklearn_metrics(y_rep, s_rep)
    for key in METRICS:
        assert got[key] == pytest.approx(expected[key], abs=1e-9, nan_ok=True), key


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(-500, 500), st.booleans()), min_size=2, max_size=60),
    st.sampled_from(["exp", "cube", "affine"]),
)
def test_metrics_invariant_under_increasing_transforms(items, transform):
    # A grid of scores: a transform cannot merge two distinct grid values by rounding, so ties are preserved.
    s = np.array([i[0] / 100 for i in items])
    y = np.array([i[1] for i in items], bool)
    f = {"exp": np.exp, "cube": lambda x: x**3, "affine": lambda x: 3 * x + 7}[transform]
    a, b = ours(y, s), ours(y, f(s))
    for key in METRICS:
        if np.isnan(a[key]):
            assert np.isnan(b[key])
        else:
            assert b[key] == pytest.approx(a[key], abs=1e-9), key
