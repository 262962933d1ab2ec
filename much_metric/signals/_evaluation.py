"""Scoring signal files against a MUCH dataset: the engine behind ``much evaluate`` and the HTML report.

Joins ``{signal_name: {generation_id: token values}}`` (:func:`much_metric.signals._files.read_signals`) with the rows
of a MUCH split by ``generation_id``, then scores every (signal, aggregator) pair with
:func:`much_metric.scoring.score_claims`, and adds the floors (seeded random, constant and claim-length scores on
the same claims).

* **Claim-level signals**: a signal whose name ends with :data:`CLAIM_SUFFIX` (``"@claim"``, e.g.
  ``p_true@claim``) -- or that is named in ``claim_signals`` -- holds one value per chunk of ``token_chunks`` (EOS
  claim included, like ``labels``) instead of one per token; it is scored as is, with no aggregator.
* **Ground truth**: ``labels=`` names the column (:data:`LABEL_CHOICES`): ``labels`` (GPT-4o, the reference),
  ``human_labels_0`` / ``human_labels_1`` (one annotator) or ``human-agreed`` (the annotators' common list where
  both labelled the sample identically). Samples without that ground truth (the ``[0]`` sentinel, or annotators
  who disagree) are left out and counted in :attr:`EvaluationTable.excluded`.
"""

from __future__ import annotations

import warnings
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from much_dataset.schema import (
    GENERATION_CONFIG,
    GENERATION_ID,
    HALLUCINATED,
    HUMAN_LABELS_0,
    HUMAN_LABELS_1,
    LABELS,
    LANG,
    MUCH_GENERATION_CONFIGS,
    OUTPUT_TOKENS,
    STOPWORD_MASK,
    TOKEN_CHUNKS,
)
from much_metric.scoring import AGGREGATORS, Bootstrap, MuchMetricWarning, claim_layout, length_scores, score_claims
from much_metric.scoring.engine import aggregate_flat, flatten_scores

__all__ = ["BREAKDOWNS", "CLAIM_SUFFIX", "FLOORS", "LABEL_CHOICES", "MIN_COVERAGE", "EvaluationTable", "SignalResult",
           "dataset_columns", "evaluate_signals", "ground_truth"]

#: ``--by`` choices: dataset columns, or a field of the generation config
#: (docs/reference-behaviour.md#generation-configs).
BREAKDOWNS = ("lang", "generation_config", "model", "temperature")
#: ``labels=`` choices: a label column, or the labels both human annotators agree on.
LABEL_CHOICES = (LABELS, HUMAN_LABELS_0, HUMAN_LABELS_1, "human-agreed")
#: Signal names ending with this hold one value per chunk (claim-level methods: P(True), judges, sampling).
CLAIM_SUFFIX = "@claim"
#: Names of the floor rows (reference rows, not methods).
FLOORS = ("floor: random", "floor: constant", "floor: length")


@dataclass(kw_only=True)
class SignalResult:
    """Metrics of one (signal, aggregator) pair, and the claim scores the report draws its curves from."""

    signal_name: str
    #: the token-to-claim aggregator; None where nothing is aggregated (claim-level signals, floors) -- displays
    #: write "—" for it, the data never holds a placeholder string
    aggregator: str | None
    metrics: dict[str, Any]
    claim_scores: np.ndarray
    hallucinated: np.ndarray
    claim_groups: dict[str, np.ndarray] = field(default_factory=dict)
    #: dataset row index of each claim (to match claims across signals, split samples, draw per-group curves)
    claim_rows: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    #: ``"token"`` (aggregated token scores), ``"claim"`` (claim-level input) or ``"floor"`` (reference row)
    level: str = "token"


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


def _format_ids(ids: Sequence[str], *, limit: int = 10) -> str:
    """``'a', 'b', ... (and N more)``: the first ``limit`` ids of a list for a one-line message."""
    shown = ", ".join(repr(i) for i in ids[:limit])
    return shown + (f" (and {len(ids) - limit} more)" if len(ids) > limit else "")

#: Default least fraction of the dataset's samples a signal must cover (``min_coverage``).
MIN_COVERAGE = 0.95


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
    for name in needed:
        if name not in columns:
            raise ValueError(f"labels={labels!r} needs the dataset's {name!r} column, which it lacks")
    if labels == "human-agreed":
        return [list(a) if _labelled(a) and _labelled(b) and list(a) == list(b) else None
                for a, b in zip(columns[HUMAN_LABELS_0], columns[HUMAN_LABELS_1], strict=True)]
    return [list(value) if _labelled(value) else None for value in columns[labels]]


