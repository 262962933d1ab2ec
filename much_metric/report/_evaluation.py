"""Scoring signal files against a MUCH dataset: the engine behind ``much evaluate`` and the HTML report.

Joins ``{signal_name: {generation_id: token values}}`` (:func:`much_metric.signals._files.read_signals`) with the rows
of a MUCH split by ``generation_id``, then scores every (signal, aggregator) pair with
:func:`much_metric.scoring.score_claims`, and adds the floors (seeded random, constant and claim-length scores on
the same claims).

* **Claim-level signals**: a signal whose name ends with :data:`much_metric.signals.CLAIM_SUFFIX` (``"@claim"``, e.g.
  ``p_true@claim``) -- or that is named in ``claim_signals`` -- holds one value per chunk of ``token_chunks`` (EOS
  claim included, like ``labels``) instead of one per token; it is scored as is, with no aggregator.
* **Ground truth**: ``labels=`` names the column (:data:`LABEL_CHOICES`): ``labels`` (GPT-4o, the reference),
  ``human_labels_0`` / ``human_labels_1`` (one annotator) or ``human-agreed`` (the annotators' common list where
  both labelled the sample identically). Samples without that ground truth (the ``[0]`` sentinel, or annotators
  who disagree) are left out and counted in :attr:`EvaluationTable.excluded`.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from much_dataset.schema import (
    GENERATION_CONFIG,
    GENERATION_ID,
    HALLUCINATED,
    HUMAN_LABELS_0,
    HUMAN_LABELS_1,
    LABEL_COLUMNS,
    LABELS,
    LANG,
    MUCH_GENERATION_CONFIGS,
    OUTPUT_TOKENS,
    STOPWORD_MASK,
    TOKEN_CHUNKS,
    missing_label_columns,
)
from much_dataset.validation import LabelsWithheldError
from much_metric.report._options import BREAKDOWNS, LABEL_CHOICES, MIN_COVERAGE, EvaluationOptions
from much_metric.report._pairing import RowPairing, common_rows
from much_metric.scoring import (
    MuchMetricWarning,
    ScoreResult,
    claim_layout,
    length_scores,
    score_claims,
    suppress_single_class_warning,
)
from much_metric.scoring.engine import aggregate_flat, flatten_scores
from much_metric.signals import CLAIM_SUFFIX

__all__ = ["BREAKDOWNS", "FLOORS", "LABEL_CHOICES", "MIN_COVERAGE", "EvaluationTable", "SignalResult",
           "dataset_columns", "evaluate_signals", "ground_truth"]

#: Names of the floor rows (reference rows, not methods).
FLOORS = ("floor: random", "floor: constant", "floor: length")


@dataclass(kw_only=True)
class SignalResult:
    """Metrics of one (signal, aggregator) pair, and the claim scores the report draws its curves from.

    ``score``: the metrics, a :class:`much_metric.ScoreResult` (``result.score.roc_auc``, ``result.score.intervals``,
    ``result.score.by["lang"]["fr"]``); its ``aggregator`` and ``stopword_handling`` say how the token scores were
    aggregated (``level="token"``), or it is a claim-level result (claim-level signals and floors: nothing
    aggregated). None only for a row built to be ranked, not scored. Missing values are ``nan``/None: a display
    writes its own placeholder ("—"), the data never holds one. ``coverage``: the fraction of the eligible samples
    the signal covers. :meth:`to_dict` is the JSON row (``much evaluate --json``).
    """

    signal_name: str
    score: ScoreResult | None = None
    coverage: float = 1.0
    claim_scores: np.ndarray
    hallucinated: np.ndarray
    claim_groups: dict[str, np.ndarray] = field(default_factory=dict)
    #: dataset row index of each claim (to match claims across signals, split samples, draw per-group curves)
    claim_rows: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    #: ``"token"`` (aggregated token scores), ``"claim"`` (claim-level input) or ``"floor"`` (reference row)
    level: str = "token"
    #: dataset row index of each scored sample (a sample whose claims are all dropped still counts)
    samples: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    @property
    def aggregator(self) -> str | None:
        """The token-to-claim aggregator; None where nothing is aggregated (claim-level signals, floors)."""
        return None if self.score is None or self.score.level == "claim" else self.score.aggregator

    @staticmethod
    def metrics_dict(score: ScoreResult, coverage: float) -> dict[str, Any]:
        """The JSON form of a row's metrics: ``score.to_dict()`` with ``aggregator`` (None for a claim-level
        result, which has no ``level`` key here) and ``coverage`` last."""
        out = score.to_dict()
        if out.pop("level", None) == "claim":
            out["aggregator"] = None
        out["coverage"] = coverage
        return out

    def to_dict(self) -> dict[str, Any]:
        """``{"signal_name": ..., <metrics>, "aggregator": ..., ["stopword_handling": ...,] "coverage": ...}``
        (Python values; NaN kept: :func:`much_dataset.jsonl.plain_json` makes it JSON)."""
        metrics = {} if self.score is None else self.metrics_dict(self.score, self.coverage)
        return {"signal_name": self.signal_name, **metrics}


@dataclass(kw_only=True)
class EvaluationTable:
    """All (signal, aggregator) results; ``missing`` / ``coverage``: per signal, samples without values and the
    covered fraction of the samples with ground truth; ``floors``: the random and constant reference rows on all
    the samples with ground truth; ``labels``: the ground-truth choice; ``excluded``: samples without it;
    ``generation_ids`` / ``langs``: per dataset row (``claim_rows`` index them); ``unknown``: per signal, the
    generation_ids it has values for that the dataset does not hold (ignored), in the signal's order."""

    results: list[SignalResult]
    n_dataset_samples: int
    missing: dict[str, int]
    has_stopword_mask: bool
    coverage: dict[str, float] = field(default_factory=dict)
    floors: list[SignalResult] = field(default_factory=list)
    labels: str = LABELS
    excluded: int = 0
    generation_ids: list[str] = field(default_factory=list)
    langs: list[str] = field(default_factory=list)
    unknown: dict[str, list[str]] = field(default_factory=dict)
    #: per signal, samples left out because they trained or validated it (``training_rows``)
    training_excluded: dict[str, int] = field(default_factory=dict)
    #: which samples the rows are scored on (paired: the same for every row) and what was left out, and why
    pairing: RowPairing | None = None
    #: per signal, what computing it cost (:class:`much_metric.signals.SignalCost` from its file's metadata, or a
    #: :class:`much_metric.signals.DeclaredCost`): set by the caller, drawn by the report against ROC-AUC
    costs: dict[str, Any] = field(default_factory=dict)
    #: the paired Δ column and the rows' flags (:func:`much_metric.report.paired_deltas`): set by the caller (it names
    #: the reference method), printed and drawn beside the table
    deltas: Any = None


