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

__all__ = ["ranks", "shown_ranks", "rank_probabilities", "pairwise_p_values", "rank_claim_scores",
           "differences_to_reference"]


def ranks(values: np.ndarray, *, higher_is_better: bool = True) -> np.ndarray:
    """Competition ranks (0 = best) along the last axis of ``values`` (n_methods last); nan ranks last."""
    values = np.asarray(values, dtype=np.float64)
    key = np.where(np.isnan(values), -np.inf, values if higher_is_better else -values)
    # rank of m = number of methods strictly better than m
    return np.sum(key[..., None, :] > key[..., :, None], axis=-1)


def shown_ranks(values: np.ndarray, digits: int = 3) -> np.ndarray:
    """Competition ranks (1 = best) of ``values`` as a table shows them, rounded to ``digits``: two rows printed
    0.623 share a rank whatever their fourth decimal (nan last)."""
    # the printed text, not np.round (which can differ from the formatted value at a trailing 5)
    shown = np.array([float(f"{float(v):.{digits}f}") for v in np.ravel(values)], dtype=np.float64)
    return ranks(shown) + 1


def _two_sided_p(difference: np.ndarray) -> float:
    """Two-sided bootstrap p-value of "no difference" over the finite replicate differences (nan without any)."""
    difference = difference[np.isfinite(difference)]
    if not difference.size:
        return float("nan")
    below = (np.count_nonzero(difference <= 0) + 1) / (difference.size + 1)
    above = (np.count_nonzero(difference >= 0) + 1) / (difference.size + 1)
    return float(min(1.0, 2.0 * min(below, above)))


def differences_to_reference(point: np.ndarray, replicates: np.ndarray | None, reference: int, *,
                             confidence_level: float = 0.95) -> list[dict[str, object]]:
    """Every method's paired difference to method ``reference`` (a column of the same replicates).

    ``point`` (n_methods,): the values on the full data; ``replicates`` (n_replicates, n_methods): the same
    bootstrap replicates for every method (:func:`much_metric.scoring._bootstrap.bootstrap_distribution`), or None
    (no bootstrap: the point differences alone). Returns per method ``{"a", "b", "difference", "interval",
    "p_value"}`` (``a`` the method, ``b`` the reference, the shape of :class:`much_metric.scoring.MetricComparison`;
    interval and p-value nan without replicates), with the p-value of :func:`pairwise_p_values`.
    """
    point = np.asarray(point, dtype=np.float64)
    alpha = (1.0 - confidence_level) / 2.0
    out = []
    for method in range(point.shape[0]):
        interval, p_value = (float("nan"), float("nan")), float("nan")
        if replicates is not None and method != reference:
            difference = replicates[:, method] - replicates[:, reference]
            finite = difference[np.isfinite(difference)]
            if finite.size:
                interval = tuple(float(v) for v in np.quantile(finite, [alpha, 1 - alpha]))
            p_value = _two_sided_p(difference)
        elif replicates is not None:
            interval = (0.0, 0.0)
        out.append({"a": float(point[method]), "b": float(point[reference]),
                    "difference": float(point[method] - point[reference]), "interval": interval,
                    "p_value": p_value})
    return out


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
            out[a, b] = out[b, a] = _two_sided_p(replicates[:, a] - replicates[:, b])
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
        ``rank_probability`` (probability of holding that rank), ``versus_best`` (the paired difference to the
        first row: :func:`differences_to_reference`); ``rank_probabilities`` (n_methods, n_methods) and
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
    # each method against the best (the first row), on the same replicates: the board's "separable from #1?"
    versus_best = differences_to_reference(point[order], replicates, 0, confidence_level=bootstrap.confidence_level)
    rows = []
    for position, method in enumerate(order):
        finite = replicates[:, position][np.isfinite(replicates[:, position])]
        interval = tuple(float(v) for v in np.quantile(finite, [alpha, 1 - alpha])) if finite.size else (
            float("nan"), float("nan"))
        rows.append({"method": names[method], "value": float(point[method]), "interval": interval,
                     "rank": int(point_ranks[position]),
                     "rank_probability": float(probabilities[position, point_ranks[position]]),
                     "versus_best": versus_best[position]})
    return {"rows": rows, "rank_probabilities": probabilities, "p_values": pairwise_p_values(replicates),
            "n_resamples": bootstrap.n_resamples}
