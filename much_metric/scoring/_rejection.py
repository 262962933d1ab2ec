"""Prediction-rejection ratio (PRR) of claim uncertainties, as LM-Polygraph defines it, vectorised over replicates.

Rejection: the most uncertain claims are rejected first; the quality of what is kept is the fraction of correct
(label +1) claims among the kept ones. With ``n`` claims, the curve has one point per number rejected
``j = 0 .. n - 1`` (rejection fraction ``j / n``; the "everything rejected" point is not part of it), and the area
under it is the mean of its points -- LM-Polygraph's ``PredictionRejectionArea`` (``ue_metrics/pred_rej_area.py``):
``sum(mean quality of the k most certain claims, k = n .. 1) / n``. Up to a rejection fraction ``alpha``
(lm-polygraph #230, ``PredictionRejectionArea(max_rejection=alpha)``) only the first ``floor(alpha * n)`` points
are averaged (rejection fractions ``0 .. (floor(alpha n) - 1) / n``).

``PRR = (A_method - A_random) / (A_oracle - A_random)``, where the oracle rejects hallucinated claims first and the
random curve is the expected curve of a random order, the constant ``n_correct / n`` (LM-Polygraph estimates it from
1,000 seeded shuffles; the expectation is used here). 1 = oracle, 0 = random, negative = worse than random.

Conventions that differ from LM-Polygraph's code, on purpose:

* ties: LM-Polygraph breaks ties among equal uncertainties by ``np.argsort`` order (arbitrary); here tied claims
  count with their expected quality under a random order within the tie (the cumulative number of correct claims
  is interpolated linearly inside a tie), so the value does not depend on claim order;
* where the oracle equals random (all claims correct, or all hallucinated) or nothing is rejected
  (``floor(alpha n) = 0``) PRR is ``nan`` (LM-Polygraph returns the unnormalised area in the first case).

Replicates: like :mod:`scoring._ranking`, the input is the pair of cumulative (hallucinated, correct) weights at
each distinct threshold in decreasing-uncertainty order -- the very arrays ``metrics_from_counts`` receives -- so a
bootstrap replicate (integer claim multiplicities) costs no new sort. A claim of multiplicity ``m`` counts as ``m``
tied claims. Within a block where the cumulative correct count grows linearly, the sum of ``C(k) / k`` has the closed
form ``(C0 - r W0) (H_b - H_a) + r (b - a)`` with harmonic numbers ``H``, so the area is a sum over thresholds.
"""

from __future__ import annotations

import numpy as np

from much_metric.scoring._counts import SortedClaims, cumulative_counts, resample_counts, sort_claims
from much_metric.scoring._prr import prr_from_counts, prr_of_curves
from much_metric.scoring._ranking import METRICS, metrics_from_counts

__all__ = ["prr", "prr_from_counts", "prr_of_curves", "prr_replicates", "rejection_curve", "bootstrap_prr",
           "bootstrap_metrics_and_prr"]


def _inputs(claim_scores, hallucinated) -> tuple[np.ndarray, np.ndarray]:
    scores = np.asarray(claim_scores, dtype=np.float64)
    labels = np.asarray(hallucinated)
    if scores.ndim != 1 or labels.shape != scores.shape:
        raise ValueError(f"claim_scores and hallucinated must be 1-D of the same length, got shapes {scores.shape} "
                         f"and {labels.shape}")
    if labels.dtype != bool:
        raise TypeError(f"hallucinated must be a bool array (label == -1), got dtype {labels.dtype}")
    if not np.all(np.isfinite(scores)):
        bad = int(np.flatnonzero(~np.isfinite(scores))[0])
        raise ValueError(f"claim_scores[{bad}] is not finite ({scores[bad]!r})")
    return scores, labels


def prr(claim_scores, hallucinated, *, max_rejection: float = 1.0) -> float:
    """PRR of claim uncertainties (higher = more likely hallucinated) against ``hallucinated`` (bool, label -1)."""
    scores, labels = _inputs(claim_scores, hallucinated)
    sorted_claims = sort_claims(scores, labels)
    result = prr_from_counts(sorted_claims.positives_at[None, :], sorted_claims.negatives_at[None, :],
                             max_rejection=max_rejection)
    return float(result["prr"][0])


