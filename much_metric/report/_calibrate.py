"""Calibration of each method's claim scores: fitted on one set of samples, applied and measured on another.

``much evaluate --calibrate-on SPEC``: SPEC is a fraction (``0.5``: a seeded random half of the evaluated samples is
the fitting set, the rest is measured), or a split / selection of the same dataset (``train``, ``auto``: MUCH's
train split is its ``auto`` samples, the ones without human labels) whose claim scores are computed by the same
evaluation loop. Samples present in both sets are measured only if they were not fitted on (they are dropped from
the measured set). Per method: the calibrator (isotonic by default), ECE with a bootstrap interval, Brier, and
the reliability diagram (equal-width bins of P(hallucinated)), all on the measured claims.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from much_metric.report._evaluation import EvaluationTable
from much_metric.scoring import Bootstrap, bootstrap_ece, brier, ece, fit_calibrator, reliability_diagram

__all__ = ["CalibrationResult", "calibrate_table", "calibration_json", "fit_rows_by_fraction"]


@dataclass(frozen=True, kw_only=True)
class CalibrationResult:
    """One method's calibration: ``n_fit`` / ``n_eval`` claims (and samples), ECE, its interval, Brier, the Brier
    of predicting the fitting set's prevalence (a floor), and the reliability diagram on the measured claims."""

    signal_name: str
    aggregator: str
    method: str
    n_fit_claims: int
    n_eval_claims: int
    n_fit_samples: int
    n_eval_samples: int
    ece: float
    ece_interval: tuple[float, float] | None
    brier: float
    brier_prevalence: float
    diagram: dict[str, np.ndarray]


def fit_rows_by_fraction(rows: np.ndarray, fraction: float, *, random_state: int | None = 0) -> np.ndarray:
    """A seeded random ``fraction`` of the distinct ``rows`` (dataset row indices), sorted."""
    if not 0 < fraction < 1:
        raise ValueError(f"a calibration fraction must be in (0, 1), got {fraction!r}")
    distinct = np.unique(rows)
    n_fit = int(round(fraction * distinct.size))
    if n_fit < 1 or n_fit >= distinct.size:
        raise ValueError(f"--calibrate-on {fraction}: {distinct.size} samples leave no fitting or no measured sample")
    return np.sort(np.random.default_rng(random_state).choice(distinct, n_fit, replace=False))


def calibrate_table(evaluated: EvaluationTable, *, fit_table: EvaluationTable | None = None,
                    fit_fraction: float | None = None, method: str = "isotonic",
                    bootstrap: Bootstrap | None = Bootstrap(),
                    split_seed: int | None = None) -> list[CalibrationResult]:
    """Calibrate every method of ``evaluated``: fit on ``fit_table``'s claims of the same (signal, aggregator), or
    on a seeded ``fit_fraction`` of ``evaluated``'s samples; measure on the other samples of ``evaluated``.
    ``bootstrap``: resampling of the ECE interval (``None``: none); ``split_seed``: seed of the ``fit_fraction``
    draw (default: the bootstrap's ``random_state``, 0 without bootstrap)."""
    if bootstrap is not None and not isinstance(bootstrap, Bootstrap):
        raise TypeError(f"bootstrap must be a much_metric.scoring.Bootstrap or None, got {bootstrap!r}")
    if split_seed is None:
        split_seed = bootstrap.random_state if bootstrap is not None else 0
    if (fit_table is None) == (fit_fraction is None):
        raise ValueError("give exactly one of fit_table and fit_fraction")
    fit_by_key = {}
    if fit_table is not None:
        fit_by_key = {(r.signal_name, r.aggregator): r for r in fit_table.results}
        fit_ids = {fit_table.generation_ids[i] for r in fit_table.results for i in np.unique(r.claim_rows)}
    out = []
    for result in evaluated.results:
        if fit_table is not None:
            fitting = fit_by_key.get((result.signal_name, result.aggregator))
            if fitting is None:
                raise ValueError(f"signal {result.signal_name!r} has no values on the calibration samples")
            fit_scores, fit_y = fitting.claim_scores, fitting.hallucinated
            n_fit_samples = len(np.unique(fitting.claim_rows))
            ids = np.asarray(evaluated.generation_ids, dtype=object)[result.claim_rows]
            measured = ~np.isin(ids, list(fit_ids))
        else:
            fit_rows = fit_rows_by_fraction(result.claim_rows, fit_fraction, random_state=split_seed)
            in_fit = np.isin(result.claim_rows, fit_rows)
            fit_scores, fit_y = result.claim_scores[in_fit], result.hallucinated[in_fit]
            n_fit_samples = len(fit_rows)
            measured = ~in_fit
        if not measured.any():
            raise ValueError(f"signal {result.signal_name!r}: every evaluated sample was used for fitting; nothing "
                             "left to measure calibration on")
        calibrator = fit_calibrator(fit_scores, fit_y, method=method)
        y = result.hallucinated[measured]
        p = calibrator.predict(result.claim_scores[measured])
        rows = result.claim_rows[measured]
        distinct, sample = np.unique(rows, return_inverse=True)
        interval = None
        if bootstrap is not None:
            replicates = bootstrap_ece(p, y, sample, len(distinct), n_resamples=bootstrap.n_resamples,
                                       random_state=bootstrap.random_state)
            finite = replicates[np.isfinite(replicates)]
            if finite.size:
                alpha = (1.0 - bootstrap.confidence_level) / 2.0
                interval = tuple(float(v) for v in np.quantile(finite, [alpha, 1.0 - alpha]))
        prevalence = float(np.mean(fit_y))
        out.append(CalibrationResult(
            signal_name=result.signal_name, aggregator=result.aggregator, method=method, n_fit_claims=int(len(fit_y)),
            n_eval_claims=int(len(y)), n_fit_samples=n_fit_samples, n_eval_samples=int(len(distinct)), ece=ece(p, y),
            ece_interval=interval, brier=brier(p, y), brier_prevalence=brier(np.full(len(y), prevalence), y),
            diagram=reliability_diagram(p, y)))
    return out


def calibration_json(results: list[CalibrationResult]) -> list[dict[str, Any]]:
    return [{"signal_name": r.signal_name, "aggregator": r.aggregator, "calibrator": r.method,
             "n_fit_claims": r.n_fit_claims, "n_eval_claims": r.n_eval_claims, "n_fit_samples": r.n_fit_samples,
             "n_eval_samples": r.n_eval_samples, "ece": r.ece,
             "ece_interval": list(r.ece_interval) if r.ece_interval else None, "brier": r.brier,
             "brier_prevalence": r.brier_prevalence,
             "reliability": {k: [None if not np.isfinite(x) else float(x) for x in v]
                             for k, v in r.diagram.items()}} for r in results]
