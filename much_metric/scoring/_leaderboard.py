"""Ranking methods given as claim scores on the same claims (:func:`rank_claim_scores`): rank stability and pairwise
paired-bootstrap p-values.

All methods are resampled with the SAME bootstrap replicates over samples (:func:`much_metric.scoring._bootstrap.
bootstrap_distribution`), so differences account for the methods' correlation.

* :func:`rank_probabilities`: as Mu-SHROOM's appendix C, ``P[m, r]`` = fraction of replicates in which method
  ``m`` has rank ``r`` (0 = best); :func:`rank_claim_scores` reports ``P[m, rank of m on the full data]``, the
  probability that a method holds its rank. Tied methods in a replicate share the best of their ranks ("competition"
  ranking); each replicate still gives each method one rank, so every row of ``P`` sums to 1.
* :func:`pairwise_p_values`: two-sided paired-bootstrap p-value of "no difference" for every pair, the formula of
  :func:`much_metric.scoring._bootstrap.paired_bootstrap`: ``min(1, 2 min((#{d <= 0} + 1) / (B + 1), (#{d >= 0} + 1) /
  (B + 1)))`` over the ``B`` replicates where both values are defined.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from much_metric.scoring._bootstrap import Bootstrap, bootstrap_distribution
from much_metric.scoring._ranking import METRICS, curve_metrics, sort_claims

__all__ = ["ranks", "rank_probabilities", "pairwise_p_values", "rank_claim_scores"]


def ranks(values: np.ndarray, *, higher_is_better: bool = True) -> np.ndarray:
    """Competition ranks (0 = best) along the last axis of ``values`` (n_methods last); nan ranks last."""
    values = np.asarray(values, dtype=np.float64)
    key = np.where(np.isnan(values), -np.inf, values if higher_is_better else -values)
    # rank of m = number of methods strictly better than m
    return np.sum(key[..., None, :] > key[..., :, None], axis=-1)


def rank_probabilities(replicates: np.ndarray, *, higher_is_better: bool = True) -> np.ndarray:
    """``replicates`` (n_replicates, n_methods) metric values -> (n_methods, n_methods) rank frequencies."""
    replicates = np.asarray(replicates, dtype=np.float64)
    if replicates.ndim != 2 or replicates.shape[0] == 0:
        raise ValueError(f"replicates must have shape (n_replicates, n_methods), got {replicates.shape}")
    r = ranks(replicates, higher_is_better=higher_is_better)
    n_methods = replicates.shape[1]
    counts = np.zeros((n_methods, n_methods))
    for method in range(n_methods):
        counts[method] = np.bincount(r[:, method], minlength=n_methods)
    return counts / replicates.shape[0]


def pairwise_p_values(replicates: np.ndarray) -> np.ndarray:
    """(n_methods, n_methods) two-sided paired-bootstrap p-values (nan on the diagonal and where undefined)."""
    replicates = np.asarray(replicates, dtype=np.float64)
    n_methods = replicates.shape[1]
    out = np.full((n_methods, n_methods), np.nan)
    for a in range(n_methods):
        for b in range(a + 1, n_methods):
            difference = replicates[:, a] - replicates[:, b]
            difference = difference[np.isfinite(difference)]
            if difference.size:
                below = (np.count_nonzero(difference <= 0) + 1) / (difference.size + 1)
                above = (np.count_nonzero(difference >= 0) + 1) / (difference.size + 1)
                out[a, b] = out[b, a] = min(1.0, 2.0 * min(below, above))
    return out


def rank_claim_scores(claim_scores: Mapping[str, np.ndarray], hallucinated, claim_sample, n_samples: int, *,
                metric: str = "pr_auc", bootstrap: Bootstrap = Bootstrap()) -> dict:
    """Methods ranked by ``metric`` with bootstrap intervals, rank stability and pairwise p-values.

    Parameters
    ----------
    claim_scores : mapping name -> ndarray of shape (n_claims,)
        Each method's claim uncertainties, on the same claims.
    hallucinated, claim_sample, n_samples : as :func:`much_metric.scoring._bootstrap.bootstrap_distribution`.
    metric : one of :data:`much_metric.scoring._ranking.METRICS` (higher is better for all of them).
    bootstrap : Bootstrap
        Resampling of the samples (count, interval level, seed), the same replicates for every method.

    Returns
    -------
    dict
        ``rows``: one dict per method, best first: ``method``, ``value``, ``interval``, ``rank`` (0-based),
        ``rank_probability`` (probability of holding that rank); ``rank_probabilities`` (n_methods, n_methods) and
        ``p_values`` (n_methods, n_methods) in the order of ``rows``; ``n_resamples``.
    """
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")
    if not isinstance(bootstrap, Bootstrap):
        raise TypeError(f"bootstrap must be a much_metric.scoring.Bootstrap, got {bootstrap!r}")
    if not claim_scores:
        raise ValueError("no method to rank")
    names = list(claim_scores)
    labels = np.asarray(hallucinated, dtype=bool)
    arrays = [np.asarray(claim_scores[name], dtype=np.float64) for name in names]
    for name, scores in zip(names, arrays, strict=True):
        if scores.shape != labels.shape:
            raise ValueError(f"method {name!r}: {scores.shape[0] if scores.ndim else 0} claim scores for "
                             f"{labels.shape[0]} claims")
    point = np.array([curve_metrics(sort_claims(s, labels))[metric][0] for s in arrays])
    distributions = bootstrap_distribution(arrays, labels, np.asarray(claim_sample), n_samples,
                                           n_resamples=bootstrap.n_resamples, random_state=bootstrap.random_state)
    replicates = np.stack([d[metric] for d in distributions], axis=1)
    order = np.argsort(ranks(point), kind="stable")
    replicates = replicates[:, order]
    probabilities = rank_probabilities(replicates)
    point_ranks = ranks(point[order])
    alpha = (1.0 - bootstrap.confidence_level) / 2.0
    rows = []
    for position, method in enumerate(order):
        finite = replicates[:, position][np.isfinite(replicates[:, position])]
        interval = tuple(float(v) for v in np.quantile(finite, [alpha, 1 - alpha])) if finite.size else (
            float("nan"), float("nan"))
        rows.append({"method": names[method], "value": float(point[method]), "interval": interval,
                     "rank": int(point_ranks[position]),
                     "rank_probability": float(probabilities[position, point_ranks[position]])})
    return {"rows": rows, "rank_probabilities": probabilities, "p_values": pairwise_p_values(replicates),
            "n_resamples": bootstrap.n_resamples}