def prr_replicates(sorted_claims: SortedClaims, weights: np.ndarray, *, max_rejection: float = 1.0) -> np.ndarray:
    """PRR per replicate; ``weights`` (n_replicates, n_claims): integer claim weights in ``sorted_claims.order``."""
    positive = sorted_claims.positive
    tps = cumulative_counts(weights[:, positive], sorted_claims.positives_at)
    fps = cumulative_counts(weights[:, ~positive], sorted_claims.negatives_at)
    return prr_from_counts(tps, fps, max_rejection=max_rejection)["prr"]


def bootstrap_prr(claim_scores, hallucinated, claim_sample, n_samples: int, *, n_resamples: int = 1000,
                  max_rejection: float = 1.0, random_state: int | None = 0, batch: int = 100) -> np.ndarray:
    """PRR of each bootstrap replicate, resampling samples (see :mod:`scoring._bootstrap`). Shape (n_resamples,)."""
    scores, labels = _inputs(claim_scores, hallucinated)
    claim_sample = np.asarray(claim_sample)
    if claim_sample.shape != scores.shape:
        raise ValueError(f"claim_sample must have one entry per claim, got shape {claim_sample.shape}")
    sorted_claims = sort_claims(scores, labels)
    sample_sorted = claim_sample[sorted_claims.order]
    rng = np.random.default_rng(random_state)
    parts = []
    for done in range(0, n_resamples, batch):
        counts = resample_counts(n_samples, min(batch, n_resamples - done), rng).astype(np.float32)
        parts.append(prr_replicates(sorted_claims, counts[:, sample_sorted], max_rejection=max_rejection))
    return np.concatenate(parts)


def rejection_curve(claim_scores, hallucinated) -> dict[str, np.ndarray]:
    """The curves behind :func:`prr` (for plots), one point per number of rejected claims ``j = 0 .. n - 1``.

    Returns ``rejection`` (``j / n``), ``quality`` (fraction of correct claims kept; tie-averaged), ``oracle`` and
    ``random``. The mean of ``quality[:floor(alpha n)]`` is the area used by ``prr(..., max_rejection=alpha)``.
    """
    scores, labels = _inputs(claim_scores, hallucinated)
    n = scores.size
    sorted_claims = sort_claims(scores, labels)
    total = sorted_claims.positives_at + sorted_claims.negatives_at  # rejected at each threshold
    n_correct = int(sorted_claims.negatives_at[-1]) if n else 0
    rejected = np.arange(n)
    # correct claims rejected after j rejections: linear inside the tie group holding j
    rejected_correct = np.interp(rejected, total, sorted_claims.negatives_at)
    kept = n - rejected
    with np.errstate(invalid="ignore", divide="ignore"):
        return {
            "rejection": rejected / n if n else rejected.astype(float),
            "quality": (n_correct - rejected_correct) / kept,
            "oracle": np.minimum(kept, n_correct) / kept,
            "random": np.full(n, n_correct / n if n else np.nan),
        }


def bootstrap_metrics_and_prr(claim_scores, hallucinated, claim_sample, n_samples: int, *, n_resamples: int = 1000,
                              max_rejection: float = 1.0, random_state: int | None = 0,
                              batch: int = 100) -> dict[str, np.ndarray]:
    """Every metric of :data:`much_metric.scoring._ranking.METRICS` and ``prr`` per bootstrap replicate, from ONE set of
    cumulative counts per batch (PRR then costs a few operations per threshold). Shape (n_resamples,) each."""
    scores, labels = _inputs(claim_scores, hallucinated)
    claim_sample = np.asarray(claim_sample)
    sorted_claims = sort_claims(scores, labels)
    sample_sorted = claim_sample[sorted_claims.order]
    positive = sorted_claims.positive
    rng = np.random.default_rng(random_state)
    parts: dict[str, list[np.ndarray]] = {key: [] for key in METRICS}
    for done in range(0, n_resamples, batch):
        counts = resample_counts(n_samples, min(batch, n_resamples - done), rng).astype(np.float32)
        tps = cumulative_counts(counts[:, sample_sorted[positive]], sorted_claims.positives_at).astype(np.float64)
        fps = cumulative_counts(counts[:, sample_sorted[~positive]], sorted_claims.negatives_at).astype(np.float64)
        for key, value in metrics_from_counts(tps, fps).items():
            parts[key].append(value)
        if max_rejection != 1.0:  # the table's "prr" is over every rejection fraction
            parts["prr"][-1] = prr_of_curves(tps, fps, max_rejection=max_rejection)["prr"]
    return {key: np.concatenate(value) for key, value in parts.items()}
