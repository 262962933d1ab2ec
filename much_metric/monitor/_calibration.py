"""Threshold calibration of :class:`much_metric.monitor.ClaimMonitor` on labelled data (numpy only).

Claims are flagged when ``score >= threshold``. Candidate thresholds are the distinct claim scores of the data; for
each, ``tpr`` = flagged hallucinated / hallucinated, ``fpr`` = flagged correct / correct, ``precision`` = flagged
hallucinated / flagged -- the points of ``sklearn.metrics.roc_curve`` and ``precision_recall_curve``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from much_dataset.schema import LABELS, STOPWORD_MASK, TOKEN_CHUNKS

__all__ = ["calibrate", "operating_points"]


def operating_points(scores: np.ndarray, hallucinated: np.ndarray) -> dict[str, np.ndarray]:
    """For every distinct score ``t`` (decreasing), the counts and rates of flagging ``score >= t``.

    Parameters
    ----------
    scores : ndarray of shape (n_claims,)
        Claim uncertainties.
    hallucinated : ndarray of shape (n_claims,), bool
        Positive class (label -1).

    Returns
    -------
    dict with ``thresholds``, ``tp``, ``fp``, ``tpr``, ``fpr``, ``precision``, each of shape (n_distinct,).
    """
    scores = np.asarray(scores, dtype=np.float64)
    hallucinated = np.asarray(hallucinated, dtype=bool)
    order = np.argsort(-scores, kind="stable")
    sorted_scores, positive = scores[order], hallucinated[order]
    last_of_value = np.r_[np.flatnonzero(np.diff(sorted_scores)), len(sorted_scores) - 1]
    tp = np.cumsum(positive)[last_of_value]
    fp = (last_of_value + 1) - tp
    n_pos, n_neg = int(positive.sum()), int((~positive).sum())
    return {"thresholds": sorted_scores[last_of_value], "tp": tp, "fp": fp, "tpr": tp / n_pos, "fpr": fp / n_neg,
            "precision": tp / (tp + fp)}


def _check_target(name: str, value: float, *, low_open: bool) -> float:
    value = float(value)
    if not (0 < value <= 1 if low_open else 0 <= value <= 1):
        raise ValueError(f"{name} must be in {'(0, 1]' if low_open else '[0, 1]'}, got {value!r}")
    return value


def calibrate(monitor, data: Any, *, target_fpr: float | None = None, target_precision: float | None = None,
              drop_last_chunk: bool = True):
    """See :meth:`much_metric.monitor.ClaimMonitor.calibrate`."""
    from much_metric.baselines import token_arrays
    from much_metric.monitor._records import Calibration
    from much_metric.scoring import Aggregation, aggregate_claims

    if target_fpr is not None and target_precision is not None:
        raise ValueError("give target_fpr or target_precision, not both")
    if target_precision is None:
        target, value = "fpr", _check_target("target_fpr", 0.10 if target_fpr is None else target_fpr,
                                             low_open=False)
    else:
        target, value = "precision", _check_target("target_precision", target_precision, low_open=True)
    columns = getattr(data, "column_names", None) or (list(data[0]) if len(data) else [])
    missing = [name for name in (TOKEN_CHUNKS, LABELS) if name not in columns]
    if missing:
        raise ValueError(f"calibration data lacks column(s) {missing}: it must be a labelled MUCH split or export")
    arrays = token_arrays(data)
    flat = monitor._spec.compute(arrays, monitor._resources, {})
    mask = data[STOPWORD_MASK] if STOPWORD_MASK in columns else None
    if mask is None:
        from much_dataset.stopwords import stopword_mask

        mask = arrays.split(stopword_mask(arrays.output_tokens, monitor.tokenizer))
    options = Aggregation(aggregator=monitor.aggregator, stopword_handling=monitor.stopword_handling,
                          drop_last_chunk=drop_last_chunk)
    claim_scores = aggregate_claims(arrays.split(flat), data[TOKEN_CHUNKS], mask, aggregation=options,
                                    generation_ids=arrays.generation_ids)
    labels = data[LABELS]
    kept = [np.asarray(row, dtype=np.int64)[: len(scores)] for row, scores in zip(labels, claim_scores, strict=True)]
    scores = np.concatenate(claim_scores) if claim_scores else np.zeros(0)
    hallucinated = np.concatenate(kept) == -1 if kept else np.zeros(0, dtype=bool)
    n_pos = int(hallucinated.sum())
    if n_pos == 0 or n_pos == len(hallucinated):
        raise ValueError(f"calibration data need hallucinated and correct claims; got {n_pos} hallucinated among "
                         f"{len(hallucinated)}")
    points = operating_points(scores, hallucinated)
    if target == "fpr":
        ok = np.flatnonzero(points["fpr"] <= value)
        if ok.size == 0:  # even the highest score flags too many correct claims: flag nothing
            threshold, tp, fp = float(np.nextafter(points["thresholds"][0], np.inf)), 0, 0
        else:
            best = int(ok[-1])
            threshold, tp, fp = float(points["thresholds"][best]), int(points["tp"][best]), int(points["fp"][best])
    else:
        ok = np.flatnonzero(points["precision"] >= value)
        if ok.size == 0:
            raise ValueError(f"no threshold reaches precision {value:g} on these data (best "
                             f"{points['precision'].max():.3f})")
        best = int(ok[-1])  # the lowest threshold still precise enough = the highest recall
        threshold, tp, fp = float(points["thresholds"][best]), int(points["tp"][best]), int(points["fp"][best])
    n_neg = len(hallucinated) - n_pos
    return Calibration(threshold=threshold, method=monitor.method, aggregator=monitor.aggregator, target=target,
                       target_value=value, tpr=tp / n_pos, fpr=fp / n_neg,
                       precision=tp / (tp + fp) if tp + fp else 1.0, n_flagged=tp + fp,
                       n_claims=len(hallucinated), n_hallucinated=n_pos)
