""":class:`ScoreResult`, what :func:`much_metric.score` and :func:`~much_metric.scoring.score_claims` return.

A frozen dataclass built by keyword: one field per entry of :data:`METRIC_TABLE` (checked at import, so a metric
added to the table without a field fails loudly), the claim counts, the options that produced it, and optional
bootstrap intervals and per-group breakdowns (each group a :class:`ScoreResult` of its own). ``to_dict()`` gives the
plain, JSON-ready dict the ``evaluate`` module returns.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from much_metric.scoring._ranking import METRICS

__all__ = ["ScoreResult"]


@dataclass(frozen=True, kw_only=True)
class ScoreResult:
    """Claim-level detection metrics of one method (positive class = hallucinated claim, label -1).

    Every metric is higher = better detection and ``nan`` where undefined on the data (a single class), with a
    :class:`~much_metric.scoring.MuchMetricWarning`. See :data:`much_metric.scoring.METRIC_TABLE` for the formulas.

    Attributes
    ----------
    roc_auc : float
        Area under the ROC curve (trapezoid; scikit-learn's ``roc_auc_score``).
    pr_auc : float
        Trapezoid under the precision-recall curve including its (recall 0, precision 1) end point, as the
        reference implementation.
    average_precision : float
        Step-wise average precision (scikit-learn's ``average_precision_score``).
    tpr_at_fpr_10 : float
        Largest TPR among thresholds with FPR <= 0.10, no interpolation.
    recall_at_precision_80 : float
        Largest recall among thresholds with precision >= 0.80, no interpolation; 0 if none.
    partial_pr_auc_recall_20 : float
        Reference partial PR-AUC: trapezoid over the PR points with recall <= 0.2 including (0, 1), / 0.2.
    partial_average_precision_recall_20 : float
        Corrected partial AP: step-wise AP over recall in [0, 0.2], / 0.2.
    prr : float
        Prediction-rejection ratio (LM-Polygraph): 1 = oracle, 0 = random.
    prr_50 : float
        PRR with at most 50 % of the claims rejected.
    n_samples, n_claims, n_hallucinated : int
        Samples scored, evaluated claims (EOS claims dropped), hallucinated claims among them.
    level : {"token", "claim"}
        ``"token"``: token scores aggregated by :func:`~much_metric.score`; ``"claim"``: claim scores given directly
        (:func:`~much_metric.scoring.score_claims`).
    aggregator : str or None
        The token-to-claim aggregator (``None`` for claim-level results).
    stopword_handling : str or None
        ``"null"`` or ``"exclude"`` (``None`` for claim-level results).
    intervals : mapping of metric key to (low, high), or None
        Percentile bootstrap intervals when ``bootstrap=`` was given.
    by : mapping of breakdown name to mapping of group value to ScoreResult, or None
        Per-group results when ``by=`` was given (``result.by["lang"]["de"].roc_auc``).
    """

    roc_auc: float
    pr_auc: float
    average_precision: float
    tpr_at_fpr_10: float
    recall_at_precision_80: float
    partial_pr_auc_recall_20: float
    partial_average_precision_recall_20: float
    prr: float
    prr_50: float
    n_samples: int
    n_claims: int
    n_hallucinated: int
    level: Literal["token", "claim"] = "token"
    aggregator: str | None = None
    stopword_handling: str | None = None
    intervals: Mapping[str, tuple[float, float]] | None = None
    by: Mapping[str, Mapping[str, ScoreResult]] | None = None

    @property
    def metrics(self) -> dict[str, float]:
        """The metrics only, ``{key: value}`` in :data:`METRIC_TABLE` order."""
        return {key: getattr(self, key) for key in METRICS}

    def to_dict(self) -> dict[str, Any]:
        """The plain dict (what the ``evaluate`` module's ``compute`` returns): the metrics, ``n_samples``,
        ``n_claims``, ``n_hallucinated``, then ``intervals`` (``{metric: [low, high]}``) and ``by`` (nested dicts)
        when present, then ``aggregator`` and ``stopword_handling`` (token level) or ``level: "claim"`` (claim
        level). Groups in ``by`` hold the metrics, the counts and their intervals only."""
        out = _group_dict(self)
        if self.level == "claim":
            out["level"] = "claim"
        else:
            out.update(aggregator=self.aggregator, stopword_handling=self.stopword_handling)
        return out


def _group_dict(result: ScoreResult) -> dict[str, Any]:
    out: dict[str, Any] = result.metrics
    out.update(n_samples=result.n_samples, n_claims=result.n_claims, n_hallucinated=result.n_hallucinated)
    if result.intervals is not None:
        out["intervals"] = {key: list(value) for key, value in result.intervals.items()}
    if result.by is not None:
        out["by"] = {name: {value: _group_dict(group) for value, group in groups.items()}
                     for name, groups in result.by.items()}
    return out


_FIELDS = {field.name for field in dataclasses.fields(ScoreResult)}
if not set(METRICS) <= _FIELDS:  # pragma: no cover - guards the metric table and this class against drifting apart
    raise ImportError(f"ScoreResult lacks a field for the metric(s) {sorted(set(METRICS) - _FIELDS)} of METRIC_TABLE")
