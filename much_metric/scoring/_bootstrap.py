"""Seeded bootstrap over samples (generations), not claims.

Claims of one generation are correlated (same model, same question), so the resampling unit is the sample: a
replicate draws ``n_samples`` samples with replacement, and every claim of a drawn sample enters with the sample's
multiplicity. That is exactly a weight per claim, so a replicate's metrics come from the same single sort as the
point estimate (:mod:`much_metric.scoring._ranking`) and replicates are processed in vectorised batches.

Intervals are percentile intervals. The paired comparison applies the same resamples to two methods scored on the
same claims, so the interval of the difference accounts for their correlation.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from much_dataset.params import OPEN_FRACTION, Interval, InvalidParameterError, check_param
from much_metric.scoring._counts import SortedClaims, cumulative_counts, resample_counts, sort_claims
from much_metric.scoring._ranking import METRICS, curve_metrics, metrics_from_counts

__all__ = ["MAX_RESAMPLES", "MAX_RESAMPLES_REASON", "MIN_RANK_RESAMPLES", "RESAMPLES", "RESAMPLES_REASON", "Bootstrap",
           "resample_counts", "bootstrap_distribution", "bootstrap_intervals", "check_resamples", "paired_bootstrap"]

#: Fewest bootstrap resamples behind a 95 % interval, a rank probability or a p-value.
MIN_RANK_RESAMPLES = 40
#: Why: said by every message that refuses fewer.
RESAMPLES_REASON = ("a 95% percentile interval needs at least one resample in each 2.5% tail (1 / 0.025 = 40 "
                    "resamples; with fewer its bounds are the extreme replicates), and with B resamples no paired "
                    "p-value can fall below 2/B")
#: Most bootstrap resamples a run or an evaluation accepts.
MAX_RESAMPLES = 100_000
#: Why: said by every message that refuses more.
MAX_RESAMPLES_REASON = ("time and memory grow linearly with the resamples, while the Monte-Carlo error of a 95% "
                        "percentile bound shrinks only as 1/sqrt(B): at 100000 each 2.5% tail already holds 2500 "
                        "resamples and more cannot move a bound printed to 3 decimals by a visible amount")
#: The one resample rule: every :class:`Bootstrap`, the bootstrap functions, the evaluation options, the commands'
#: ``--bootstrap`` and the leaderboard read this constraint (no bootstrap at all is ``bootstrap=None``, or
#: ``--bootstrap 0`` where a command allows it).
RESAMPLES = Interval(numbers.Integral, MIN_RANK_RESAMPLES, MAX_RESAMPLES)


def check_resamples(n_resamples: Any, option: str = "n_resamples", *, zero: bool = True) -> int:
    """``n_resamples`` as an int when :data:`RESAMPLES` accepts it, or when it is 0 (no bootstrap) and ``zero``
    allows that (a command's ``--bootstrap 0``); else :class:`~much_dataset.params.InvalidParameterError` (a
    ``ValueError``) naming ``option`` and the reason of the bound it crossed.

    >>> check_resamples(0, "--bootstrap"), check_resamples(1000)
    (0, 1000)
    >>> check_resamples(10, "--bootstrap")
    Traceback (most recent call last):
    ...
    much_dataset.params.InvalidParameterError: --bootstrap must be 0 (no intervals) or at least 40, got 10: a 95% percentile interval needs at least one resample in each 2.5% tail (1 / 0.025 = 40 resamples; with fewer its bounds are the extreme replicates), and with B resamples no paired p-value can fall below 2/B
    """  # noqa: E501
    if zero and not isinstance(n_resamples, bool) and isinstance(n_resamples, numbers.Integral) \
            and n_resamples == 0:
        return 0
    if RESAMPLES.is_satisfied_by(n_resamples):
        return int(n_resamples)
    if not isinstance(n_resamples, bool) and isinstance(n_resamples, numbers.Integral) \
            and n_resamples > MAX_RESAMPLES:
        raise InvalidParameterError(f"{option} must be at most {MAX_RESAMPLES}, got {n_resamples!r}: "
                                    f"{MAX_RESAMPLES_REASON}")
    lowest = f"0 (no intervals) or at least {MIN_RANK_RESAMPLES}" if zero else \
        f"an integer of at least {MIN_RANK_RESAMPLES} (no bootstrap: bootstrap=None)"
    raise InvalidParameterError(f"{option} must be {lowest}, got {n_resamples!r}: {RESAMPLES_REASON}")

# Replicates x claims per batch: bounds the memory of the weight matrices to a few tens of MB.
_BATCH_CELLS = 2_000_000


@dataclass(frozen=True)
class Bootstrap:
    """How to resample for intervals, rankings and paired comparisons: ``bootstrap=Bootstrap(...)`` in
    :func:`much_metric.score`, :func:`~much_metric.scoring.score_claims`, :func:`~much_metric.scoring.compare` and
    :func:`much_metric.evaluate_signals` (``bootstrap=None``: no intervals).

    The resampling unit is the sample (generation): a replicate draws ``n_samples`` samples with replacement and
    every claim of a drawn sample moves with it.

    Parameters
    ----------
    n_resamples : int, default 1000
        Number of bootstrap replicates, in [40, 100000] (:data:`RESAMPLES`, the one resample rule of the toolkit:
        fewer leave a 95 % interval's bounds to the extreme replicates).
    confidence_level : float, default 0.95
        Coverage of the percentile intervals, in (0, 1).
    random_state : int or None, default 0
        Seed of ``numpy.random.default_rng`` (``None``: fresh entropy, not reproducible).

    Examples
    --------
    >>> from much_metric.scoring import Bootstrap
    >>> Bootstrap(n_resamples=200, random_state=3)
    Bootstrap(n_resamples=200, confidence_level=0.95, random_state=3)
    """

    n_resamples: int = 1000
    confidence_level: float = 0.95
    random_state: int | None = 0

    def __post_init__(self) -> None:
        _check(self.n_resamples, self.confidence_level)
        if self.random_state is not None and (isinstance(self.random_state, bool)
                                              or not isinstance(self.random_state, int | np.integer)):
            raise TypeError(f"Bootstrap.random_state must be an int or None, got {self.random_state!r}")


def _check(n_resamples: int, confidence_level: float) -> None:
    check_resamples(n_resamples, "n_resamples", zero=False)
    check_param("confidence_level", confidence_level, OPEN_FRACTION)


def bootstrap_distribution(
    claim_scores: list[np.ndarray],
    hallucinated: np.ndarray,
    claim_sample: np.ndarray,
    n_samples: int,
    *,
    n_resamples: int = 1000,
    random_state: int | None = 0,
    metrics: Sequence[str] = METRICS,
) -> list[dict[str, np.ndarray]]:
    """Bootstrap distribution of every metric (or of ``metrics``) for one or more methods scored on the same claims.

    Parameters
    ----------
    claim_scores : list of ndarray of shape (n_claims,)
        One array of claim uncertainties per method (higher = more likely hallucinated).
    hallucinated : ndarray of bool, shape (n_claims,)
    claim_sample : ndarray of int, shape (n_claims,)
        Sample index (in ``[0, n_samples)``) of each claim.
    n_samples : int
        Number of samples to resample (samples without evaluated claims count too).
    n_resamples : int, default 1000
    random_state : int or None, default 0
    metrics : sequence of str, default every key of METRICS
        The metrics computed on each replicate (the resamples do not depend on it).

    Returns
    -------
    list of dict of ndarray of shape (n_resamples,)
        Per method, the metric values of each replicate (the same replicates for every method).
    """
    _check(n_resamples, 0.5)
    rng = np.random.default_rng(random_state)
    hallucinated = np.asarray(hallucinated, dtype=bool)
    sorted_claims: list[SortedClaims] = [
        sort_claims(np.asarray(s, dtype=np.float64), hallucinated) for s in claim_scores
    ]
    batch = max(1, _BATCH_CELLS // max(1, len(hallucinated)))
    parts: list[list[dict[str, np.ndarray]]] = [[] for _ in claim_scores]
    done = 0
    while done < n_resamples:
        size = min(batch, n_resamples - done)
        # float32 holds these integer sums exactly (< 2**24) and halves the memory traffic of the cumulative sums.
        counts = resample_counts(n_samples, size, rng).astype(np.float32)
        for method, claims in enumerate(sorted_claims):
            sample_sorted = claim_sample[claims.order]
            tps = cumulative_counts(counts[:, sample_sorted[claims.positive]], claims.positives_at)
            fps = cumulative_counts(counts[:, sample_sorted[~claims.positive]], claims.negatives_at)
            parts[method].append(metrics_from_counts(tps.astype(np.float64), fps.astype(np.float64), metrics))
        done += size
    return [{key: np.concatenate([p[key] for p in method]) for key in metrics} for method in parts]


def _interval(values: np.ndarray, confidence_level: float) -> tuple[float, float]:
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return (float("nan"), float("nan"))
    alpha = (1.0 - confidence_level) / 2.0
    low, high = np.quantile(finite, [alpha, 1.0 - alpha])
    return (float(low), float(high))


def bootstrap_intervals(
    claim_scores: np.ndarray,
    hallucinated: np.ndarray,
    claim_sample: np.ndarray,
    n_samples: int,
    *,
    n_resamples: int = 1000,
    confidence_level: float = 0.95,
    random_state: int | None = 0,
) -> dict[str, tuple[float, float]]:
    """Percentile bootstrap interval ``(low, high)`` of every metric of one method.

    Replicates where a metric is undefined (a resample with a single class) are left out of its interval.
    """
    _check(n_resamples, confidence_level)
    (distribution,) = bootstrap_distribution(
        [claim_scores], hallucinated, claim_sample, n_samples, n_resamples=n_resamples, random_state=random_state
    )
    return {key: _interval(distribution[key], confidence_level) for key in METRICS}


def paired_bootstrap(
    claim_scores_a: np.ndarray,
    claim_scores_b: np.ndarray,
    hallucinated: np.ndarray,
    claim_sample: np.ndarray,
    n_samples: int,
    *,
    n_resamples: int = 1000,
    confidence_level: float = 0.95,
    random_state: int | None = 0,
) -> dict[str, dict[str, float | tuple[float, float]]]:
    """Paired bootstrap comparison of methods A and B on the same claims.

    Returns, per metric: ``a``, ``b`` (point estimates), ``difference`` (a - b), ``interval`` (percentile interval
    of the replicate differences) and ``p_value``: two-sided bootstrap p-value of "no difference",
    ``min(1, 2 * min((#{d <= 0} + 1) / (B + 1), (#{d >= 0} + 1) / (B + 1)))`` over the B replicates where the
    metric is defined for both methods.
    """
    _check(n_resamples, confidence_level)
    hallucinated = np.asarray(hallucinated, dtype=bool)
    a, b = np.asarray(claim_scores_a, dtype=np.float64), np.asarray(claim_scores_b, dtype=np.float64)
    if a.shape != b.shape or a.shape != hallucinated.shape:
        raise ValueError(f"paired comparison needs scores of the same claims: shapes {a.shape} and {b.shape}")
    point_a = curve_metrics(sort_claims(a, hallucinated))
    point_b = curve_metrics(sort_claims(b, hallucinated))
    dist_a, dist_b = bootstrap_distribution(
        [a, b], hallucinated, claim_sample, n_samples, n_resamples=n_resamples, random_state=random_state
    )
    result = {}
    for key in METRICS:
        difference = dist_a[key] - dist_b[key]
        difference = difference[np.isfinite(difference)]
        count = difference.size
        if count:
            below = (np.count_nonzero(difference <= 0) + 1) / (count + 1)
            above = (np.count_nonzero(difference >= 0) + 1) / (count + 1)
            p_value = float(min(1.0, 2.0 * min(below, above)))
        else:
            p_value = float("nan")
        result[key] = {
            "a": float(point_a[key][0]),
            "b": float(point_b[key][0]),
            "difference": float(point_a[key][0] - point_b[key][0]),
            "interval": _interval(difference, confidence_level),
            "p_value": p_value,
        }
    return result