def _format_ids(ids: Sequence[str], *, limit: int = 10) -> str:
    """``'a', 'b', ... (and N more)``: the first ``limit`` ids of a list for a one-line message."""
    shown = ", ".join(repr(i) for i in ids[:limit])
    return shown + (f" (and {len(ids) - limit} more)" if len(ids) > limit else "")


def dataset_columns(dataset: Any) -> dict[str, list]:
    """The columns the metric needs, as Python lists (a ``datasets.Dataset`` or a sequence of row dicts)."""
    wanted = [GENERATION_ID, GENERATION_CONFIG, LANG, OUTPUT_TOKENS, TOKEN_CHUNKS, LABELS, STOPWORD_MASK,
              HUMAN_LABELS_0, HUMAN_LABELS_1]
    if hasattr(dataset, "column_names") and hasattr(dataset, "select_columns"):
        present = [name for name in wanted if name in dataset.column_names]
        return dataset.select_columns(present).to_dict()
    rows = list(dataset)
    present = [name for name in wanted if rows and name in rows[0]]
    return {name: [row[name] for row in rows] for name in present}


def _group_value(name: str, columns: Mapping[str, list], index: int) -> str:
    if name in (LANG, GENERATION_CONFIG):
        return str(columns[name][index])
    config = MUCH_GENERATION_CONFIGS.get(columns[GENERATION_CONFIG][index])
    return str(config[name]) if config else f"unknown ({columns[GENERATION_CONFIG][index]})"


