"""The board's pairwise comparison: every shown row's paired ROC-AUC difference to every other, with the rows that are
not separable from the best.

Which rows: the :data:`TOP_ROWS` best by the board's metric on the claims every row of the board covers (the claims
P(rank) is computed on, :func:`much_leaderboard.rank_rows`), ties in the order the store lists them. Each cell
``(i, j)`` is row ``i`` minus row ``j`` on those claims, with the 95 % percentile interval of the difference and its
two-sided p-value over the board's seeded bootstrap replicates of the samples: the toolkit's paired test
(:func:`much_metric.scoring.compare` / :func:`much_metric.scoring.paired_bootstrap`), computed once for all shown
rows on the same replicates (:func:`much_metric.scoring.engine.bootstrap_distribution`) instead of once per pair --
each method's replicates do not depend on the other methods, so the cells are those of the pairwise calls
(tests/much_leaderboard/test_pairwise.py compares them with ``much_metric.compare``).

Separable: the Holm-adjusted p-value (:func:`holm`, the family being the shown pairs) is below :data:`LEVEL`. The
intervals are the unadjusted 95 % intervals (a cell can have an interval excluding 0 and still not be separable
after Holm; the page says so). Only aggregate differences over the public evaluation data are computed here: the
private split's labels never enter.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from much_dataset.jsonl import plain_json

__all__ = ["LEVEL", "PAIRWISE_KEY", "TOP_ROWS", "holm", "pairwise_board"]

#: Rows shown in the matrix and the cost figure (the best by the board's metric).
TOP_ROWS = 12
#: Family-wise level of the Holm rule that colours a cell separable.
LEVEL = 0.05
#: The store's cache entry (:meth:`much_leaderboard.Store.save_board`) of the matrix.
PAIRWISE_KEY = "pairwise:roc_auc"


def holm(p_values: Sequence[float]) -> np.ndarray:
    """Holm's step-down adjusted p-values of one family (nan stays nan and is not counted in the family).

    The k-th smallest of m p-values is multiplied by ``m - k + 1``, capped at 1 and made non-decreasing along the
    sorted order; a hypothesis is rejected at level ``a`` when its adjusted p-value is below ``a`` (family-wise
    error at most ``a`` under any dependence).
    """
    p = np.asarray(p_values, dtype=np.float64)
    out = np.full(p.shape, np.nan)
    finite = np.flatnonzero(np.isfinite(p))
    if finite.size:
        order = finite[np.argsort(p[finite], kind="stable")]
        scaled = np.minimum(1.0, (finite.size - np.arange(finite.size)) * p[order])
        out[order] = np.maximum.accumulate(scaled)
    return out


def _common(arrays: Sequence[dict[str, np.ndarray]]) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[np.ndarray]]:
    """(samples every row covers, hallucinated, claim_sample, claim scores per row) -- as the board's P(rank)."""
    common = set(arrays[0]["claim_rows"].tolist())
    for a in arrays[1:]:
        common &= set(a["claim_rows"].tolist())
    rows = np.array(sorted(common), dtype=np.int64)
    keep = np.isin(arrays[0]["claim_rows"], rows)
    hallucinated = np.asarray(arrays[0]["hallucinated"], bool)[keep]
    claim_sample = np.searchsorted(rows, arrays[0]["claim_rows"][keep])
    scores = [np.asarray(a["claim_scores"], np.float64)[np.isin(a["claim_rows"], rows)] for a in arrays]
    return rows, hallucinated, claim_sample, scores


def pairwise_board(keys: Sequence[str], arrays: Sequence[dict[str, np.ndarray]], bootstrap: Any, *,
                   metric: str = "roc_auc", top: int = TOP_ROWS) -> dict[str, Any]:
    """The matrix of the ``top`` best rows (JSON types; what :data:`PAIRWISE_KEY` caches).

    ``keys``/``arrays``: every board row (``submission/signal``) and its claim arrays (:func:`score_submission`);
    ``bootstrap``: the board's :class:`much_metric.scoring.Bootstrap` (None: point differences only, nothing
    separable). Returns ``{"metric", "level", "rule", "keys" (shown rows, best first), "values", "intervals" (each
    row's own percentile interval on the same replicates), "cells" (``cells[i][j]``: ``{"difference", "interval",
    "p_value", "p_holm", "separable"}``, None on the diagonal), "best_group" (rows not separable from the first),
    "n_rows", "n_samples", "n_claims", "n_resamples", "all_keys"}``.
    """
    from much_metric.scoring.engine import bootstrap_distribution, curve_metrics, differences_to_reference, sort_claims

    empty = {"metric": metric, "level": LEVEL, "rule": "holm", "keys": [], "values": [], "intervals": [],
             "cells": [], "best_group": [], "n_rows": len(keys), "n_samples": 0, "n_claims": 0,
             "n_resamples": 0, "all_keys": sorted(keys)}
    if not keys:
        return empty
    rows, hallucinated, claim_sample, scores = _common(arrays)
    if not rows.size:
        return empty
    point = np.array([curve_metrics(sort_claims(s, hallucinated))[metric][0] for s in scores])
    ranked = np.argsort(-np.where(np.isnan(point), -np.inf, point), kind="stable")[:top]
    shown = [scores[k] for k in ranked]
    point = point[ranked]
    n = len(shown)
    replicates = None
    if bootstrap is not None:
        distributions = bootstrap_distribution(shown, hallucinated, claim_sample, len(rows),
                                               n_resamples=bootstrap.n_resamples,
                                               random_state=bootstrap.random_state, metrics=(metric,))
        replicates = np.stack([d[metric] for d in distributions], axis=1)
    level = 0.95 if bootstrap is None else bootstrap.confidence_level
    # column j: every row minus row j, on the same replicates (the toolkit's paired difference and p-value)
    columns = [differences_to_reference(point, replicates, j, confidence_level=level) for j in range(n)]
    upper = np.triu_indices(n, k=1)
    adjusted = np.full((n, n), np.nan)
    adjusted[upper] = holm([columns[j][i]["p_value"] for i, j in zip(*upper, strict=True)])
    adjusted = np.fmin(adjusted, adjusted.T)
    cells: list[list[dict[str, Any] | None]] = []
    for i in range(n):
        line: list[dict[str, Any] | None] = []
        for j in range(n):
            if i == j:
                line.append(None)
                continue
            cell = columns[j][i]
            p_holm = float(adjusted[i, j])
            line.append({"difference": cell["difference"], "interval": [float(v) for v in cell["interval"]],
                         "p_value": cell["p_value"], "p_holm": p_holm,
                         "separable": bool(np.isfinite(p_holm) and p_holm < LEVEL)})
        cells.append(line)
    alpha = (1.0 - level) / 2.0
    intervals = [[float("nan")] * 2 if replicates is None else
                 [float(v) for v in np.nanquantile(replicates[:, k], [alpha, 1 - alpha])] for k in range(n)]
    best_group = [k == 0 or not cells[k][0]["separable"] for k in range(n)]
    return plain_json({**empty, "keys": [keys[k] for k in ranked], "values": point.tolist(), "intervals": intervals,
                      "cells": cells, "best_group": best_group, "n_samples": int(rows.size),
                      "n_claims": int(hallucinated.size),
                      "n_resamples": 0 if bootstrap is None else bootstrap.n_resamples})

