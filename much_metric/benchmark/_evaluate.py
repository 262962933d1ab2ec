"""Evaluate signal files on a MUCH split (what ``much evaluate`` does) as one library call: :func:`evaluate_files`.

Reads the files (:func:`much_metric.signals.read_signals`; checked against the internals pack they were computed
from, when given), loads the split, leaves out the rows a learned signal was trained on, evaluates every signal with
the floors (:func:`much_metric.report.evaluate_signals`) and, as :class:`ReportOptions` asks, ranks the methods,
calibrates them and scores them as Mu-SHROOM spans. Returns an :class:`EvaluationReport`: the table, the ranking,
the calibration, the span scores and the notes, each a field -- the command only parses, calls and prints, as
``much run`` does over :func:`~much_metric.benchmark.run_benchmark`. What it is asked and returns
(:class:`ReportOptions`, :class:`EvaluationReport`) is :mod:`much_metric.benchmark._report_options`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from much_dataset.params import UnknownNameError
from much_dataset.schema import GENERATION_CONFIG, GENERATION_ID, LANG, OUTPUT_TOKENS
from much_metric.benchmark._options import DataOptions
from much_metric.benchmark._report_options import EvaluationReport, ReportOptions
from much_metric.report import (
    CalibrationResult,
    EvaluationOptions,
    EvaluationTable,
    calibrate_table,
    evaluate_signals,
    evaluate_spans,
    mushroom_source,
    rank_methods,
)
from much_metric.signals import (
    check_signal_files,
    cost_of,
    read_signals,
    signal_metadata_of,
    training_exclusions,
    training_label,
    with_scored_rows,
)

__all__ = ["EvaluationReport", "ReportOptions", "evaluate_files"]


def _deltas(table: Any, report: ReportOptions, evaluation: EvaluationOptions) -> Any:
    """The table's paired Δ column by ``report.rank``'s metric (ROC-AUC without it) against ``report.baseline``
    (None: the best row)."""
    from much_metric.baselines.registry import display_name
    from much_metric.report import paired_deltas

    return paired_deltas(table, metric=report.rank or "roc_auc", baseline=report.baseline,
                         bootstrap=evaluation.bootstrap, display=display_name)


def table_order(names: Sequence[str], asked: Sequence[str] | None = None) -> list[str]:
    """Signal names in the order ``much run`` prints its rows: the registry's order of baselines (table 3's families
    first; names of no registered baseline last), then the order ``asked`` (``--signals``), then the order given.
    One row order for ``much run``, ``much evaluate`` and the report."""
    from much_metric.baselines.registry import available, resolve

    rank = {name: i for i, name in enumerate(available())}
    asked_at = {name: i for i, name in enumerate(asked or ())}

    def family(name: str) -> int:
        try:
            return rank.get(resolve(name).baseline.name, len(rank))
        except (ValueError, KeyError):  # a user's own signal: after the registered ones
            return len(rank)

    position = {name: i for i, name in enumerate(names)}
    return sorted(names, key=lambda name: (family(name), asked_at.get(name, len(asked_at)), position[name]))


def _load(source: str, data: DataOptions, *, split: str | None, selection: str) -> Any:
    import datasets

    import much_dataset

    loaded = much_dataset.load(source, config=data.config, split=split)
    if isinstance(loaded, datasets.DatasetDict):
        loaded = datasets.concatenate_datasets([loaded[name] for name in loaded])
    if selection != "all":
        from much_dataset.selection import select_samples

        loaded = select_samples(loaded, manual=selection == "manual")
    return loaded


def _timings(scores: str | Path) -> dict[str, Any]:
    """``timings.json`` next to the signal files (``much run --out``), else nothing."""
    path = Path(scores)
    file = (path if path.is_dir() else path.parent) / "timings.json"
    if not file.is_file():
        return {}
    from much_metric.baselines.runtime import read_timings

    return read_timings(file)


def _calibration(source: str, data: DataOptions, spec: float | str, dataset: Any, table: EvaluationTable,
                 signals: dict[str, Any], evaluation: EvaluationOptions) -> list[CalibrationResult]:
    seed = evaluation.floor_random_state
    if isinstance(spec, int | float) or _fraction(spec) is not None:
        fraction = float(spec) if isinstance(spec, int | float) else _fraction(spec)
        return calibrate_table(table, fit_fraction=fraction, bootstrap=evaluation.bootstrap, split_seed=seed)
    if spec in ("auto", "manual"):
        fit_data = _load(source, data, split=None, selection=spec)
    else:
        # MUCH's train split is its "auto" samples (no human label); a test-only dataset has none
        fit_data = _load(source, data, split=None, selection="auto") if spec == "train" else \
            _load(source, data, split=spec, selection="all")
        if spec == "train" and len(fit_data) == len(dataset) and set(fit_data[GENERATION_ID]) == set(
                table.generation_ids):
            raise ValueError("--calibrate-on train: this dataset has no sample outside the evaluated ones (the "
                             "embedded sample is test only); use a fraction, e.g. --calibrate-on 0.5")
    fit_table = evaluate_signals(fit_data, signals, evaluation=replace(evaluation, bootstrap=None, min_coverage=0.0,
                                                                       by=(), floors=False))
    return calibrate_table(table, fit_table=fit_table, bootstrap=evaluation.bootstrap, split_seed=seed)


def _trained_as(dataset: Any, table: EvaluationTable, metadata_of: dict[str, Any]) -> dict[str, str]:
    """Signal name -> what a learned signal's row adds to its name: detector kind, protocol and exactly the rows it
    was scored on (:func:`much_metric.signals.with_scored_rows`)."""
    out = {}
    columns = None
    for result in table.results:
        metadata = metadata_of.get(result.signal_name) or {}
        label = training_label(metadata)
        if label is None or result.signal_name in out:
            continue
        if columns is None:
            present = [c for c in (GENERATION_ID, LANG, GENERATION_CONFIG) if c in dataset.column_names]
            columns = dataset.select_columns(present).to_dict()
        rows = {c: [columns[c][i] if c in columns else "" for i in result.samples.tolist()]
                for c in (GENERATION_ID, LANG, GENERATION_CONFIG)}
        out[result.signal_name] = with_scored_rows(label, metadata, rows)
    return out


def _costs(metadata_of: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Signal name -> the :class:`~much_metric.signals.SignalCost` its file records (files without one left out);
    ValueError naming the signal when the record is malformed."""
    costs = {}
    for name, metadata in metadata_of.items():
        try:
            cost = cost_of(metadata)
        except ValueError as error:
            raise ValueError(f"signal {name!r}: {error}") from None
        if cost is not None:
            costs[name] = cost
    return costs