def _labelled(value: Any) -> bool:
    return value is not None and not (len(value) == 1 and int(value[0]) == 0)


def ground_truth(columns: Mapping[str, list], labels: str = LABELS) -> list[list[int] | None]:
    """Per dataset row, the chosen ground truth (one label per chunk), or None where the row has none.

    ``labels``: one of :data:`LABEL_CHOICES`. A ``[0]`` sentinel means "no human label"; ``human-agreed`` keeps a
    row only when both annotators labelled it with the same list.
    """
    if labels not in LABEL_CHOICES:
        raise ValueError(f"labels must be one of {LABEL_CHOICES}, got {labels!r}")
    needed = (HUMAN_LABELS_0, HUMAN_LABELS_1) if labels == "human-agreed" else (labels,)
    withheld = missing_label_columns(columns)
    if len(withheld) == len(LABEL_COLUMNS):
        raise LabelsWithheldError("evaluating signals", withheld)
    for name in needed:
        if name not in columns:
            raise ValueError(f"labels={labels!r} needs the dataset's {name!r} column, which it lacks")
    if labels == "human-agreed":
        return [list(a) if _labelled(a) and _labelled(b) and list(a) == list(b) else None
                for a, b in zip(columns[HUMAN_LABELS_0], columns[HUMAN_LABELS_1], strict=True)]
    return [list(value) if _labelled(value) else None for value in columns[labels]]


def _floor_results(columns: Mapping[str, list], rows: list[int], truth: list,
                   evaluation: EvaluationOptions) -> list[SignalResult]:
    """The floors on the claims of ``rows``: seeded uniform random scores (``evaluation.floor_random_state``), one
    constant score, and each claim's length (its non-stopword tokens, :func:`much_metric.scoring.length_scores`)."""
    by, bootstrap, random_state = evaluation.by, evaluation.bootstrap, evaluation.floor_random_state
    generation_ids = [columns[GENERATION_ID][i] for i in rows]
    masks = [columns[STOPWORD_MASK][i] for i in rows] if STOPWORD_MASK in columns else None
    layout = claim_layout([columns[TOKEN_CHUNKS][i] for i in rows],
                          [len(columns[OUTPUT_TOKENS][i]) for i in rows],
                          labels=[truth[i] for i in rows], generation_ids=generation_ids,
                          stopword_mask=masks if masks is not None and all(m is not None for m in masks) else None)
    hallucinated = layout.labels == HALLUCINATED
    groups = {name: [_group_value(name, columns, i) for i in rows] for name in by}
    claim_groups = {name: np.asarray(vals, dtype=object)[layout.claim_sample] for name, vals in groups.items()}
    claim_rows = np.asarray(rows, dtype=np.int64)[layout.claim_sample]
    draws = {FLOORS[0]: np.random.default_rng(random_state).random(layout.n_claims),
             FLOORS[1]: np.zeros(layout.n_claims),
             FLOORS[2]: length_scores(layout)}
    out = []
    for name, claims in draws.items():
        with suppress_single_class_warning():  # the methods' scoring of these claims already warned
            score = score_claims(claims, layout, by=groups or None, bootstrap=bootstrap)
        out.append(SignalResult(signal_name=name, score=score, coverage=1.0, claim_scores=claims,
                                hallucinated=hallucinated, claim_groups=claim_groups, claim_rows=claim_rows,
                                level="floor", samples=np.asarray(rows, np.int64)))
    return out