def _floor_results(columns: Mapping[str, list], rows: list[int], truth: list, by: Sequence[str],
                   bootstrap: Bootstrap | None, random_state: int | None) -> list[SignalResult]:
    """The floors on the claims of ``rows``: seeded uniform random scores, one constant score, and each claim's
    length (its non-stopword tokens, :func:`much_metric.scoring.length_scores`)."""
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
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MuchMetricWarning)  # single-class groups already warned for methods
            metrics = score_claims(claims, layout, by=groups or None, bootstrap=bootstrap).to_dict()
        metrics.pop("level")
        metrics.update(aggregator=None, coverage=1.0)
        out.append(SignalResult(signal_name=name, aggregator=None, metrics=metrics, claim_scores=claims,
                                hallucinated=hallucinated, claim_groups=claim_groups, claim_rows=claim_rows,
                                level="floor"))
    return out


def evaluate_signals(
    dataset: Any,
    signals: Mapping[str, Mapping[str, Sequence[float]]],
    *,
    aggregators: Sequence[str] = ("product",),
    stopword_handling: Literal["null", "exclude"] = "null",
    by: Sequence[str] = (),
    bootstrap: Bootstrap | None = Bootstrap(),
    min_coverage: float = MIN_COVERAGE,
    source: str | None = None,
    labels: str = LABELS,
    claim_signals: Sequence[str] = (),
    floors: bool = True,
    random_state: int | None = None,
    training_rows: Mapping[str, Collection[str]] | None = None,
) -> EvaluationTable:
    """Score every signal of ``signals`` on the samples of ``dataset`` it covers.

    ``labels``: the ground truth (:data:`LABEL_CHOICES`; samples without it are left out and counted);
    ``claim_signals``: names of claim-level signals besides those ending with :data:`CLAIM_SUFFIX`;
    ``floors``: add the random and constant reference rows (``EvaluationTable.floors``); ``random_state``: seed
    of the random floor's scores (default: the bootstrap's ``random_state``, 0 without bootstrap); ``bootstrap``: the
    resampling of the intervals (``None``: no intervals);
    ``stopword_handling``: as in :func:`much_metric.score`; ``training_rows``: per signal, the generation_ids it
    was trained or validated on (:func:`much_metric.signals.training_exclusions`), left out of that signal's
    evaluation and counted in ``EvaluationTable.training_excluded`` (its coverage is over the other samples).

    Samples without values for a signal are left out of that signal's evaluation (counted in
    ``EvaluationTable.missing``, with a warning), as in the reference. A signal covering less than ``min_coverage``
    of the dataset's samples is an error (pass ``min_coverage=0`` to accept any partial coverage): a file of 5
    samples must not pass for an evaluation of 606. A value list whose length differs from the sample's number of
    output tokens is an error naming the sample (and ``source``, the signal file, when given).
    """
    if not isinstance(min_coverage, int | float) or not 0 <= min_coverage <= 1:
        raise ValueError(f"min_coverage must be a fraction in [0, 1], got {min_coverage!r}")
    where = f" ({source})" if source else ""
    if not signals:
        raise ValueError(f"no signal to evaluate{where}: the signal file is empty")
    for name in by:
        if name not in BREAKDOWNS:
            raise ValueError(f"unknown breakdown {name!r}; choose among {BREAKDOWNS}")
    for aggregator in aggregators:
        if aggregator not in AGGREGATORS:
            raise ValueError(f"aggregator must be one of {AGGREGATORS}, got {aggregator!r}")
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
    from tqdm.auto import tqdm

    results, missing, coverage, unknown, trained_on = [], {}, {}, {}, {}
    # disable=None: a progress bar on a terminal only (the bootstrap makes each step take a second or more).
    progress = tqdm(total=len(signals) * len(aggregators), desc="scoring", unit="signal x aggregator", disable=None)
    claim_level = set(claim_signals)
    for signal_name, per_sample in signals.items():
        level = "claim" if signal_name in claim_level or signal_name.endswith(CLAIM_SUFFIX) else "token"
        left_out = (training_rows or {}).get(signal_name, ())
        eligible = [gid for gid in ids if gid not in left_out] if left_out else ids
        trained_on[signal_name] = len(ids) - len(eligible)
        if not eligible:
            raise ValueError(f"signal {signal_name!r}{where}: every sample with ground truth trained or validated it; "
                             "there is no held-out row to score it on")
        rows = [index_of[gid] for gid in eligible if gid in per_sample]
        unknown[signal_name] = [gid for gid in per_sample if gid not in index_of]
        if unknown[signal_name]:
            warnings.warn(f"signal {signal_name!r}{where}: {len(unknown[signal_name])} generation_id(s) are not in "
                          f"the dataset and are ignored: {_format_ids(unknown[signal_name])} (values of another "
                          "split or another dataset?)", MuchMetricWarning, stacklevel=2)
        missing[signal_name] = len(eligible) - len(rows)
        coverage[signal_name] = len(rows) / len(eligible)
        if not rows:
            raise ValueError(f"signal {signal_name!r}{where} has no values for any generation_id of the dataset")
        if missing[signal_name]:
            warnings.warn(f"signal {signal_name!r}{where}: {missing[signal_name]} of {len(eligible)} samples have no "
                          "values and are left out", MuchMetricWarning, stacklevel=2)
        generation_ids = [all_ids[i] for i in rows]
        values = [np.asarray(per_sample[all_ids[i]], dtype=np.float64) for i in rows]
        for position, i in enumerate(rows):
            expected = len(columns[TOKEN_CHUNKS][i]) if level == "claim" else len(columns[OUTPUT_TOKENS][i])
            if len(values[position]) != expected:
                unit = "chunks (one value per claim, EOS claim included)" if level == "claim" else "output tokens"
                raise ValueError(
                    f"signal {signal_name!r}{where}, generation_id={all_ids[i]!r}: field 'values' has "
                    f"{len(values[position])} entries but the sample has {expected} {unit}"
                )
        # After the per-sample checks: a wrong value list is named even in a file that covers few samples.
        if coverage[signal_name] < min_coverage:
            raise ValueError(f"signal {signal_name!r}{where} covers {len(rows)} of the dataset's {len(eligible)} "
                             f"samples ({coverage[signal_name]:.1%}), below min_coverage={min_coverage:.0%}; pass a "
                             "lower min_coverage (CLI: --min-coverage) to evaluate the covered samples only")
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
            metrics = score_claims(values, layout, by=groups or None, bootstrap=bootstrap).to_dict()
            metrics.pop("level")
            per_chunk, _ = flatten_scores(values, generation_ids=generation_ids)
            claims = per_chunk[layout.kept_chunks]
            metrics.update(aggregator=None, coverage=coverage[signal_name])
            results.append(SignalResult(signal_name=signal_name, aggregator=None, metrics=metrics, claim_scores=claims,
                                        hallucinated=hallucinated, claim_groups=claim_groups, claim_rows=claim_rows,
                                        level="claim"))
            progress.update(len(aggregators))
            continue
        flat, _ = flatten_scores(values, generation_ids=generation_ids)
        for aggregator in aggregators:
            claims = aggregate_flat(flat, layout, aggregator=aggregator, stopword_handling=stopword_handling)
            metrics = score_claims(claims, layout, by=groups or None, bootstrap=bootstrap).to_dict()
            metrics.pop("level")
            metrics.update(aggregator=aggregator, stopword_handling=stopword_handling, coverage=coverage[signal_name])
            results.append(SignalResult(signal_name=signal_name, aggregator=aggregator, metrics=metrics,
                                        claim_scores=claims, hallucinated=hallucinated, claim_groups=claim_groups,
                                        claim_rows=claim_rows))
            progress.update()
    progress.close()
    if random_state is None:
        random_state = bootstrap.random_state if bootstrap is not None else 0
    floor_rows = _floor_results(columns, with_truth, truth, by, bootstrap, random_state) if floors else []
    langs = [str(v) for v in columns[LANG]] if LANG in columns else ["?"] * len(all_ids)
    return EvaluationTable(results=results, n_dataset_samples=len(ids), missing=missing, has_stopword_mask=has_mask,
                           coverage=coverage, floors=floor_rows, labels=labels, excluded=len(all_ids) - len(ids),
                           generation_ids=list(all_ids), langs=langs, unknown=unknown, training_excluded=trained_on)
