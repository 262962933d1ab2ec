"""Claim-level ranking metrics from one sort, vectorised over bootstrap replicates.

The positive class is the hallucinated claim (label -1); the predictor is the claim uncertainty (higher = more
likely hallucinated). Claims are sorted once by decreasing score; a replicate is a vector of non-negative claim
weights (1 everywhere for the plain estimate, bootstrap multiplicities otherwise), so every curve is a cumulative
sum over the same order and a batch of replicates is a 2-D array. With unit weights each metric equals its
scikit-learn counterpart (checked by tests/much_metric/scoring/test_metrics.py):

* ``roc_auc``: trapezoid under the ROC curve (``sklearn.metrics.roc_auc_score``);
* ``pr_auc``: trapezoid ``auc(recall, precision)`` over ``precision_recall_curve`` including its final
  (recall 0, precision 1) point, as the reference (docs/reference-behaviour.md#metrics);
* ``average_precision``: step-wise sum ``sum_k (R_k - R_{k-1}) P_k`` (``average_precision_score``);
* ``tpr_at_fpr_10``: the largest TPR among the ROC curve's thresholds whose FPR <= 0.10 — no interpolation
  between thresholds, so it is an operating point one can actually deploy (0 if only the origin qualifies);
* ``recall_at_precision_80``: the largest recall among the PR curve's thresholds whose precision >= 0.80 — no
  interpolation; 0 if no threshold reaches that precision;
* ``partial_pr_auc_recall_20``: reference definition (docs/reference-behaviour.md#metrics, #partial-pr-auc): trapezoid
over the PR curve points
  whose recall <= 0.20 (from the first such point in scikit-learn's decreasing-recall order to the artificial
  (0, 1) end point, with no interpolation at 0.20), divided by 0.20;
* ``partial_average_precision_recall_20``: the corrected variant: step-wise average precision restricted to
  recall in [0, 0.20] (the last step cut exactly at 0.20), divided by 0.20; no artificial point, no trapezoid;
* ``prr`` / ``prr_50``: LM-Polygraph's prediction-rejection ratio over all rejection fractions / up to 0.5
  (:mod:`much_metric.scoring._rejection`; ties at their expected value; claim weights count as multiplicities).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from much_metric.scoring._counts import SortedClaims, cumulative_counts, sort_claims
from much_metric.scoring._prr import prr_of_curves

__all__ = [
    "METRICS", "METRIC_TABLE", "Metric", "Curves", "SortedClaims", "sort_claims", "curve_metrics",
    "metrics_from_counts", "cumulative_counts", "roc_curve", "pr_curve",
]

FPR_LIMIT = 0.10
PRECISION_TARGET = 0.80
RECALL_LIMIT = 0.20


@dataclass(frozen=True)
class Curves:
    """Cumulative curves of a batch of replicates at each distinct threshold, decreasing score order.

    Every array has shape (n_replicates, n_thresholds + 1); column 0 is the "nothing predicted" point.
    ``tps`` / ``fps``: weight of hallucinated / correct claims scored at or above the threshold; ``n_pos`` /
    ``n_neg``: totals, shape (n_replicates, 1); ``recall`` (= TPR), ``fpr``; ``precision`` (1 where nothing is
    predicted, scikit-learn's artificial point); ``predicted`` = tps + fps.
    """

    tps: np.ndarray
    fps: np.ndarray
    n_pos: np.ndarray
    n_neg: np.ndarray
    recall: np.ndarray
    fpr: np.ndarray
    precision: np.ndarray
    predicted: np.ndarray
    #: intermediate arrays shared by several metrics of the same batch (e.g. both PRR entries), keyed by name
    shared: dict = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_counts(cls, tps: np.ndarray, fps: np.ndarray) -> Curves:
        n_pos, n_neg = tps[:, -1:], fps[:, -1:]
        with np.errstate(invalid="ignore", divide="ignore"):
            recall = tps / n_pos
            fpr = fps / n_neg
            predicted = tps + fps
            # Where a replicate predicts nothing (column 0, or leading thresholds whose claims all have weight 0)
            # the point duplicates scikit-learn's artificial (recall 0, precision 1) point, so it adds no area.
            precision = np.ones_like(tps)
            np.divide(tps, predicted, out=precision, where=predicted > 0)
        return cls(tps, fps, n_pos, n_neg, recall, fpr, precision, predicted)

    def recall_steps(self) -> np.ndarray:
        """``diff(recall)``, shape (n_replicates, n_thresholds) (computed once per batch)."""
        if "recall_steps" not in self.shared:
            self.shared["recall_steps"] = np.diff(self.recall, axis=1)
        return self.shared["recall_steps"]

    def pr_segments(self) -> np.ndarray:
        """Trapezoid areas between consecutive PR points, shape (n_replicates, n_thresholds) (computed once)."""
        if "pr_segments" not in self.shared:
            self.shared["pr_segments"] = self.recall_steps() * (self.precision[:, 1:] + self.precision[:, :-1]) / 2.0
        return self.shared["pr_segments"]


@dataclass(frozen=True)
class Metric:
    """One entry of the metric table.

    ``key``: the name in :func:`much_metric.score`'s dict; ``label``: a short column header; ``function``:
    :class:`Curves` -> one value per replicate (higher = better detection); ``description``: one line for tables,
    the report's glossary and the module card; ``needs_both_classes``: undefined (nan) without a correct claim too
    (ROC-based metrics), else only without a hallucinated claim.
    """

    key: str
    label: str
    function: Callable[[Curves], np.ndarray]
    description: str
    needs_both_classes: bool = False


def _trapezoid(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.sum(np.diff(x, axis=1) * (y[:, 1:] + y[:, :-1]), axis=1) / 2.0


def _roc_auc(c: Curves) -> np.ndarray:
    return _trapezoid(c.fpr, c.recall)


def _pr_auc(c: Curves) -> np.ndarray:
    return c.pr_segments().sum(axis=1)


def _average_precision(c: Curves) -> np.ndarray:
    return np.einsum("ij,ij->i", c.recall_steps(), c.precision[:, 1:])


def _tpr_at_fpr(c: Curves) -> np.ndarray:
    return np.max(np.where(c.fpr <= FPR_LIMIT, c.recall, 0.0), axis=1)


def _recall_at_precision(c: Curves) -> np.ndarray:
    return np.max(np.where((c.precision >= PRECISION_TARGET) & (c.predicted > 0), c.recall, 0.0), axis=1)


def _partial_pr_auc(c: Curves) -> np.ndarray:
    # Reference definition: the trapezoid segments whose right (higher-recall) end has recall <= 0.2.
    return np.sum(np.where(c.recall[:, 1:] <= RECALL_LIMIT, c.pr_segments(), 0.0), axis=1) / RECALL_LIMIT


def _partial_average_precision(c: Curves) -> np.ndarray:
    clipped = np.minimum(c.recall, RECALL_LIMIT)
    return np.sum(np.diff(clipped, axis=1) * c.precision[:, 1:], axis=1) / RECALL_LIMIT


PRR_FRACTION = 0.5


def _prr(c: Curves) -> np.ndarray:
    # claim weights are bootstrap multiplicities (integers)
    return prr_of_curves(c.tps, c.fps, shared=c.shared)["prr"]


def _prr_partial(c: Curves) -> np.ndarray:
    return prr_of_curves(c.tps, c.fps, max_rejection=PRR_FRACTION, shared=c.shared)["prr"]


#: The metric table: ``score``'s dict, the CLI tables, the HTML report and the module card iterate it, in this
#: order. Adding a metric is one entry.
METRIC_TABLE: tuple[Metric, ...] = (
    Metric("roc_auc", "ROC-AUC", _roc_auc, "area under the ROC curve (trapezoid; sklearn roc_auc_score)",
           needs_both_classes=True),
    Metric("pr_auc", "PR-AUC", _pr_auc,
           "trapezoid under the precision-recall curve incl. its (0, 1) end point, as the reference "
           "(docs/reference-behaviour.md#metrics)"),
    Metric("average_precision", "AP", _average_precision,
           "step-wise average precision (sklearn average_precision_score)"),
    Metric("tpr_at_fpr_10", "TPR@FPR<=10%", _tpr_at_fpr,
           "largest TPR among thresholds with FPR <= 0.10, no interpolation", needs_both_classes=True),
    Metric("recall_at_precision_80", "Recall@P>=80%", _recall_at_precision,
           "largest recall among thresholds with precision >= 0.80, no interpolation; 0 if none"),
    Metric("partial_pr_auc_recall_20", "pPR-AUC@R<=20% (ref)", _partial_pr_auc,
           "reference partial PR-AUC: trapezoid over PR points with recall <= 0.2 incl. (0, 1), / 0.2 "
           "(docs/reference-behaviour.md#partial-pr-auc)"),
    Metric("partial_average_precision_recall_20", "pAP@R<=20%", _partial_average_precision,
           "corrected partial AP: step-wise AP over recall in [0, 0.2], / 0.2"),
    Metric("prr", "PRR", _prr,
           "prediction-rejection ratio (LM-Polygraph): area between the method's and random rejection curves over "
           "the oracle's; 1 oracle, 0 random", needs_both_classes=True),
    Metric("prr_50", "PRR@50%", _prr_partial,
           "PRR with at most 50% of the claims rejected (LM-Polygraph max_rejection=0.5)", needs_both_classes=True),
)
#: Metric keys, in table order.
METRICS: tuple[str, ...] = tuple(metric.key for metric in METRIC_TABLE)


def _counts(sorted_claims: SortedClaims, weights: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    if weights is None:
        return (sorted_claims.positives_at[None, :].astype(np.float64),
                sorted_claims.negatives_at[None, :].astype(np.float64))
    positive = sorted_claims.positive
    return (cumulative_counts(weights[:, positive], sorted_claims.positives_at),
            cumulative_counts(weights[:, ~positive], sorted_claims.negatives_at))


def curve_metrics(sorted_claims: SortedClaims, weights: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Every metric of :data:`METRIC_TABLE` for each replicate.

    Parameters
    ----------
    sorted_claims : SortedClaims
    weights : ndarray of shape (n_replicates, n_claims), optional
        Non-negative claim weights in the sorted order (``sorted_claims.order``); unit weights if omitted.

    Returns
    -------
    dict of ndarray of shape (n_replicates,)
        ``nan`` where a metric is undefined (no positive, or no negative for ROC metrics).
    """
    return metrics_from_counts(*_counts(sorted_claims, weights))


def metrics_from_counts(tps: np.ndarray, fps: np.ndarray, keys: Sequence[str] = METRICS) -> dict[str, np.ndarray]:
    """Metrics from cumulative (true, false) positive weights, shape (n_replicates, n_thresholds + 1), whose first
    column is the "nothing predicted" point (zeros); ``keys``: the metrics wanted (default every one)."""
    n_rep = tps.shape[0]
    if tps.shape[1] <= 1:
        return {key: np.full(n_rep, np.nan) for key in keys}
    curves = Curves.from_counts(tps, fps)
    has_pos, has_neg = curves.n_pos[:, 0] > 0, curves.n_neg[:, 0] > 0
    result = {}
    for metric in (metric for metric in METRIC_TABLE if metric.key in keys):
        defined = has_pos & has_neg if metric.needs_both_classes else has_pos
        with np.errstate(invalid="ignore", divide="ignore"):
            result[metric.key] = np.where(defined, metric.function(curves), np.nan)
    return result


def roc_curve(claim_scores: np.ndarray, hallucinated: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(fpr, tpr)`` at every distinct threshold, starting at (0, 0) (for plots)."""
    sorted_claims = sort_claims(np.asarray(claim_scores, dtype=np.float64), np.asarray(hallucinated, dtype=bool))
    tps, fps = sorted_claims.positives_at, sorted_claims.negatives_at
    with np.errstate(invalid="ignore", divide="ignore"):
        return fps / fps[-1], tps / tps[-1]


def pr_curve(claim_scores: np.ndarray, hallucinated: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(precision, recall, thresholds)`` exactly as ``sklearn.metrics.precision_recall_curve(hallucinated,
    claim_scores)`` returns them (positive class = hallucinated claim).

    Returns
    -------
    precision, recall : ndarray of shape (n_thresholds + 1,)
        At each threshold in increasing order, then the artificial end point (precision 1, recall 0). Precision is
        0 where nothing is predicted positive; recall is 1 everywhere when no claim is hallucinated (as scikit-learn,
        which also warns then).
    thresholds : ndarray of shape (n_thresholds,)
        The distinct claim scores, increasing.
    """
    sorted_claims = sort_claims(np.asarray(claim_scores, dtype=np.float64), np.asarray(hallucinated, dtype=bool))
    tps = sorted_claims.positives_at[1:].astype(np.float64)
    fps = sorted_claims.negatives_at[1:].astype(np.float64)
    scores = sorted_claims.scores
    ends = np.append(np.flatnonzero(np.diff(scores)), len(scores) - 1) if len(scores) else np.zeros(0, np.int64)
    thresholds = scores[ends]
    predicted = tps + fps
    precision = np.zeros_like(tps)
    np.divide(tps, predicted, out=precision, where=predicted != 0)
    if len(tps) and tps[-1] > 0:
        recall = tps / tps[-1]
    else:
        recall = np.ones_like(tps)
    return (np.hstack([precision[::-1], 1.0]), np.hstack([recall[::-1], 0.0]), thresholds[::-1])
