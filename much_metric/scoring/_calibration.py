"""Claim scores -> probabilities of hallucination, fitted on one split and applied to another; ECE, Brier, diagrams.

Calibrators map an uncertainty score (higher = more likely hallucinated) to P(hallucinated):

* ``isotonic``: the non-decreasing least-squares fit of the 0/1 outcome on the score (pool-adjacent-violators over
  the distinct scores, ties pooled first), predicted by linear interpolation between the fitted distinct scores and
  clipped outside their range -- ``sklearn.isotonic.IsotonicRegression(out_of_bounds="clip")``. It is the
  monotone counterpart of LM-Polygraph's ``IsotonicPCCNormalizer`` (which uses *centred* isotonic regression of
  the quality on the uncertainty, decreasing; not reproduced here);
* ``binned`` (histogram binning): ``n_bins`` bins of equal claim count over the fitting scores (edges at score
  quantiles, like LM-Polygraph's ``BinnedPCCNormalizer``) or of equal width (``strategy="uniform"``); a score gets
  the hallucination rate of its bin on the fitting split, an empty bin the overall rate. Bins are right-closed
  ``(lo, hi]``, the first one also takes scores below it and the last one scores above it.

ECE (equal-width bins, LM-Polygraph's ``ECE(normalize=False)`` convention): with confidence ``c = 1 - p`` (the
probability that the claim is correct) split into ``n_bins`` bins over [0, 1], the first ``[0, 1/n]`` and the
others ``(lo, hi]``, ``ECE = sum_b (n_b / n) |accuracy_b - mean confidence_b|``, empty bins skipped; it equals
``sum_b (n_b / n) |hallucination rate_b - mean p_b|``. Brier = ``mean((p - y)^2)`` with ``y = 1`` for a
hallucinated claim.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from much_metric.scoring._bootstrap import check_resamples
from much_metric.scoring._counts import resample_counts

__all__ = [
    "Calibrator", "fit_isotonic", "fit_binned", "fit", "ece", "ece_replicates", "bootstrap_ece", "brier",
    "reliability_diagram",
]

#: Default number of ECE / reliability bins (LM-Polygraph's ECE default).
N_BINS = 20


def _inputs(scores, hallucinated, name: str = "claim_scores") -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(scores, dtype=np.float64)
    y = np.asarray(hallucinated)
    if x.ndim != 1 or y.shape != x.shape:
        raise ValueError(f"{name} and hallucinated must be 1-D of the same length, got {x.shape} and {y.shape}")
    if y.dtype != bool:
        raise TypeError(f"hallucinated must be a bool array (label == -1), got dtype {y.dtype}")
    if not np.all(np.isfinite(x)):
        bad = int(np.flatnonzero(~np.isfinite(x))[0])
        raise ValueError(f"{name}[{bad}] is not finite ({x[bad]!r})")
    if x.size == 0:
        raise ValueError(f"{name} is empty")
    return x, y


@dataclass(frozen=True)
class Calibrator:
    """A fitted score -> P(hallucinated) map. ``kind``: "isotonic" (interpolate ``y`` over ``x``, clipped) or
    "binned" (``edges`` of length n_bins + 1 and the rate ``y`` of each bin)."""

    kind: str
    x: np.ndarray
    y: np.ndarray

    def predict(self, scores) -> np.ndarray:
        """P(hallucinated) of each score, shape of ``scores``."""
        s = np.asarray(scores, dtype=np.float64)
        if not np.all(np.isfinite(s)):
            raise ValueError("scores to calibrate must be finite")
        if self.kind == "isotonic":
            return np.interp(s, self.x, self.y)  # np.interp clips to the end values outside [x0, x-1]
        interior = self.x[1:-1]
        return self.y[np.searchsorted(interior, s, side="left")]


def _pav(y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Non-decreasing weighted least-squares fit (pool adjacent violators) of the sequence ``y``."""
    means, weights, sizes = [], [], []
    for value, weight in zip(y.tolist(), w.tolist(), strict=True):
        means.append(value)
        weights.append(weight)
        sizes.append(1)
        while len(means) > 1 and means[-2] > means[-1]:
            total = weights[-2] + weights[-1]
            means[-2] = (means[-2] * weights[-2] + means[-1] * weights[-1]) / total
            weights[-2] = total
            sizes[-2] += sizes[-1]
            del means[-1], weights[-1], sizes[-1]
    return np.repeat(means, sizes)


def fit_isotonic(claim_scores, hallucinated) -> Calibrator:
    """Isotonic (non-decreasing) calibrator fitted on ``claim_scores`` / ``hallucinated`` (bool)."""
    x, y = _inputs(claim_scores, hallucinated)
    distinct, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    rate = np.bincount(inverse, weights=y.astype(np.float64), minlength=distinct.size) / counts
    # The loop is over distinct scores (blocks merge in amortised O(1)); fits are on a calibration split.
    return Calibrator("isotonic", distinct, np.clip(_pav(rate, counts.astype(np.float64)), 0.0, 1.0))