def evaluate_signals(
    dataset: Any,
    signals: Mapping[str, Mapping[str, Sequence[float]]],
    *,
    evaluation: EvaluationOptions = EvaluationOptions(),
    source: str | None = None,
    training_rows: Mapping[str, Collection[str]] | None = None,
    expected_missing: Mapping[str, str] | None = None,
) -> EvaluationTable:
    """Score every signal of ``signals`` on the samples of ``dataset`` (by default the samples they all cover).

    Parameters
    ----------
    dataset : datasets.Dataset or sequence of row dicts
        A MUCH split (``generation_id``, ``output_tokens``, ``token_chunks``, the ground-truth column, optionally
        ``stopword_mask``, ``lang``, ``generation_config``).
    signals : mapping
        ``{signal_name: {generation_id: values}}`` (:func:`much_metric.signals.read_signals`): one value per output
        token, or per chunk for claim-level signals (names ending with :data:`CLAIM_SUFFIX` or listed in
        ``evaluation.claim_signals``).
    evaluation : EvaluationOptions
        Aggregator(s), stopword handling, breakdowns, bootstrap, ``min_coverage``, ground truth (``labels``),
        claim-level names, floors and their ``random_state``, ``include_training_rows``.
    source : str or None
        The signal file, named in messages.
    training_rows : mapping or None
        Per signal, the generation_ids it was trained or validated on
        (:func:`much_metric.signals.training_exclusions`), left out of that signal's evaluation and counted in
        ``EvaluationTable.training_excluded`` (its coverage is over the other samples); ignored when
        ``evaluation.include_training_rows``.
    expected_missing : mapping or None
        Per signal, why some samples have no values by design (``"not in the internals pack PACK, read by"``):
        those are left out without a warning and the reason goes into ``EvaluationTable.pairing``.

    Returns
    -------
    EvaluationTable
        One :class:`SignalResult` per (signal, aggregator), each holding a :class:`much_metric.ScoreResult`, and the
        floors on the same claims.

    **Paired by default** (``evaluation.paired``): every signal and floor is scored on the same samples, those with
    ground truth that every signal covers and that trained none of them (``EvaluationTable.pairing`` says what was
    left out and why, :mod:`much_metric.report._pairing`); ``paired=False`` scores each signal on its own samples.
    Samples without values for a signal are counted in ``EvaluationTable.missing``, with a warning (unless
    ``expected_missing`` names the signal). A signal covering less than
    ``evaluation.min_coverage`` of the dataset's samples is an error (``min_coverage=0`` accepts any partial
    coverage): a file of 5 samples must not pass for an evaluation of 606. A value list whose length differs from
    the sample's number of output tokens is an error naming the sample (and ``source``, the signal file, when given).

    Examples
    --------
    >>> import numpy as np
    >>> import much_dataset
    >>> from much_metric.report import EvaluationOptions, evaluate_signals
    >>> split = much_dataset.load("sample", split="test").select(range(30))
    >>> rng = np.random.default_rng(0)
    >>> noise = {row["generation_id"]: rng.random(len(row["output_tokens"])) for row in split}
    >>> table = evaluate_signals(split, {"noise": noise},
    ...                          evaluation=EvaluationOptions(aggregator=["product", "max"], bootstrap=None))
    >>> [(row.signal_name, row.aggregator) for row in table.results]
    [('noise', 'product'), ('noise', 'max')]
    >>> row = table.results[0]
    >>> 0 <= row.score.roc_auc <= 1, row.score.n_samples, row.coverage
    (True, 30, 1.0)
    >>> [floor.signal_name for floor in table.floors]
    ['floor: random', 'floor: constant', 'floor: length']
    """
    if not isinstance(evaluation, EvaluationOptions):
        raise TypeError(f"evaluate_signals: evaluation must be an EvaluationOptions, got {type(evaluation).__name__}")
    aggregators, stopword_handling, by = evaluation.aggregators, evaluation.stopword_handling, evaluation.by
    bootstrap, min_coverage, labels = evaluation.bootstrap, evaluation.min_coverage, evaluation.labels
    if evaluation.include_training_rows:
        training_rows = None
    where = f" ({source})" if source else ""
    if not signals:
        raise ValueError(f"no signal to evaluate{where}: the signal file is empty")
    columns = dataset_columns(dataset)
    for needed in (GENERATION_ID, OUTPUT_TOKENS, TOKEN_CHUNKS):
        if needed not in columns:
            raise ValueError(f"the dataset lacks the {needed!r} column")
    truth = ground_truth(columns, labels)
    all_ids = columns[GENERATION_ID]
    with_truth = [i for i, value in enumerate(truth) if value is not None]
    if not with_truth:
        raise ValueError(f"no sample of the dataset has ground truth labels={labels!r} (all {len(all_ids)} rows "
                         "have the [0] 'no human label' sentinel or disagreeing annotators)")
    index_of = {gid: i for i, gid in enumerate(all_ids)}
    ids = [all_ids[i] for i in with_truth]
    has_mask = STOPWORD_MASK in columns
    if not has_mask:
        warnings.warn(
            f"the dataset has no {STOPWORD_MASK!r} column: no stopword handling, numbers will differ from the paper",
            MuchMetricWarning,
            stacklevel=2,
        )
    missing, coverage, unknown, trained_on, rows_of, levels = {}, {}, {}, {}, {}, {}
    claim_level = set(evaluation.claim_signals)
    expected_missing = dict(expected_missing or {})
    for signal_name, per_sample in signals.items():  # which samples each signal covers, checked
        level = levels[signal_name] = "claim" if signal_name in claim_level or signal_name.endswith(CLAIM_SUFFIX) \
            else "token"
        left_out = (training_rows or {}).get(signal_name, ())
        eligible = [gid for gid in ids if gid not in left_out] if left_out else ids
        trained_on[signal_name] = len(ids) - len(eligible)
        if not eligible:
            raise ValueError(f"signal {signal_name!r}{where}: every sample with ground truth trained or validated it; "
                             "there is no held-out row to score it on")
        rows = rows_of[signal_name] = [index_of[gid] for gid in eligible if gid in per_sample]
        unknown[signal_name] = [gid for gid in per_sample if gid not in index_of]
        if unknown[signal_name]:
            warnings.warn(f"signal {signal_name!r}{where}: {len(unknown[signal_name])} generation_id(s) are not in "
                          f"the dataset and are ignored: {_format_ids(unknown[signal_name])} (values of another "
                          "split or another dataset?)", MuchMetricWarning, stacklevel=2)
        missing[signal_name] = len(eligible) - len(rows)
        coverage[signal_name] = len(rows) / len(eligible)
        if not rows:
            raise ValueError(f"signal {signal_name!r}{where} has no values for any generation_id of the dataset")
        if missing[signal_name] and signal_name not in expected_missing:
            warnings.warn(f"signal {signal_name!r}{where}: {missing[signal_name]} of {len(eligible)} samples have no "
                          "values and are left out", MuchMetricWarning, stacklevel=2)
        for i in rows:
            expected = len(columns[TOKEN_CHUNKS][i]) if level == "claim" else len(columns[OUTPUT_TOKENS][i])
            if len(per_sample[all_ids[i]]) != expected:
                unit = "chunks (one value per claim, EOS claim included)" if level == "claim" else "output tokens"
                raise ValueError(
                    f"signal {signal_name!r}{where}, generation_id={all_ids[i]!r}: field 'values' has "
                    f"{len(per_sample[all_ids[i]])} entries but the sample has {expected} {unit}"
                )
        # After the per-sample checks: a wrong value list is named even in a file that covers few samples.
        if coverage[signal_name] < min_coverage:
            raise ValueError(f"signal {signal_name!r}{where} covers {len(rows)} of the dataset's {len(eligible)} "
                             f"samples ({coverage[signal_name]:.1%}), below min_coverage={min_coverage:.0%}; pass a "
                             "lower min_coverage (CLI: --min-coverage) to evaluate the covered samples only")
    shared = common_rows(rows_of) if evaluation.paired else with_truth
    if not shared:
        raise ValueError(f"the signals{where} share no sample with ground truth: nothing to compare on the same claims "
                         "(paired=False / --no-paired scores each signal on its own samples)")
    pairing = RowPairing(paired=evaluation.paired, n_samples=len(shared), n_with_truth=len(ids),
                         trained={name: count for name, count in trained_on.items() if count},
                         missing={name: count for name, count in missing.items() if count},
                         reasons={name: reason for name, reason in expected_missing.items() if name in signals},
                         samples_of={} if evaluation.paired else {name: len(rows) for name, rows in rows_of.items()})
    from tqdm.auto import tqdm

    results = []
    # disable=None: a progress bar on a terminal only (the bootstrap makes each step take a second or more).
    progress = tqdm(total=len(signals) * len(aggregators), desc="scoring", unit="signal x aggregator",
                    disable=None if evaluation.progress else True)
    for signal_name, per_sample in signals.items():
        level = levels[signal_name]
        rows = shared if evaluation.paired else rows_of[signal_name]
        generation_ids = [all_ids[i] for i in rows]
        values = [np.asarray(per_sample[all_ids[i]], dtype=np.float64) for i in rows]
        groups = {name: [_group_value(name, columns, i) for i in rows] for name in by}
        layout = claim_layout(
            [columns[TOKEN_CHUNKS][i] for i in rows],
            [len(columns[OUTPUT_TOKENS][i]) for i in rows],
            labels=[truth[i] for i in rows],
            stopword_mask=[columns[STOPWORD_MASK][i] for i in rows] if has_mask else None,
            generation_ids=generation_ids,
        )
        hallucinated = layout.labels == HALLUCINATED
        claim_groups = {name: np.asarray(vals, dtype=object)[layout.claim_sample] for name, vals in groups.items()}
        claim_rows = np.asarray(rows, dtype=np.int64)[layout.claim_sample]
        if level == "claim":
            score = score_claims(values, layout, by=groups or None, bootstrap=bootstrap)
            per_chunk, _ = flatten_scores(values, generation_ids=generation_ids)
            claims = per_chunk[layout.kept_chunks]
            results.append(SignalResult(signal_name=signal_name, score=score, coverage=coverage[signal_name],
                                        claim_scores=claims, hallucinated=hallucinated, claim_groups=claim_groups,
                                        claim_rows=claim_rows, level="claim", samples=np.asarray(rows, np.int64)))
            progress.update(len(aggregators))
            continue
        flat, _ = flatten_scores(values, generation_ids=generation_ids)
        for aggregator in aggregators:
            claims = aggregate_flat(flat, layout, aggregator=aggregator, stopword_handling=stopword_handling)
            score = dataclasses.replace(score_claims(claims, layout, by=groups or None, bootstrap=bootstrap),
                                        level="token", aggregator=aggregator, stopword_handling=stopword_handling)
            results.append(SignalResult(signal_name=signal_name, score=score, coverage=coverage[signal_name],
                                        claim_scores=claims, hallucinated=hallucinated, claim_groups=claim_groups,
                                        claim_rows=claim_rows, samples=np.asarray(rows, np.int64)))
            progress.update()
    progress.close()
    floor_rows = _floor_results(columns, shared, truth, evaluation) if evaluation.floors else []
    langs = [str(v) for v in columns[LANG]] if LANG in columns else ["?"] * len(all_ids)
    return EvaluationTable(results=results, n_dataset_samples=len(ids), missing=missing, has_stopword_mask=has_mask,
                           coverage=coverage, floors=floor_rows, labels=labels, excluded=len(all_ids) - len(ids),
                           generation_ids=list(all_ids), langs=langs, unknown=unknown, training_excluded=trained_on,
                           pairing=pairing)
