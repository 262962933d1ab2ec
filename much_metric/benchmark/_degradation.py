"""The degradation table: what each probability method and learned detector loses when it gets less than MUCH's 24
stored candidates per token -- the input views an API gives (:func:`much_metric.baselines.views.top_k_view`).

For every method and every K of the grid (default :data:`DEGRADATION_GRID`: the sampled token alone as Mu-SHROOM
ships it, top-1, top-5, OpenAI's cap of 20, all 24) the method scores the view, and its ROC-AUC and PRR are compared
with its own on the stored 24 candidates, on the same claims, by a paired bootstrap over the samples (the same
resamples for every K). How a method meets a view:

* ``exact``: it reads at most K candidates (its ``Baseline.top_k``): the view gives its full-data numbers (Δ = 0);
* ``zero-filled``: it reads more than K: the candidates the view lacks are probability 0 (:func:`padded`), so an
  entropy over 24 is the entropy of the K returned (and the sampled token), renormalised over them, a tail mass
  takes in everything not returned, a learned detector's inputs for ranks beyond K are those of a zero
  probability;
* ``not run``: K = 0 and it reads at least one candidate: there is nothing to fill around ("needs top-1").
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from much_dataset.schema import GENERATION_ID, TOP_K
from much_metric.baselines import token_arrays
from much_metric.baselines.views import padded, top_k_view
from much_metric.benchmark._options import DataOptions, NliOptions
from much_metric.benchmark._plan import plan_benchmark
from much_metric.benchmark._run import outside_unit_interval
from much_metric.report import EvaluationOptions, evaluate_signals
from much_metric.signals import training_exclusions

__all__ = ["DEGRADATION_GRID", "DEGRADATION_METRICS", "DegradationCell", "DegradationResult", "DegradationRow",
           "degradation_table"]

#: The views of the table: the sampled token alone (Mu-SHROOM), top-1, top-5, OpenAI's cap (20), all 24.
DEGRADATION_GRID = (0, 1, 5, 20, 24)
#: The metrics compared (keys of :data:`much_metric.scoring.METRICS`).
DEGRADATION_METRICS = ("roc_auc", "prr")
#: How a method meets a view (see the module docstring).
HOW = ("exact", "zero-filled", "not run")


@dataclass(frozen=True, kw_only=True)
class DegradationCell:
    """One method on one view.

    ``how``: ``"exact"``, ``"zero-filled"`` or ``"not run"`` (then ``need`` says why, every number is nan);
    ``values``: metric -> value on the view; ``deltas``: metric -> value minus the value on the 24 stored candidates;
    ``intervals``: metric -> the paired bootstrap interval of the delta; ``seconds_per_claim``: the method's wall
    time on the view per claim.
    """

    top_k: int
    how: str
    need: str = ""
    values: Mapping[str, float] = field(default_factory=dict)
    deltas: Mapping[str, float] = field(default_factory=dict)
    intervals: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    seconds_per_claim: float = math.nan


@dataclass(frozen=True, kw_only=True)
class DegradationRow:
    """One method: its stored signal name, label, the candidates it reads (``top_k``), the claims it is scored on
    (a learned detector's training rows left out) and one cell per view of the grid."""

    signal_name: str
    method: str
    top_k: int
    n_claims: int
    cells: tuple[DegradationCell, ...]

    def cell(self, top_k: int) -> DegradationCell:
        return next(cell for cell in self.cells if cell.top_k == top_k)


@dataclass(frozen=True, kw_only=True)
class DegradationResult:
    """The degradation table (:func:`degradation_table`): ``rows`` in registry order, ``top_ks`` the grid,
    ``metrics`` compared, the aggregator, bootstrap resamples and level, samples, and notes (training rows left
    out)."""

    data: str | None
    n_samples: int
    top_ks: tuple[int, ...]
    metrics: tuple[str, ...]
    aggregator: str
    n_resamples: int
    confidence_level: float
    rows: tuple[DegradationRow, ...]
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON types (nan as None): ``much run --top-k-grid --json``."""
        from much_dataset.jsonl import plain_json

        return plain_json({
            "data": self.data, "n_samples": self.n_samples, "top_ks": list(self.top_ks), "metrics": list(self.metrics),
            "aggregator": self.aggregator, "n_resamples": self.n_resamples,
            "confidence_level": self.confidence_level, "notes": list(self.notes),
            "rows": [{"signal_name": row.signal_name, "method": row.method, "top_k": row.top_k,
                      "n_claims": row.n_claims,
                      "cells": [{"top_k": c.top_k, "how": c.how, "need": c.need, "values": dict(c.values),
                                 "deltas": dict(c.deltas), "intervals": {k: list(v) for k, v in c.intervals.items()},
                                 "seconds_per_claim": c.seconds_per_claim} for c in row.cells]}
                     for row in self.rows]})


def _grid(top_ks: Sequence[int]) -> tuple[int, ...]:
    values = list(top_ks) if isinstance(top_ks, Sequence) and not isinstance(top_ks, str) else None
    if not values or any(isinstance(k, bool) or not isinstance(k, int | np.integer) or not 0 <= k <= TOP_K
                         for k in values):
        raise ValueError(f"top_ks must be a non-empty sequence of integers in [0, {TOP_K}], got {top_ks!r}")
    return tuple(sorted({*(int(k) for k in values), TOP_K}))  # the stored 24: the reference, always a column


def _views(arrays: Any, specs: list[Any], grid: tuple[int, ...]) -> tuple[dict[str, dict], dict[tuple, Any]]:
    """Every (method, view) computed: ``({"<name>@top<K>": {generation_id: values}}, {(name, K): (how, need,
    cost)})``."""
    from much_metric.baselines.metering import CostMeter

    signals: dict[str, dict] = {}
    cells: dict[tuple, Any] = {}
    for k in grid:
        view = top_k_view(arrays, k)
        wide = padded(view) if k else None
        for name, spec in specs:
            if spec.top_k <= k:
                how, given = "exact", view
            elif k:
                how, given = "zero-filled", wide
            else:
                cells[(name, k)] = ("not run", "needs top-1", None)  # nothing to fill around
                continue
            given = dataclasses.replace(given)  # its own object: no method's time includes another's cached work
            meter = CostMeter([], top_k=k)
            flat, _ = meter.measure(given, functools.partial(spec.compute, given, {}, {}))
            signals[f"{name}@top{k}"] = dict(zip(given.generation_ids, spec.split(given, flat), strict=True))
            cells[(name, k)] = (how, "", meter.cost)
    return signals, cells


def _compare(results: dict[int, Any], grid: tuple[int, ...], metrics: tuple[str, ...], bootstrap: Any
             ) -> dict[int, tuple[dict, dict, dict]]:
    """Per view: (values, deltas against 24, paired bootstrap intervals of the deltas) on the same claims."""
    from much_metric.scoring.engine import bootstrap_distribution

    reference = results[TOP_K]
    ks = [k for k in grid if k in results]
    for k in ks:
        if not np.array_equal(results[k].claim_rows, reference.claim_rows):
            raise RuntimeError(f"the top-{k} view was scored on other claims than the stored data")
    out = {k: ({m: float(getattr(results[k].score, m)) for m in metrics},
               {m: float(getattr(results[k].score, m)) - float(getattr(reference.score, m)) for m in metrics}, {})
           for k in ks}
    # identical claim scores (an exact view) differ by 0 in every resample: no resampling needed
    differ = [k for k in ks if not np.array_equal(results[k].claim_scores, reference.claim_scores)]
    for k in ks:
        if k not in differ and bootstrap is not None:
            out[k][2].update({metric: (0.0, 0.0) for metric in metrics})
    if bootstrap is None or not differ:
        return out
    _, sample = np.unique(reference.claim_rows, return_inverse=True)
    distributions = bootstrap_distribution(
        [reference.claim_scores, *(results[k].claim_scores for k in differ)], reference.hallucinated, sample,
        int(sample.max()) + 1 if sample.size else 0, n_resamples=bootstrap.n_resamples,
        random_state=bootstrap.random_state, metrics=metrics)
    tail = 100 * (1 - bootstrap.confidence_level) / 2
    for k, distribution in zip(differ, distributions[1:], strict=True):
        for metric in metrics:
            difference = distribution[metric] - distributions[0][metric]
            difference = difference[np.isfinite(difference)]
            out[k][2][metric] = (tuple(float(v) for v in np.percentile(difference, [tail, 100 - tail]))
                                 if difference.size else (math.nan, math.nan))
    return out


def degradation_table(
    source: Any,
    *,
    signals: Sequence[str] | str | None = None,
    top_ks: Sequence[int] = DEGRADATION_GRID,
    evaluation: EvaluationOptions = EvaluationOptions(),
    data: DataOptions = DataOptions(),
) -> DegradationResult:
    """Score probability methods and learned detectors on input views of K candidates and compare each with itself
    on the stored 24 (see the module docstring): what ``much run --top-k-grid`` prints.

    Parameters
    ----------
    source : str or datasets.Dataset
        As for :func:`~much_metric.benchmark.run_benchmark` (``"sample"``, ``"orailix/MUCH"``, a folder, a split).
    signals : sequence of str, str or None
        Methods that read only the probabilities (``learned:<folder>`` for a learned detector); None: the group
        ``all-probability`` (every registered method that needs no model).
    top_ks : sequence of int, default (0, 1, 5, 20, 24)
        The views (24, the stored candidates and the reference, is always one of them).
    evaluation : EvaluationOptions
        One aggregator, stopword handling, bootstrap (None: point deltas, no interval), training rows.
    data : DataOptions
        As for ``run_benchmark`` (``data.top_k`` is ignored: the grid gives the views).

    Returns
    -------
    DegradationResult

    Examples
    --------
    >>> import much_dataset
    >>> from much_metric.benchmark import EvaluationOptions, degradation_table
    >>> split = much_dataset.load("sample", split="test").select(range(60))
    >>> result = degradation_table(split, signals="token_likelihood,token_entropy_24", top_ks=(0, 5),
    ...                            evaluation=EvaluationOptions(bootstrap=None))
    >>> [(row.method, [cell.how for cell in row.cells]) for row in result.rows]
    [('Token Likelihood', ['exact', 'exact', 'exact']), ('Token Entropy-24', ['not run', 'zero-filled', 'exact'])]
    >>> result.rows[0].cell(5).deltas["roc_auc"]
    0.0
    """
    grid = _grid(top_ks)
    if len(evaluation.aggregators) != 1:
        raise ValueError(f"degradation_table: evaluation.aggregator must be one aggregator, got "
                         f"{evaluation.aggregator!r}")
    plan = plan_benchmark(source, signals="all-probability" if signals is None else signals,
                          data=replace(data, top_k=None), nli=NliOptions(enabled=False))
    from much_metric.baselines.registry import resolve

    specs = []
    for name in plan.signals:
        spec = resolve(name)
        if spec.needs:
            raise ValueError(f"degradation_table compares the methods that read only the probabilities: {name} "
                             f"needs {', '.join(spec.needs)}")
        specs.append((spec.stored_name({}), spec))
    dataset = plan.dataset
    computed, cells = _views(token_arrays(dataset), specs, grid)
    aggregator = evaluation.aggregators[0]
    messages = []
    if aggregator in ("product", "geometric"):  # as run_benchmark: 1 - s needs s in [0, 1]
        for name, spec in list(specs):
            if spec.baseline.level == "token" and outside_unit_interval(computed[f"{name}@top{TOP_K}"]):
                messages.append(f"{spec.display} left out: its token scores lie outside [0, 1], which the {aggregator} "
                                "aggregator needs; run it with --aggregator mean (or max)")
                specs.remove((name, spec))
                computed = {key: value for key, value in computed.items() if not key.startswith(f"{name}@top")}
    if not specs:
        raise ValueError("degradation_table: no method left to compare (" + "; ".join(messages) + ")")
    # one set of rows left out per method (a learned detector's training rows), the same for each of its views
    excluded, notes = training_exclusions(
        {name: spec.signal_metadata() for name, spec in specs}, dataset[GENERATION_ID],
        include_training_rows=evaluation.include_training_rows, aggregation=evaluation.aggregation)
    trained_on = {key: excluded[key.rsplit("@top", 1)[0]] for key in computed if key.rsplit("@top", 1)[0] in excluded}
    claim_level = tuple(f"{name}@top{k}" for name, spec in specs if spec.baseline.level == "claim" for k in grid)
    table = evaluate_signals(dataset, computed, training_rows=trained_on,
                             evaluation=replace(evaluation, bootstrap=None, floors=False, min_coverage=1.0, by=(),
                                                claim_signals=claim_level))
    by_signal = {result.signal_name: result for result in table.results}
    rows = []
    for name, spec in specs:
        results = {k: by_signal[f"{name}@top{k}"] for k in grid if f"{name}@top{k}" in by_signal}
        compared = _compare(results, grid, DEGRADATION_METRICS, evaluation.bootstrap)
        row_cells = []
        for k in grid:
            how, need, cost = cells[(name, k)]
            values, deltas, intervals = compared.get(k, ({}, {}, {}))
            row_cells.append(DegradationCell(top_k=k, how=how, need=need, values=values, deltas=deltas,
                                             intervals=intervals,
                                             seconds_per_claim=math.nan if cost is None else cost.seconds_per_claim))
        rows.append(DegradationRow(signal_name=name, method=spec.display, top_k=spec.top_k,
                                   n_claims=int(len(results[TOP_K].claim_scores)), cells=tuple(row_cells)))
    bootstrap = evaluation.bootstrap
    return DegradationResult(
        data=plan.source, n_samples=len(dataset), top_ks=grid, metrics=DEGRADATION_METRICS, aggregator=aggregator,
        n_resamples=0 if bootstrap is None else bootstrap.n_resamples,
        confidence_level=0.95 if bootstrap is None else bootstrap.confidence_level, rows=tuple(rows),
        notes=tuple(messages + notes))