def fit_binned(claim_scores, hallucinated, *, n_bins: int = 10, strategy: str = "quantile") -> Calibrator:
    """Histogram-binning calibrator: the hallucination rate of the score's bin on the fitting split."""
    x, y = _inputs(claim_scores, hallucinated)
    if not isinstance(n_bins, int | np.integer) or n_bins < 1:
        raise ValueError(f"n_bins must be a positive integer, got {n_bins!r}")
    if strategy == "quantile":
        edges = np.quantile(x, np.linspace(0.0, 1.0, n_bins + 1))
    elif strategy == "uniform":
        edges = np.linspace(x.min(), x.max(), n_bins + 1)
    else:
        raise ValueError(f"strategy must be 'quantile' or 'uniform', got {strategy!r}")
    calibrator = Calibrator("binned", edges, np.zeros(n_bins))
    index = np.searchsorted(edges[1:-1], x, side="left")
    counts = np.bincount(index, minlength=n_bins)
    hits = np.bincount(index, weights=y.astype(np.float64), minlength=n_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = np.where(counts > 0, hits / np.maximum(counts, 1), y.mean())
    return Calibrator("binned", calibrator.x, rate)


def fit(claim_scores, hallucinated, *, method: str = "isotonic", **options) -> Calibrator:
    """``fit_isotonic`` or ``fit_binned`` by name."""
    if method == "isotonic":
        return fit_isotonic(claim_scores, hallucinated, **options)
    if method == "binned":
        return fit_binned(claim_scores, hallucinated, **options)
    raise ValueError(f"method must be 'isotonic' or 'binned', got {method!r}")


def _probabilities(probabilities, hallucinated) -> tuple[np.ndarray, np.ndarray]:
    p, y = _inputs(probabilities, hallucinated, name="probabilities")
    if p.min() < 0 or p.max() > 1:
        raise ValueError("probabilities must lie in [0, 1]; calibrate the scores first (scoring._calibration.fit)")
    return p, y


def _confidence_bins(confidence: np.ndarray, n_bins: int) -> np.ndarray:
    if not isinstance(n_bins, int | np.integer) or n_bins < 1:
        raise ValueError(f"n_bins must be a positive integer, got {n_bins!r}")
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    # first bin [0, e1], then (e_i, e_i+1]
    return np.maximum(np.searchsorted(edges, confidence, side="left") - 1, 0)


def reliability_diagram(probabilities, hallucinated, *, n_bins: int = N_BINS) -> dict[str, np.ndarray]:
    """Per equal-width bin of P(hallucinated): ``centre``, ``rate`` (observed hallucination rate), ``confidence``
    (mean predicted probability) and ``count`` (claims); bins ordered by increasing probability, empty bins
    included with nan rate/confidence. Same bins as :func:`ece`."""
    p, y = _probabilities(probabilities, hallucinated)
    index = (n_bins - 1) - _confidence_bins(1.0 - p, n_bins)  # bin b of confidence = bin n-1-b of p
    count = np.bincount(index, minlength=n_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = np.bincount(index, weights=y.astype(np.float64), minlength=n_bins) / count
        confidence = np.bincount(index, weights=p, minlength=n_bins) / count
    centre = (np.arange(n_bins) + 0.5) / n_bins
    return {"centre": centre, "rate": rate, "confidence": confidence, "count": count}


def ece(probabilities, hallucinated, *, n_bins: int = N_BINS) -> float:
    """Expected calibration error of P(hallucinated) (equal-width bins; convention in the module docstring)."""
    diagram = reliability_diagram(probabilities, hallucinated, n_bins=n_bins)
    filled = diagram["count"] > 0
    gaps = np.abs(diagram["rate"][filled] - diagram["confidence"][filled])
    return float(np.sum(diagram["count"][filled] * gaps) / diagram["count"].sum())


def brier(probabilities, hallucinated) -> float:
    """Brier score ``mean((p - y)^2)``, ``y = 1`` for a hallucinated claim."""
    p, y = _probabilities(probabilities, hallucinated)
    return float(np.mean((p - y) ** 2))


def ece_replicates(probabilities, hallucinated, weights: np.ndarray, *, n_bins: int = N_BINS) -> np.ndarray:
    """ECE of each replicate; ``weights`` (n_replicates, n_claims): claim weights (bootstrap multiplicities) in
    claim order. One matrix product per statistic: the bins do not depend on the replicate."""
    p, y = _probabilities(probabilities, hallucinated)
    weights = np.asarray(weights, dtype=np.float64)
    if weights.ndim != 2 or weights.shape[1] != p.size:
        raise ValueError(f"weights must have shape (n_replicates, {p.size}), got {weights.shape}")
    index = _confidence_bins(1.0 - p, n_bins)
    onehot = np.zeros((p.size, n_bins))
    onehot[np.arange(p.size), index] = 1.0
    count = weights @ onehot
    gap = np.abs(weights @ (onehot * y[:, None]) - weights @ (onehot * p[:, None]))  # |sum y - sum p| per bin
    with np.errstate(invalid="ignore", divide="ignore"):
        return gap.sum(axis=1) / count.sum(axis=1)


def bootstrap_ece(probabilities, hallucinated, claim_sample, n_samples: int, *, n_resamples: int = 1000,
                  n_bins: int = N_BINS, random_state: int | None = 0) -> np.ndarray:
    """ECE of each bootstrap replicate over samples (:func:`scoring._counts.resample_counts`): the per-sample,
    per-bin sums are formed once, so a replicate costs one (n_samples x n_bins) product. Shape (n_resamples,).
    ``n_resamples`` obeys the one resample rule (:data:`much_metric.scoring.RESAMPLES`)."""
    check_resamples(n_resamples, "n_resamples", zero=False)
    p, y = _probabilities(probabilities, hallucinated)
    claim_sample = np.asarray(claim_sample)
    if claim_sample.shape != p.shape:
        raise ValueError(f"claim_sample must have one entry per claim, got shape {claim_sample.shape}")
    cell = claim_sample * n_bins + _confidence_bins(1.0 - p, n_bins)
    size = n_samples * n_bins
    count = np.bincount(cell, minlength=size).reshape(n_samples, n_bins)
    gap = (np.bincount(cell, weights=y.astype(np.float64), minlength=size)
           - np.bincount(cell, weights=p, minlength=size)).reshape(n_samples, n_bins)
    weights = resample_counts(n_samples, n_resamples, np.random.default_rng(random_state)).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.abs(weights @ gap).sum(axis=1) / (weights @ count).sum(axis=1)