def _fraction(spec: str) -> float | None:
    try:
        return float(spec)
    except ValueError:
        return None


def _read_as_asked(scores: str | Path, signals: Sequence[str] | None) -> tuple[Any, Sequence[str] | None]:
    """The signals of ``scores`` named as asked, or as ``much run --signals`` stored them (``ktc`` ->
    ``ktc_<config id>``), with the names that found them; the error for the names as asked when neither does."""
    try:
        return read_signals(scores, signal_names=signals), signals
    except UnknownNameError as error:
        from much_metric.baselines.registry import stored_signal_name

        stored = [stored_signal_name(name) for name in signals or ()]
        if stored == list(signals or ()):
            raise
        try:
            return read_signals(scores, signal_names=stored), stored
        except UnknownNameError:
            raise error from None


def evaluate_files(
    source: str,
    scores: str | Path,
    *,
    signals: Sequence[str] | None = None,
    evaluation: EvaluationOptions = EvaluationOptions(),
    data: DataOptions = DataOptions(),
    report: ReportOptions = ReportOptions(),
    internals: str | Path | None = None,
) -> EvaluationReport:
    """Evaluate MUCH-signals files on a MUCH split: what ``much evaluate`` does, as data.

    Parameters
    ----------
    source : str
        ``"sample"``, a hub dataset id (``"orailix/MUCH"``) or a local folder, loaded with ``data.config`` /
        ``data.split`` / ``data.selection`` (every split concatenated when ``data.split`` is None).
    scores : str or path
        A MUCH-signals file (``.parquet`` / ``.jsonl``: ``generation_id``, ``signal_name``, ``values``) or a folder
        of them.
    signals : sequence of str, optional
        Only these signals of the files (all by default).
    evaluation : EvaluationOptions
        Aggregation(s), breakdowns, bootstrap, ground truth, coverage, training rows
        (:class:`much_metric.report.EvaluationOptions`, shared with ``evaluate_signals`` and ``run_benchmark``).
    data : DataOptions
        Config, split and selection of ``source``; ``generation_time`` for the ranking's relative runtimes.
    report : ReportOptions
        Ranking, calibration and span scores to compute besides the table.
    internals : str or path, optional
        The internals pack the files' internals signals were computed from: a file computed from another pack is
        refused.

    Returns
    -------
    EvaluationReport

    Examples
    --------
    >>> import tempfile
    >>> import much_dataset
    >>> from much_metric.baselines import max_likelihood, token_arrays
    >>> from much_metric.benchmark import evaluate_files
    >>> from much_metric.report import EvaluationOptions
    >>> from much_metric.signals import write_signals
    >>> arrays = token_arrays(much_dataset.load("sample", split="test"))
    >>> folder = tempfile.mkdtemp()
    >>> path = write_signals(f"{folder}/max_likelihood.parquet", {"max_likelihood": dict(zip(
    ...     arrays.generation_ids, max_likelihood(arrays), strict=True))})
    >>> result = evaluate_files("sample", folder, evaluation=EvaluationOptions(bootstrap=None))
    >>> [row.signal_name for row in result.table.results], 0.5 < result.table.results[0].score.roc_auc < 1
    (['max_likelihood'], True)
    """
    for name, value, kind in (("evaluation", evaluation, EvaluationOptions), ("data", data, DataOptions),
                              ("report", report, ReportOptions)):
        if not isinstance(value, kind):
            raise TypeError(f"evaluate_files: {name} must be a {kind.__name__}, got {type(value).__name__}")
    mushroom = mushroom_source(report.mushroom) if report.spans else None  # before any long work
    read, signals = _read_as_asked(scores, signals)
    _refuse_carrier_files(read, scores)
    read = {name: read[name] for name in table_order(read, signals)}  # the rows in much run's order
    from_pack = tuple(check_signal_files(scores, internals, read)) if internals else ()
    timings = _timings(scores) if report.rank else {}  # checked before the data is loaded
    dataset = _load(source, data, split=data.split, selection=data.selection)
    metadata_of = {name: metadata for name, metadata in signal_metadata_of(scores).items() if name in read}
    training_rows, notes = training_exclusions(metadata_of, dataset[GENERATION_ID],
                                               include_training_rows=evaluation.include_training_rows,
                                               aggregation=evaluation.aggregation)
    table = evaluate_signals(dataset, read, evaluation=evaluation, training_rows=training_rows)
    trained_as = _trained_as(dataset, table, metadata_of)
    table.costs = _costs(metadata_of)
    table.deltas = _deltas(table, report, evaluation)
    notes = list(notes)
    if internals:
        from much_metric.baselines.registry import display_name

        notes.append(f"internals pack {internals}: " + (
            f"{', '.join(display_name(n) for n in from_pack)} computed from it (checked)" if from_pack else
            "no signal of the files records an internals pack (signals of the probabilities only)"))
    ranking = generation = None
    if report.rank:
        if timings:
            from much_metric.baselines.runtime import generation_time

            ids = set(table.generation_ids)
            n_tokens = sum(len(tokens) for gid, tokens in zip(dataset[GENERATION_ID], dataset[OUTPUT_TOKENS],
                                                              strict=True) if gid in ids)
            generation = generation_time(data.generation_time, data_source=source, n_samples=len(ids),
                                         n_tokens=n_tokens)
        ranking = rank_methods(table, report.rank, bootstrap=evaluation.bootstrap, timings=timings,
                               generation_seconds=generation.seconds if generation else None)
        if generation:  # the report says what the runtime shares are shares of, and whether it is an estimate
            ranking = replace(ranking, generation={"seconds": generation.seconds, "source": generation.source})
    calibration = None
    if report.calibrate_on is not None:
        calibration = tuple(_calibration(source, data, report.calibrate_on, dataset, table, read, evaluation))
    spans = None
    if mushroom is not None:
        from much_metric.models import load_tokenizer

        columns = dataset.select_columns(["lang", "prompt", "output", OUTPUT_TOKENS, "token_chunks"]).to_dict()
        spans = evaluate_spans(table, columns, load_tokenizer(report.tokenizer), mushroom_source=mushroom,
                               random_state=evaluation.floor_random_state, progress=evaluation.progress)
    return EvaluationReport(
        source=str(source), data=data, evaluation=evaluation, table=table, ranking=ranking, calibration=calibration,
        spans=spans, generation_seconds=generation.seconds if generation else None,
        generation_source=generation.source if generation else None, trained_as=trained_as, from_pack=from_pack,
        notes=tuple(notes))


def _refuse_carrier_files(read: dict[str, Any], scores: Any) -> None:
    """A claim-level method's name without ``@claim``: a file of an older ``much run`` that wrote its claim values
    on one token per claim (the carrier convention), whose numbers change with the aggregator; refused, not scored."""
    from much_metric.baselines.registry import resolve
    from much_metric.signals import CLAIM_SUFFIX

    for name in read:
        if name.endswith(CLAIM_SUFFIX):
            continue
        try:
            level = resolve(name).baseline.level
        except ValueError:
            continue  # not a registered method's name: the submitter's own token-level signal
        if level == "claim":
            raise ValueError(f"signal {name!r} ({scores}): {name} is a claim-level method, scored from one value per "
                             f"claim under {name + CLAIM_SUFFIX!r}; this file holds one value per token (written by an "
                             f"older much run, a claim's value on one token): rerun `much run --signals {name} --out "
                             "DIR` to write its claim-level file")
