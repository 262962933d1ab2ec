"""Run the paper's benchmark (what ``much run`` does) as one library call: :func:`run_benchmark`.

Plans the run (:func:`much_metric.benchmark.plan_benchmark`: data, signals and resources resolved once), computes
the baselines (:func:`much_metric.baselines.compute_signals`), times them and the claim segmentation against the
LLM generation time (:mod:`much_metric.baselines.runtime`), evaluates them with the floors
(:func:`much_metric.report.evaluate_signals`) and returns a :class:`BenchmarkResult`: the signals, their timings,
the evaluation table and the notes, each a field -- nothing to parse back out of a printed message.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from much_dataset.schema import GENERATION_ID
from much_metric.baselines import ResourceOptions, SignalOptions, compute_signals
from much_metric.baselines.registry import available
from much_metric.baselines.runtime import generation_time as generation_time_of
from much_metric.benchmark import resources as lookup
from much_metric.benchmark._options import DataOptions, NliOptions, OutputOptions
from much_metric.benchmark._plan import plan_benchmark
from much_metric.benchmark._result import BenchmarkNote, BenchmarkResult, BenchmarkRow
from much_metric.report import EvaluationOptions, evaluate_signals
from much_metric.signals import training_exclusions

__all__ = ["run_benchmark"]


def _outside_unit_interval(values: Mapping[str, Any]) -> bool:
    """Whether any finite token score of a signal lies outside [0, 1]."""
    import numpy as np

    for array in values.values():
        array = np.asarray(array, dtype=np.float64)
        finite = array[np.isfinite(array)]
        if finite.size and (finite.min() < 0 or finite.max() > 1):
            return True
    return False


def _table_order(runs: Mapping[str, Any]) -> list[str]:
    """The registry's order of baselines (table 3's families first), then the order asked."""
    rank = {name: i for i, name in enumerate(available())}
    return sorted(runs, key=lambda name: rank.get(runs[name].spec.baseline.name, len(rank)))


def run_benchmark(
    source: Any,
    *,
    signals: Sequence[str] | str | None = None,
    evaluation: EvaluationOptions = EvaluationOptions(),
    data: DataOptions = DataOptions(),
    nli: NliOptions = NliOptions(),
    resources: ResourceOptions = ResourceOptions(),
    output: OutputOptions = OutputOptions(),
) -> BenchmarkResult:
    """Compute, time and evaluate the paper's baselines on a MUCH split: table 3 as data (what ``much run`` does).

    Parameters
    ----------
    source : str or datasets.Dataset
        A data source for :func:`much_dataset.load` (``"sample"``, ``"orailix/MUCH"``, a folder), loaded with
        ``data.config`` / ``data.split`` / ``data.selection``; or a loaded split (``data.selection`` still applies).
    signals : sequence of str, str or None, default None
        Reference signal names or groups (``"table3"``, ``"ccp_10_8,sar_8"``). None: table 3's probability
        baselines, plus CCP/SAR when an NLI model is available and KTC when neighbour statistics are at hand
        (otherwise they are skipped with a note). A signal asked by name whose resource is missing is an error.
    evaluation : EvaluationOptions
        Aggregator (one), stopword handling, bootstrap, the random floor's ``random_state``, breakdowns, ground
        truth, training rows (:class:`much_metric.report.EvaluationOptions`, shared with ``evaluate_signals``).
    data : DataOptions
        Config, split, selection, where a loaded dataset comes from, the LLM generation time.
    nli : NliOptions
        The NLI model of CCP/SAR and its batching, device and context window.
    resources : ResourceOptions
        The generating LLM's tokenizer, KTC's neighbour statistics, an internals pack
        (:class:`much_metric.baselines.ResourceOptions`, shared with ``compute_signals``; its NLI model comes from
        ``nli``).
    output : OutputOptions
        Folder and format of the signal files; progress bars.

    Returns
    -------
    BenchmarkResult
        Signals, timings, evaluation table, rows and floors, notes; ``to_dict()`` is ``much run --json``.

    Raises
    ------
    ValueError, TypeError
        A bad option (named, when the options object is built, before anything is loaded); a signal asked by name
        whose resource is missing.

    Examples
    --------
    >>> import much_dataset
    >>> from much_metric.benchmark import EvaluationOptions, run_benchmark
    >>> split = much_dataset.load("sample", split="test").select(range(40))
    >>> result = run_benchmark(split, signals=["max_likelihood", "token_entropy_24"],
    ...                        evaluation=EvaluationOptions(bootstrap=None))
    >>> [row.method for row in result.rows]
    ['Max Likelihood', 'Token Entropy-24']
    >>> [row.method for row in result.floors]
    ['[floor: random]', '[floor: constant]', '[floor: length]']
    >>> 0 <= result.rows[0].score.roc_auc <= 1
    True
    """
    for name, value, kind in (("evaluation", evaluation, EvaluationOptions), ("data", data, DataOptions),
                              ("nli", nli, NliOptions), ("resources", resources, ResourceOptions),
                              ("output", output, OutputOptions)):
        if not isinstance(value, kind):
            raise TypeError(f"run_benchmark: {name} must be a {kind.__name__}, got {type(value).__name__}")
    if len(evaluation.aggregation) != 1:
        raise ValueError(f"run_benchmark: evaluation.aggregation must be one aggregation (a table 3 has one), got "
                         f"{evaluation.aggregators!r}; evaluate the signal files with evaluate_files for several")
    plan = plan_benchmark(source, signals=signals, data=data, nli=nli, resources=resources,
                          progress=output.progress)
    dataset = plan.dataset
    notes = list(plan.notes)
    segmentation_seconds, segmentation_note = lookup.segmentation_time(
        dataset, plan.tokenizer, plan.tokenizers, output.progress)
    runs = compute_signals(dataset, list(plan.signals), resources=plan.resources, out=output.out,
                           progress=output.progress,
                           options=SignalOptions(reference_window=nli.reference_window,
                                                 file_format=output.file_format))
    generation = generation_time_of(data.generation_time, data_source=str(plan.source),
                                    n_samples=len(dataset), n_tokens=plan.n_tokens)
    aggregator = evaluation.aggregators[0]
    order = _table_order(runs)
    if aggregator in ("product", "geometric"):
        # The product multiplies 1 - s: a signal with scores outside [0, 1] (NLL = -log p) gives meaningless claim
        # scores under it, so its row is left out with a note saying how to see it, not printed as a number.
        for name in [name for name in order if _outside_unit_interval(runs[name].values)]:
            reason = f"its token scores lie outside [0, 1], which the {aggregator} aggregator needs"
            notes.append(BenchmarkNote(message=f"{runs[name].spec.display} left out: {reason}; run it with "
                                       "--aggregator mean (or max)", skipped=(name,), reason=reason))
            order.remove(name)
    trained_on, messages = training_exclusions(
        {name: runs[name].metadata for name in order}, dataset[GENERATION_ID],
        include_training_rows=evaluation.include_training_rows, aggregation=evaluation.aggregation)
    notes.extend(BenchmarkNote(message=message) for message in messages)
    # The computed signals cover every sample: the evaluation asks for all of them (min_coverage 1).
    table = evaluate_signals(dataset, {name: runs[name].values for name in order},
                             evaluation=replace(evaluation, min_coverage=1.0), training_rows=trained_on)
    segmentation = 0.0 if math.isnan(segmentation_seconds) else segmentation_seconds
    rows = tuple(BenchmarkRow(signal_name=r.signal_name, method=runs[r.signal_name].spec.display, score=r.score,
                              coverage=r.coverage, uq_seconds=runs[r.signal_name].seconds,
                              segmentation_seconds=segmentation_seconds,
                              total_seconds=runs[r.signal_name].seconds + segmentation,
                              samples_computed=runs[r.signal_name].n_computed) for r in table.results)
    # Reference rows on the same claims: PR numbers read against what a random or constant score gets.
    floors = tuple(BenchmarkRow(signal_name=r.signal_name, method=f"[{r.signal_name}]", score=r.score,
                                coverage=r.coverage) for r in table.floors)
    bootstrap = evaluation.bootstrap
    return BenchmarkResult(
        data=plan.source, config=data.config, split=data.split, selection=data.selection,
        splits_used=plan.splits_used, n_samples=len(dataset), n_tokens=plan.n_tokens, aggregator=aggregator,
        stopword_handling=evaluation.stopword_handling,
        n_resamples=0 if bootstrap is None else bootstrap.n_resamples, default_signals=plan.default_signals,
        signals={name: runs[name] for name in _table_order(runs)},
        out=None if output.out is None else Path(output.out), file_format=output.file_format,
        generation=generation, segmentation_seconds=segmentation_seconds, segmentation_note=segmentation_note,
        load_seconds=plan.load_seconds, table=table, rows=rows, floors=floors, notes=tuple(notes))

