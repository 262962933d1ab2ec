"""Claim-level ranking metrics from one sort, vectorised over bootstrap replicates.

The positive class is the hallucinated claim (label -1); the predictor is the claim uncertainty (higher = more
likely hallucinated). Claims are sorted once by decreasing score; a replicate is a vector of non-negative claim
weights (1 everywhere for the plain estimate, bootstrap multiplicities otherwise), so every curve is a cumulative
sum over the same order and a batch of replicates is a 2-D array. With unit weights each metric equals its
scikit-learn counterpart (checked by tests/much_metric/test_metrics.py):

* ``roc_auc``: trapezoid under the ROC curve (``sklearn.metrics.roc_auc_score``);
* ``pr_auc``: trapezoid ``auc(recall, precision)`` over ``precision_recall_curve`` including its final
  (recall 0, precision 1) point, as the reference (spec 9.4);
* ``average_precision``: step-wise sum ``sum_k (R_k - R_{k-1}) P_k`` (``average_precision_score``);
* ``tpr_at_fpr_10``: the largest TPR among the ROC curve's thresholds whose FPR <= 0.10 — no interpolation
  between thresholds, so it is an operating point one can actually deploy (0 if only the origin qualifies);
* ``recall_at_precision_80``: the largest recall among the PR curve's thresholds whose precision >= 0.80 — no
  interpolation; 0 if no threshold reaches that precision;
* ``partial_pr_auc_recall_20``: reference definition (spec 9.4, bug 11.16): trapezoid over the PR curve points
  whose recall <= 0.20 (from the first such point in scikit-learn's decreasing-recall order to the artificial
  (0, 1) end point, with no interpolation at 0.20), divided by 0.20;
* ``partial_average_precision_recall_20``: the corrected variant: step-wise average precision restricted to
  recall in [0, 0.20] (the last step cut exactly at 0.20), divided by 0.20; no artificial point, no trapezoid.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "METRICS", "SortedClaims", "sort_claims", "curve_metrics", "metrics_from_counts", "cumulative_counts",
    "roc_curve", "pr_curve",
]

#: Metric keys computed by :func:`curve_metrics`, in report order.
METRICS = (
    "roc_auc",
    "pr_auc",
    "average_precision",
    "tpr_at_fpr_10",
    "recall_at_precision_80",
    "partial_pr_auc_recall_20",
    "partial_average_precision_recall_20",
)
FPR_LIMIT = 0.10
PRECISION_TARGET = 0.80
RECALL_LIMIT = 0.20


@dataclass(frozen=True)
class SortedClaims:
    """Claims in decreasing-score order, and where each distinct score ends.

    ``order``: permutation of the claims (stable); ``positive``: bool (hallucinated) in that order; ``scores``:
    sorted scores; ``positives_at`` / ``negatives_at``: shape (n_thresholds + 1,), the number of positive / negative
    claims scored at or above each distinct threshold, preceded by 0 (the "nothing predicted" point).
    """

    order: np.ndarray
    positive: np.ndarray
    scores: np.ndarray
    positives_at: np.ndarray
    negatives_at: np.ndarray


def sort_claims(claim_scores: np.ndarray, hallucinated: np.ndarray) -> SortedClaims:
    """Sort claims by decreasing uncertainty; ``hallucinated`` is a bool array (label == -1)."""
    order = np.argsort(-claim_scores, kind="mergesort")
    scores = claim_scores[order]
    positive = np.asarray(hallucinated, dtype=bool)[order]
    ends = np.append(np.flatnonzero(np.diff(scores)), len(scores) - 1) if len(scores) else np.zeros(0, np.int64)
    positives_at = np.concatenate([[0], np.cumsum(positive)[ends]]).astype(np.int64)
    negatives_at = np.concatenate([[0], ends + 1]) - positives_at
    return SortedClaims(order, positive, scores, positives_at, negatives_at)


def cumulative_counts(weights: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Cumulative weight of a class at each threshold: ``weights`` (n_replicates, n_class_claims) holds that class's
    claim weights in sorted order, ``at`` the class counts of :class:`SortedClaims`. Shape (n_replicates, len(at))."""
    out = np.zeros((weights.shape[0], weights.shape[1] + 1), dtype=weights.dtype)
    np.cumsum(weights, axis=1, out=out[:, 1:])
    return out[:, at]


