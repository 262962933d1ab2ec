"""Scoring signal files against a MUCH dataset: the engine behind ``much evaluate`` and the HTML report.

Joins ``{signal_name: {generation_id: token values}}`` (:func:`much_metric.signals._files.read_signals`) with the rows
of a MUCH split by ``generation_id``, then calls :func:`much_metric.scoring.score` once per (signal, aggregator).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from much_dataset.schema import (
    GENERATION_CONFIG,
    GENERATION_ID,
    HALLUCINATED,
    LABELS,
    LANG,
    MUCH_GENERATION_CONFIGS,
    OUTPUT_TOKENS,
    STOPWORD_MASK,
    TOKEN_CHUNKS,
)
from much_metric.scoring import (
    AGGREGATORS,
    MuchMetricWarning,
    aggregate_flat,
    claim_layout,
    flatten_scores,
    score_claims,
)

__all__ = ["BREAKDOWNS", "MIN_COVERAGE", "EvaluationTable", "SignalResult", "dataset_columns", "evaluate_signals"]

#: ``--by`` choices: dataset columns, or a field of the generation config (spec 2.3).
BREAKDOWNS = ("lang", "generation_config", "model", "temperature")


@dataclass
class SignalResult:
    """Metrics of one (signal, aggregator) pair, and the claim scores the report draws its curves from."""

    signal_name: str
    aggregator: str
    metrics: dict[str, Any]
    claim_scores: np.ndarray
    hallucinated: np.ndarray
    claim_groups: dict[str, np.ndarray] = field(default_factory=dict)


@dataclass
class EvaluationTable:
    """All (signal, aggregator) results; ``missing`` / ``coverage``: per signal, samples without values and the
    covered fraction of the dataset's samples."""

    results: list[SignalResult]
    n_dataset_samples: int
    missing: dict[str, int]
    has_stopword_mask: bool
    coverage: dict[str, float] = field(default_factory=dict)

#: Default least fraction of the dataset's samples a signal must cover (``min_coverage``).
MIN_COVERAGE = 0.95


def dataset_columns(dataset: Any) -> dict[str, list]:
    """The columns the metric needs, as Python lists (a ``datasets.Dataset`` or a sequence of row dicts)."""
    wanted = [GENERATION_ID, GENERATION_CONFIG, LANG, OUTPUT_TOKENS, TOKEN_CHUNKS, LABELS, STOPWORD_MASK]
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


def evaluate_signals(
    dataset: Any,
    signals: Mapping[str, Mapping[str, Sequence[float]]],
    *,
    aggregators: Sequence[str] = ("product",),
    stopwords: str = "null",
    by: Sequence[str] = (),
    n_bootstrap: int = 1000,
    random_state: int | None = 0,
    min_coverage: float = MIN_COVERAGE,
    source: str | None = None,
) -> EvaluationTable:
    """Score every signal of ``signals`` on the samples of ``dataset`` it covers.

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
    for needed in (GENERATION_ID, OUTPUT_TOKENS, TOKEN_CHUNKS, LABELS):
        if needed not in columns:
            raise ValueError(f"the dataset lacks the {needed!r} column")
    ids = columns[GENERATION_ID]
    has_mask = STOPWORD_MASK in columns
    if not has_mask:
        warnings.warn(
            f"the dataset has no {STOPWORD_MASK!r} column: no stopword handling, numbers will differ from the paper",
            MuchMetricWarning,
            stacklevel=2,
        )
    from tqdm.auto import tqdm

    results, missing, coverage = [], {}, {}
    # disable=None: a progress bar on a terminal only (the bootstrap makes each step take a second or more).
    progress = tqdm(total=len(signals) * len(aggregators), desc="scoring", unit="signal x aggregator", disable=None)
    for signal_name, per_sample in signals.items():
        rows = [i for i, gid in enumerate(ids) if gid in per_sample]
        missing[signal_name] = len(ids) - len(rows)
        coverage[signal_name] = len(rows) / len(ids) if ids else 0.0
        if not rows:
            raise ValueError(f"signal {signal_name!r}{where} has no values for any generation_id of the dataset")
        if missing[signal_name]:
            warnings.warn(f"signal {signal_name!r}{where}: {missing[signal_name]} of {len(ids)} samples have no "
                          "values and are left out", MuchMetricWarning, stacklevel=2)
        sample_ids = [ids[i] for i in rows]
        values = [np.asarray(per_sample[ids[i]], dtype=np.float64) for i in rows]
        for position, i in enumerate(rows):
            if len(values[position]) != len(columns[OUTPUT_TOKENS][i]):
                raise ValueError(
                    f"signal {signal_name!r}{where}, generation_id={ids[i]!r}: field 'values' has "
                    f"{len(values[position])} entries but the sample has {len(columns[OUTPUT_TOKENS][i])} output tokens"
                )
        # After the per-sample checks: a wrong value list is named even in a file that covers few samples.
        if coverage[signal_name] < min_coverage:
            raise ValueError(f"signal {signal_name!r}{where} covers {len(rows)} of the dataset's {len(ids)} samples "
                             f"({coverage[signal_name]:.1%}), below min_coverage={min_coverage:.0%}; pass a lower "
                             "min_coverage (CLI: --min-coverage) to evaluate the covered samples only")
        groups = {name: [_group_value(name, columns, i) for i in rows] for name in by}
        layout = claim_layout(
            [columns[TOKEN_CHUNKS][i] for i in rows],
            [len(v) for v in values],
            labels=[columns[LABELS][i] for i in rows],
            stopword_mask=[columns[STOPWORD_MASK][i] for i in rows] if has_mask else None,
            sample_ids=sample_ids,
        )
        flat, _ = flatten_scores(values, sample_ids=sample_ids)
        hallucinated = layout.labels == HALLUCINATED
        claim_groups = {name: np.asarray(vals, dtype=object)[layout.claim_sample] for name, vals in groups.items()}
        for aggregator in aggregators:
            claims = aggregate_flat(flat, layout, aggregator=aggregator, stopwords=stopwords)
            metrics = score_claims(claims, layout, by=groups or None, n_bootstrap=n_bootstrap,
                                   random_state=random_state)
            metrics.pop("level")
            metrics.update(aggregator=aggregator, stopwords=stopwords, coverage=coverage[signal_name])
            results.append(SignalResult(signal_name, aggregator, metrics, claims, hallucinated, claim_groups))
            progress.update()
    progress.close()
    return EvaluationTable(results, len(ids), missing, has_mask, coverage)
