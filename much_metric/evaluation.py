"""Scoring signal files against a MUCH dataset: the engine behind ``much evaluate`` and the HTML report.

Joins ``{signal_name: {generation_id: token values}}`` (:func:`much_metric.signals.read_signals`) with the rows
of a MUCH split by ``generation_id``, then calls :func:`much_metric.core.score` once per (signal, aggregator).
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
    OUTPUT_TOKENS,
    STOPWORD_MASK,
    TOKEN_CHUNKS,
)
from much_metric.aggregation import AGGREGATORS, MuchMetricWarning, aggregate_flat, claim_layout, flatten_scores
from much_metric.core import MUCH_GENERATION_CONFIGS, score

__all__ = ["BREAKDOWNS", "EvaluationTable", "SignalResult", "dataset_columns", "evaluate_signals"]

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
    results: list[SignalResult]
    n_dataset_samples: int
    missing: dict[str, int]
    has_stopword_mask: bool


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
) -> EvaluationTable:
    """Score every signal of ``signals`` on the samples of ``dataset`` it covers.

    Samples without values for a signal are left out of that signal's evaluation (and counted in
    ``EvaluationTable.missing``), as in the reference. A value list whose length differs from the sample's number
    of output tokens is an error naming the sample.
    """
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

    results, missing = [], {}
    # disable=None: a progress bar on a terminal only (the bootstrap makes each step take a second or more).
    progress = tqdm(total=len(signals) * len(aggregators), desc="scoring", unit="signal x aggregator", disable=None)
    for signal_name, per_sample in signals.items():
        rows = [i for i, gid in enumerate(ids) if gid in per_sample]
        missing[signal_name] = len(ids) - len(rows)
        if not rows:
            raise ValueError(f"signal {signal_name!r} has no values for any generation_id of the dataset")
        sample_ids = [ids[i] for i in rows]
        values = [np.asarray(per_sample[ids[i]], dtype=np.float64) for i in rows]
        for position, i in enumerate(rows):
            if len(values[position]) != len(columns[OUTPUT_TOKENS][i]):
                raise ValueError(
                    f"signal {signal_name!r}, generation_id={ids[i]!r}: field 'values' has {len(values[position])} "
                    f"entries but the sample has {len(columns[OUTPUT_TOKENS][i])} output tokens"
                )
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
            metrics = score(
                values, layout, None, aggregator=aggregator, stopwords=stopwords, by=groups or None,
                n_bootstrap=n_bootstrap, random_state=random_state, sample_ids=sample_ids,
            )
            claims = aggregate_flat(flat, layout, aggregator=aggregator, stopwords=stopwords)
            results.append(SignalResult(signal_name, aggregator, metrics, claims, hallucinated, claim_groups))
            progress.update()
    progress.close()
    return EvaluationTable(results, len(ids), missing, has_mask)
