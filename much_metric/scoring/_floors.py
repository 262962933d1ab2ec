"""Floors for a metric table: a seeded random baseline, a claim-length baseline and the constant baseline.

PR numbers depend on class balance (lm-polygraph #242), so every table should show what a method without any
signal gets on the same claims:

* :func:`random_baseline`: uniform random claim scores from a seeded generator, evaluated with the same code as
  every method (one draw by default; ``n_draws`` > 1 averages);
* :func:`length_scores`: each claim's length (its tokens that are not stopwords) as its score. Under the ``product``
  aggregator (``1 - prod(1 - s)``) a longer claim scores higher even when the token scores are pure noise, so a
  per-token random signal beats the claim-level random floor through length alone
  (tests/much_metric/scoring/test_length_floor.py measures it on the embedded sample); this floor shows what length
  alone gets;
* :func:`constant_baseline`: one score for every claim (a single threshold), evaluated exactly. Its values are
  known in closed form with prevalence ``pi`` (share of hallucinated claims): ROC-AUC 0.5; average precision
  ``pi``; trapezoidal PR-AUC ``(1 + pi) / 2`` (the reference's ``auc(recall, precision)`` joins (0, 1) to
  (1, pi)); TPR@FPR<=10% 0; recall@precision>=80% 1 if ``pi >= 0.8`` else 0; PRR 0 (ties count at their mean);
  predicting ``pi`` as the probability gives ECE 0 and Brier ``pi (1 - pi)``.
"""

from __future__ import annotations

import numpy as np

from much_metric.scoring._aggregation import ClaimLayout
from much_metric.scoring._ranking import METRICS, curve_metrics, sort_claims

__all__ = ["random_scores", "random_baseline", "length_scores", "constant_baseline", "constant_expected"]


def _labels(hallucinated) -> np.ndarray:
    labels = np.asarray(hallucinated)
    if labels.ndim != 1 or labels.dtype != bool:
        raise TypeError(f"hallucinated must be a 1-D bool array (label == -1), got {labels.dtype} {labels.shape}")
    if labels.size == 0:
        raise ValueError("hallucinated is empty")
    return labels


def _evaluate(scores: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    return {key: float(value[0]) for key, value in curve_metrics(sort_claims(scores, labels)).items()}


def random_scores(n_claims: int, *, random_state: int | None = 0) -> np.ndarray:
    """``n_claims`` uniform scores in [0, 1) from ``numpy.random.default_rng(random_state)``."""
    return np.random.default_rng(random_state).random(n_claims)


def random_baseline(hallucinated, *, random_state: int | None = 0, n_draws: int = 1) -> dict[str, float]:
    """Metrics (:data:`scoring._ranking.METRICS` and ``prr``) of seeded random scores, averaged over draws."""
    labels = _labels(hallucinated)
    if n_draws < 1:
        raise ValueError(f"n_draws must be >= 1, got {n_draws}")
    rng = np.random.default_rng(random_state)
    draws = [_evaluate(rng.random(labels.size), labels) for _ in range(n_draws)]
    return {key: float(np.mean([d[key] for d in draws])) for key in draws[0]}


def length_scores(layout: ClaimLayout) -> np.ndarray:
    """Per evaluated claim of ``layout``, its number of tokens that are not stopwords (all its tokens without a mask).

    These are the tokens whose scores the ``product`` aggregator combines (stopwords are nulled or excluded), so
    the claim score of independent random token scores grows with this count: the length-only floor.

    >>> from much_metric.scoring import claim_layout, length_scores
    >>> layout = claim_layout([[[0], [1, 2, 3], [4]]], [5], stopword_mask=[[False, False, True, False, False]])
    >>> length_scores(layout).tolist()                  # the EOS claim [4] is dropped; token 2 is a stopword
    [1.0, 2.0]
    """
    offsets = layout.claim_offsets
    if layout.stopword is None:
        return np.diff(offsets).astype(np.float64)
    counted = np.concatenate([[0], np.cumsum(~np.asarray(layout.stopword, dtype=bool))])
    return (counted[offsets[1:]] - counted[offsets[:-1]]).astype(np.float64)


def constant_baseline(hallucinated) -> dict[str, float]:
    """Metrics of a constant score, computed by the metric code (equal to :func:`constant_expected`)."""
    labels = _labels(hallucinated)
    return _evaluate(np.zeros(labels.size), labels)


def constant_expected(hallucinated) -> dict[str, float]:
    """The closed forms of the module docstring, plus ``ece`` (0) and ``brier`` of predicting the prevalence."""
    labels = _labels(hallucinated)
    pi = float(labels.mean())
    values = dict.fromkeys(METRICS, float("nan"))
    if 0 < pi < 1:
        values.update(roc_auc=0.5, tpr_at_fpr_10=0.0)
    if pi > 0:
        values.update(
            pr_auc=(1 + pi) / 2, average_precision=pi, recall_at_precision_80=1.0 if pi >= 0.8 else 0.0,
            # the single PR point (1, pi) lies beyond recall 0.2: the reference keeps no segment, the corrected
            # variant integrates precision pi over [0, 0.2]
            partial_pr_auc_recall_20=0.0, partial_average_precision_recall_20=pi,
        )
    values["prr"] = 0.0 if 0 < pi < 1 else float("nan")
    # up to 50% rejected: only the first point (quality = random for every order) when fewer than 4 claims
    values["prr_50"] = 0.0 if 0 < pi < 1 and labels.size >= 4 else float("nan")
    values["ece"] = 0.0
    values["brier"] = pi * (1 - pi)
    return values
