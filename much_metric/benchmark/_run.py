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

from much_dataset.schema import GENERATION_CONFIG, GENERATION_ID, LABEL_COLUMNS, LANG, missing_label_columns
from much_dataset.validation import LabelsWithheldError
from much_metric.baselines import ResourceOptions, SignalOptions, compute_signals
from much_metric.baselines.registry import available
from much_metric.baselines.runtime import generation_time as generation_time_of
from much_metric.benchmark import resources as lookup
from much_metric.benchmark._options import DataOptions, NliOptions, OutputOptions
from much_metric.benchmark._plan import plan_benchmark
from much_metric.benchmark._result import BenchmarkNote, BenchmarkResult, BenchmarkRow
from much_metric.report import EvaluationOptions, evaluate_signals
from much_metric.signals import DETECTOR_KEY, training_exclusions, with_scored_rows

__all__ = ["run_benchmark"]


def outside_unit_interval(values: Mapping[str, Any]) -> bool:
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


def _pack_name(pack: Any) -> str:
    """How the run's internals pack is named in a message: its folder as given."""
    return str(getattr(pack, "path", pack))


def _row_labels(dataset: Any, runs: Mapping[str, Any], table: Any) -> dict[str, str]:
    """Each row's label: the method's display, a learned detector's naming exactly the rows it was scored on
    (:func:`much_metric.signals.with_scored_rows`: its fold's test rows and the purged rows of the other folds)."""
    labels = {r.signal_name: runs[r.signal_name].spec.display for r in table.results}
    learned = [r for r in table.results if (runs[r.signal_name].metadata or {}).get(DETECTOR_KEY)]
    if learned:
        present = [c for c in (GENERATION_ID, LANG, GENERATION_CONFIG) if c in dataset.column_names]
        columns = dataset.select_columns(present).to_dict()
        for r in learned:
            rows = {c: [columns[c][i] if c in columns else "" for i in r.samples.tolist()]
                    for c in (GENERATION_ID, LANG, GENERATION_CONFIG)}
            labels[r.signal_name] = with_scored_rows(labels[r.signal_name], runs[r.signal_name].metadata, rows)
    return labels


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
    withheld = missing_label_columns(dataset.column_names)
    labelled = len(withheld) < len(LABEL_COLUMNS)
    if not labelled and output.out is None:  # nothing to evaluate: the signals are the only result, keep them
        raise LabelsWithheldError("run_benchmark on rows without labels needs output.out (much run --out DIR) to "
                                  "keep the signals", withheld)
    segmentation_seconds, segmentation_note = lookup.segmentation_time(
        dataset, plan.tokenizer, plan.tokenizers, output.progress)
    runs = compute_signals(dataset, list(plan.signals), resources=plan.resources, out=output.out,
                           progress=output.progress,
                           options=SignalOptions(reference_window=nli.reference_window,
                                                 file_format=output.file_format, top_k=plan.top_k))
    generation = generation_time_of(data.generation_time, data_source=str(plan.source),
                                    n_samples=len(dataset), n_tokens=plan.n_tokens)
    aggregator = evaluation.aggregators[0]
    order = _table_order(runs)
    table, floors = None, ()
    if labelled:
        table = _evaluate(dataset, runs, evaluation, notes, internals=plan.resources.internals)
        scores = {r.signal_name: (r.score, r.coverage) for r in table.results}
        labels = _row_labels(dataset, runs, table)
        # Reference rows on the same claims: PR numbers read against what a random or constant score gets.
        floors = tuple(BenchmarkRow(signal_name=r.signal_name, method=f"[{r.signal_name}]", score=r.score,
                                    coverage=r.coverage) for r in table.floors)
    else:  # rows whose labels are withheld: the signals and their times are the whole result
        scores = {name: (None, 1.0) for name in order}
        notes.append(BenchmarkNote(message=f"the rows have no labels (withheld): no metric here; the signals are in "
                                           f"{output.out}, to submit (zipped) to the leaderboard that holds them"))
        labels = {name: runs[name].spec.display for name in order}
    rows = tuple(_method_row(runs[name], name, labels[name], scores[name], segmentation_seconds) for name in scores)
    bootstrap = evaluation.bootstrap if labelled else None
    return BenchmarkResult(
        data=plan.source, config=data.config, split=data.split, selection=data.selection,
        splits_used=plan.splits_used, n_samples=len(dataset), n_tokens=plan.n_tokens, aggregator=aggregator,
        stopword_handling=evaluation.stopword_handling,
        n_resamples=0 if bootstrap is None else bootstrap.n_resamples, default_signals=plan.default_signals,
        signals={name: runs[name] for name in _table_order(runs)},
        out=None if output.out is None else Path(output.out), file_format=output.file_format,
        generation=generation, segmentation_seconds=segmentation_seconds, segmentation_note=segmentation_note,
        load_seconds=plan.load_seconds, table=table, rows=rows, floors=floors, notes=tuple(notes), top_k=plan.top_k)


def _evaluate(dataset: Any, runs: Mapping[str, Any], evaluation: EvaluationOptions, notes: list[BenchmarkNote], *,
              internals: Any) -> Any:
    """The evaluation table of the signals of ``runs``, in table order (appending to ``notes`` what is left out and
    why)."""
    aggregator = evaluation.aggregators[0]
    order = _table_order(runs)
    if aggregator in ("product", "geometric"):
        # The product multiplies 1 - s: a signal with scores outside [0, 1] (NLL = -log p) gives meaningless claim
        # scores under it, so its row is left out with a note saying how to see it, not printed as a number.
        # A claim-level signal is scored as it is (no aggregator): any real values will do.
        for name in [name for name in order if runs[name].spec.baseline.level == "token"
                     and outside_unit_interval(runs[name].values)]:
            reason = f"its token scores lie outside [0, 1], which the {aggregator} aggregator needs"
            notes.append(BenchmarkNote(message=f"{runs[name].spec.display} left out: {reason}; run it with "
                                       "--aggregator mean (or max)", skipped=(name,), reason=reason))
            order.remove(name)
    trained_on, messages = training_exclusions(
        {name: runs[name].metadata for name in order}, dataset[GENERATION_ID],
        include_training_rows=evaluation.include_training_rows, aggregation=evaluation.aggregation)
    notes.extend(BenchmarkNote(message=message) for message in messages)
    # The computed signals cover every sample (min_coverage 1), except those that read an internals pack of part
    # of the data: they cover the samples it holds, and the table says why the others are left out.
    partial = {name: f"not in the internals pack {_pack_name(internals)}, read by"
               for name in order if len(runs[name].values) < len(dataset)}
    return evaluate_signals(dataset, {name: runs[name].values for name in order},
                            evaluation=replace(evaluation, min_coverage=0.0 if partial else 1.0),
                            training_rows=trained_on, expected_missing=partial)


def _method_row(run: Any, name: str, label: str, scored: tuple[Any, float],
                segmentation_seconds: float) -> BenchmarkRow:
    score, coverage = scored
    segmentation = 0.0 if math.isnan(segmentation_seconds) else segmentation_seconds
    return BenchmarkRow(signal_name=name, method=label, score=score, coverage=coverage,
                        uq_seconds=run.seconds, segmentation_seconds=segmentation_seconds,
                        total_seconds=run.seconds + segmentation, samples_computed=run.n_computed, cost=run.cost)
