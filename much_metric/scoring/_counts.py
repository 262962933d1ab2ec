"""The arrays every claim metric shares: claims sorted once by decreasing uncertainty, cumulative class weights at
each distinct threshold, and the bootstrap's per-sample multiplicities.

The bottom of the scoring stage: :mod:`._ranking` (the metric table), :mod:`._prr` (the PRR kernel),
:mod:`._rejection` and :mod:`._bootstrap` all build on it and it imports none of them, so the four form no cycle.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["SortedClaims", "sort_claims", "cumulative_counts", "resample_counts"]


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



def resample_counts(n_samples: int, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    """``(n_resamples, n_samples)`` multiplicities of each sample in each replicate (rows sum to ``n_samples``)."""
    draws = rng.integers(0, n_samples, size=(n_resamples, n_samples))
    flat = draws + (np.arange(n_resamples) * n_samples)[:, None]
    return np.bincount(flat.ravel(), minlength=n_resamples * n_samples).reshape(n_resamples, n_samples)
