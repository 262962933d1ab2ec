"""The PRR kernel on cumulative counts (the closed form described in :mod:`._rejection`), shared by the metric table
(:mod:`._ranking`) and the rejection curves (:mod:`._rejection`); it imports neither."""

from __future__ import annotations

import numbers

import numpy as np

from much_dataset.params import Interval, check_param

__all__ = ["prr_of_curves", "prr_from_counts"]


#: PRR's rejection bound: a fraction in (0, 1].
MAX_REJECTION = Interval(numbers.Real, 0, 1, closed="right")


def _check_fraction(max_rejection: float) -> None:
    check_param("max_rejection", max_rejection, MAX_REJECTION)


def _integer_counts(values: np.ndarray, name: str) -> np.ndarray:
    rounded = np.rint(values)
    if not np.array_equal(rounded, values):
        raise ValueError(f"{name}: PRR needs integer claim weights (bootstrap multiplicities), got non-integers")
    return rounded.astype(np.int64)


_HARMONIC = np.zeros(1)


def _harmonic(n_max: int) -> np.ndarray:
    """Harmonic numbers ``H[0..n_max]`` (``H[0] = 0``), from a table grown on demand (bounded by the claim count)."""
    global _HARMONIC
    if _HARMONIC.size <= n_max:
        _HARMONIC = np.concatenate([[0.0], np.cumsum(1.0 / np.arange(1, max(n_max, 2 * _HARMONIC.size) + 1))])
    return _HARMONIC


def _blocks(tps: np.ndarray, fps: np.ndarray) -> tuple[np.ndarray, ...]:
    n_correct = fps[:, -1]
    n = tps[:, -1] + n_correct
    predicted = tps + fps
    kept = n[:, None] - predicted
    # a threshold with zero weight in this replicate has width 0 and adds nothing: any finite slope will do
    slope = np.diff(fps, axis=1)
    slope /= np.maximum(np.diff(predicted, axis=1), 1.0)
    intercept = (n_correct[:, None] - fps[:, 1:]) - slope * kept[:, 1:]
    return n, n_correct, kept, slope, intercept


def prr_of_curves(tps: np.ndarray, fps: np.ndarray, *, max_rejection: float = 1.0,
                  shared: dict | None = None) -> dict[str, np.ndarray]:
    """The PRR kernel on integer-valued float cumulative counts (no validation; :func:`prr_from_counts` validates).

    Works in the counts' own decreasing-uncertainty order: at threshold ``j`` the kept claims number
    ``K_j = n - tps_j - fps_j`` and the kept correct ones ``C_j = n_correct - fps_j``. Between two thresholds
    ``C`` is linear in the number kept (ties at their mean), so the block ``K_{j+1} < k <= K_j`` adds
    ``sum C(k) / k = (C_{j+1} - r K_{j+1}) (H(K_j) - H(K_{j+1})) + r (K_j - K_{j+1})`` with slope ``r``. Up to a
    rejection fraction, kept sizes below ``start = n - floor(alpha n)`` are clipped away (``K -> max(K, start)``),
    which cuts the block holding ``start`` exactly, with no search. ``shared``: a dict in which the blocks are
    kept for another call on the same counts (the metric table's two PRR entries).
    """
    if shared is not None and "prr_blocks" in shared:
        n, p, kept, slope, intercept = shared["prr_blocks"]
    else:
        n, p, kept, slope, intercept = _blocks(tps, fps)
        if shared is not None:
            shared["prr_blocks"] = (n, p, kept, slope, intercept)
    n_rejected = np.floor(max_rejection * n)  # int(alpha * n) as LM-Polygraph, float product included
    start = n - n_rejected
    harmonic = _harmonic(int(n.max()) if n.size else 0)
    if max_rejection >= 1.0:
        h = harmonic[kept.astype(np.intp)]
        # the slope terms telescope to the correct count
        total = np.einsum("ij,ij->i", intercept, h[:, :-1] - h[:, 1:]) + p
    else:
        clipped = np.maximum(kept, start[:, None])
        h = harmonic[clipped.astype(np.intp)]
        total = (np.einsum("ij,ij->i", intercept, h[:, :-1] - h[:, 1:])
                 + np.einsum("ij,ij->i", slope, clipped[:, :-1] - clipped[:, 1:]))
    with np.errstate(invalid="ignore", divide="ignore"):
        area = total / n_rejected
        # oracle: the correct claims are the most certain, quality min(k, p) / k
        s = start.astype(np.intp)
        n_int, p_int = n.astype(np.intp), p.astype(np.intp)
        oracle_sum = np.where(start >= p, p * (harmonic[n_int] - harmonic[np.minimum(s, n_int)]),
                              (p - start) + p * (harmonic[n_int] - harmonic[p_int]))
        oracle = oracle_sum / n_rejected
        random = p / n
        prr_value = (area - random) / (oracle - random)
    undefined = (n_rejected == 0) | np.isclose(oracle, random)
    return {"prr": np.where(undefined, np.nan, prr_value), "area": np.where(n_rejected == 0, np.nan, area),
            "oracle": np.where(n_rejected == 0, np.nan, oracle), "random": np.where(n > 0, random, np.nan)}


def prr_from_counts(tps: np.ndarray, fps: np.ndarray, *, max_rejection: float = 1.0) -> dict[str, np.ndarray]:
    """PRR from cumulative (hallucinated, correct) claim weights in decreasing-uncertainty order.

    Parameters
    ----------
    tps, fps : ndarray of shape (n_replicates, n_thresholds + 1)
        Weight of hallucinated (``tps``) and correct (``fps``) claims scored at or above each distinct threshold,
        first column 0 (what :func:`much_metric.scoring._ranking.metrics_from_counts` receives). Integer-valued.
    max_rejection : float in (0, 1], keyword-only

    Returns
    -------
    dict of ndarray of shape (n_replicates,)
        ``prr``, and the areas ``area`` (method), ``oracle``, ``random``.
    """
    _check_fraction(max_rejection)
    tps = _integer_counts(np.atleast_2d(np.asarray(tps, dtype=np.float64)), "tps").astype(np.float64)
    fps = _integer_counts(np.atleast_2d(np.asarray(fps, dtype=np.float64)), "fps").astype(np.float64)
    if tps.shape != fps.shape:
        raise ValueError(f"tps and fps must have the same shape, got {tps.shape} and {fps.shape}")
    if tps.shape[1] <= 1:  # no claims
        nan = np.full(tps.shape[0], np.nan)
        return {"prr": nan, "area": nan.copy(), "oracle": nan.copy(), "random": nan.copy()}
    return prr_of_curves(tps, fps, max_rejection=max_rejection)