def _counts(sorted_claims: SortedClaims, weights: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    if weights is None:
        return (sorted_claims.positives_at[None, :].astype(np.float64),
                sorted_claims.negatives_at[None, :].astype(np.float64))
    positive = sorted_claims.positive
    return (cumulative_counts(weights[:, positive], sorted_claims.positives_at),
            cumulative_counts(weights[:, ~positive], sorted_claims.negatives_at))


def _trapezoid(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.sum(np.diff(x, axis=1) * (y[:, 1:] + y[:, :-1]), axis=1) / 2.0


def curve_metrics(sorted_claims: SortedClaims, weights: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Every metric of :data:`METRICS` for each replicate.

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


def metrics_from_counts(tps: np.ndarray, fps: np.ndarray) -> dict[str, np.ndarray]:
    """Metrics from cumulative (true, false) positive weights, shape (n_replicates, n_thresholds + 1), whose first
    column is the "nothing predicted" point (zeros)."""
    n_rep = tps.shape[0]
    if tps.shape[1] <= 1:
        return {key: np.full(n_rep, np.nan) for key in METRICS}
    n_pos, n_neg = tps[:, -1:], fps[:, -1:]
    with np.errstate(invalid="ignore", divide="ignore"):
        recall = tps / n_pos  # = TPR; column 0 is the origin
        fpr = fps / n_neg
        predicted = tps + fps
        # Where a replicate predicts nothing (column 0, or leading thresholds whose claims all have weight 0) the
        # point duplicates scikit-learn's artificial (recall 0, precision 1) point, so it adds no area.
        precision = np.where(predicted > 0, tps / np.where(predicted > 0, predicted, 1), 1.0)
    roc_defined = (n_pos[:, 0] > 0) & (n_neg[:, 0] > 0)
    pr_defined = n_pos[:, 0] > 0
    d_recall = np.diff(recall, axis=1)
    segment = d_recall * (precision[:, 1:] + precision[:, :-1]) / 2.0
    clipped = np.minimum(recall, RECALL_LIMIT)
    result = {
        "roc_auc": _trapezoid(fpr, recall),
        "pr_auc": np.sum(segment, axis=1),
        "average_precision": np.sum(d_recall * precision[:, 1:], axis=1),
        "tpr_at_fpr_10": np.max(np.where(fpr <= FPR_LIMIT, recall, 0.0), axis=1),
        "recall_at_precision_80": np.max(np.where((precision >= PRECISION_TARGET) & (predicted > 0), recall, 0.0),
                                         axis=1),
        # Reference partial PR-AUC: the trapezoid segments whose right (higher-recall) end has recall <= 0.2.
        "partial_pr_auc_recall_20": np.sum(np.where(recall[:, 1:] <= RECALL_LIMIT, segment, 0.0), axis=1)
        / RECALL_LIMIT,
        "partial_average_precision_recall_20": np.sum(np.diff(clipped, axis=1) * precision[:, 1:], axis=1)
        / RECALL_LIMIT,
    }
    for key in METRICS:
        defined = roc_defined if key in ("roc_auc", "tpr_at_fpr_10") else pr_defined
        result[key] = np.where(defined, result[key], np.nan)
    return result


def roc_curve(claim_scores: np.ndarray, hallucinated: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(fpr, tpr)`` at every distinct threshold, starting at (0, 0) (for plots)."""
    sorted_claims = sort_claims(np.asarray(claim_scores, dtype=np.float64), np.asarray(hallucinated, dtype=bool))
    tps, fps = sorted_claims.positives_at, sorted_claims.negatives_at
    with np.errstate(invalid="ignore", divide="ignore"):
        return fps / fps[-1], tps / tps[-1]


def pr_curve(claim_scores: np.ndarray, hallucinated: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(recall, precision)`` at every distinct threshold, starting at (0, 1) (for plots)."""
    sorted_claims = sort_claims(np.asarray(claim_scores, dtype=np.float64), np.asarray(hallucinated, dtype=bool))
    tps, fps = sorted_claims.positives_at, sorted_claims.negatives_at
    with np.errstate(invalid="ignore", divide="ignore"):
        return tps / tps[-1], np.r_[1.0, tps[1:] / (tps[1:] + fps[1:])]
