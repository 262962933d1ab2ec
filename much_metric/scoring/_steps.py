"""The steps that :func:`~much_metric.score`, :func:`~much_metric.compare`, :func:`~much_metric.aggregate_claims`
and :func:`~much_metric.score_claims` share: flatten and lay out the claims, aggregate them under an
:class:`~much_metric.scoring.Aggregation`, and compute the metrics (and breakdowns, intervals) of flat claim scores.
The public functions and their documentation are in :mod:`much_metric.scoring._api`."""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import numpy as np

from much_dataset.schema import HALLUCINATED
from much_metric.scoring._aggregation import (
    ClaimLayout,
    MuchMetricWarning,
    aggregate_flat,
    claim_layout,
    flatten_scores,
)
from much_metric.scoring._bootstrap import Bootstrap, bootstrap_intervals
from much_metric.scoring._checks import check_generation_ids, group_values
from much_metric.scoring._options import Aggregation
from much_metric.scoring._ranking import METRICS, curve_metrics, sort_claims
from much_metric.scoring._result import ScoreResult

__all__ = ["MISSING_MASK_EFFECT", "MissingStopwordMaskWarning", "aggregate_with", "flat_confidences_to_uncertainties",
           "layout_and_scores", "metrics_of", "score_layout", "suppress_single_class_warning", "warn_missing_mask"]

#: Whether :func:`metrics_of` warns about a group with a single class. A context variable, not a warnings filter:
#: ``warnings.catch_warnings`` changes process-wide state, so a server thread silencing its floors would silence
#: (or un-silence) every other thread's warnings meanwhile; a context variable is private to its thread and task.
_WARN_SINGLE_CLASS: ContextVar[bool] = ContextVar("much_metric_warn_single_class", default=True)


@contextmanager
def suppress_single_class_warning() -> Iterator[None]:
    """Within the block, and only in the calling thread (or asyncio task), groups whose claims are all of one class
    get nan metrics without a :class:`MuchMetricWarning`.

    For callers that score the same claims twice (the evaluation's floors after the methods): the first scoring
    already warned. Every other warning, and every other thread, is unaffected.

    Examples
    --------
    >>> import warnings
    >>> from much_metric.scoring import score_claims, suppress_single_class_warning
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("error")  # any warning would raise here
    ...     with suppress_single_class_warning():
    ...         result = score_claims([[0.2, 0.4, 0.0]], [[[0], [1], [2]]], [[1, 1, 1]])
    >>> result.roc_auc
    nan
    """
    token = _WARN_SINGLE_CLASS.set(False)
    try:
        yield
    finally:
        _WARN_SINGLE_CLASS.reset(token)


class MissingStopwordMaskWarning(MuchMetricWarning):
    """:func:`score`/:func:`compare` got no ``stopword_mask``: no token is a stopword, unlike the reference."""


#: What a missing ``stopword_mask`` changes, measured on the embedded sample (``token_entropy(delta=24)``, product
#: aggregator): ROC-AUC without the mask, then with it. tests/much_metric/scoring/test_stopword_warning.py recomputes
#: both and checks them against this text.
MISSING_MASK_EFFECT = ("on the embedded sample, Token Entropy's ROC-AUC is 0.6069 without it instead of 0.6164 with "
                       "it")


def warn_missing_mask(function: str) -> None:
    warnings.warn(
        f"{function}(): no stopword_mask given, so no token counts as a stopword; the reference evaluation (and the "
        f"paper's numbers) nulls stopword tokens ({MISSING_MASK_EFFECT}). Pass the dataset's stopword_mask column "
        "(much_dataset.load adds it to the hub rows, which lack it); to score without stopwords on purpose, pass an "
        "all-False mask",
        MissingStopwordMaskWarning,
        stacklevel=3,
    )


def layout_and_scores(
    token_scores: Any,
    token_chunks: Any,
    labels: Any,
    stopword_mask: Any,
    options: Aggregation,
    generation_ids: Sequence[str] | None,
) -> tuple[np.ndarray, ClaimLayout]:
    flat, offsets = flatten_scores(token_scores, score_type=options.score_type, generation_ids=generation_ids)
    check_generation_ids(generation_ids, len(offsets) - 1)
    if isinstance(token_chunks, ClaimLayout):
        layout = token_chunks
        if layout.n_samples != len(offsets) - 1 or not np.array_equal(layout.token_offsets, offsets):
            raise ValueError("the token scores do not have the token counts the ClaimLayout was built for")
        if labels is not None or stopword_mask is not None:
            raise ValueError("labels and stopword_mask are part of a ClaimLayout; pass them to claim_layout()")
        return flat, layout
    layout = claim_layout(
        token_chunks,
        np.diff(offsets),
        labels=labels,
        stopword_mask=stopword_mask,
        drop_last_chunk=options.drop_last_chunk,
        generation_ids=generation_ids,
    )
    return flat, layout


def aggregate_with(flat: np.ndarray, layout: ClaimLayout, options: Aggregation) -> np.ndarray:
    return aggregate_flat(flat, layout, aggregator=options.aggregator, stopword_handling=options.stopword_handling)


def metrics_of(
    claim_scores: np.ndarray,
    hallucinated: np.ndarray,
    claim_sample: np.ndarray,
    n_samples: int,
    *,
    group: str,
    bootstrap: Bootstrap | None,
) -> dict[str, Any]:
    n_hallucinated = int(np.count_nonzero(hallucinated))
    n_claims = int(len(hallucinated))
    if (n_hallucinated == 0 or n_hallucinated == n_claims) and _WARN_SINGLE_CLASS.get():
        kind = "no claim" if n_claims == 0 else ("no hallucinated" if n_hallucinated == 0 else "no correct")
        warnings.warn(
            f"{group}: {kind} claim among {n_claims} claims of {n_samples} samples; undefined metrics are nan",
            MuchMetricWarning,
            stacklevel=3,
        )
    point = curve_metrics(sort_claims(claim_scores, hallucinated))
    result: dict[str, Any] = {key: float(point[key][0]) for key in METRICS}
    result.update(n_samples=int(n_samples), n_claims=n_claims, n_hallucinated=n_hallucinated)
    if bootstrap is not None:
        intervals = bootstrap_intervals(
            claim_scores, hallucinated, claim_sample, n_samples, n_resamples=bootstrap.n_resamples,
            confidence_level=bootstrap.confidence_level, random_state=bootstrap.random_state,
        )
        result["intervals"] = {key: (float(low), float(high)) for key, (low, high) in intervals.items()}
    return result


def score_layout(
    claims: np.ndarray,
    layout: ClaimLayout,
    by: Mapping[str, Sequence[Any]] | None,
    *,
    bootstrap: Bootstrap | None,
    level: str,
    aggregator: str | None = None,
    stopword_handling: str | None = None,
) -> ScoreResult:
    """Metrics (and breakdowns) of flat claim scores laid out as ``layout``'s evaluated claims."""
    groups = group_values(by, layout.n_samples) if by is not None else {}
    hallucinated = layout.labels == HALLUCINATED
    options = dict(bootstrap=bootstrap)
    meta = dict(level=level, aggregator=aggregator, stopword_handling=stopword_handling)
    result = metrics_of(claims, hallucinated, layout.claim_sample, layout.n_samples, group="all samples", **options)
    breakdowns: dict[str, dict[str, ScoreResult]] = {}
    if groups:
        for name, (keys, sample_group) in groups.items():
            per_value = {}
            for position, key in enumerate(keys):
                members = np.flatnonzero(sample_group == position)
                remap = np.full(layout.n_samples, -1)
                remap[members] = np.arange(len(members))
                in_group = remap[layout.claim_sample] >= 0
                per_value[key] = ScoreResult(**metrics_of(
                    claims[in_group], hallucinated[in_group], remap[layout.claim_sample[in_group]], len(members),
                    group=f"{name}={key}", **options,
                ), **meta)
            breakdowns[name] = per_value
    return ScoreResult(**result, **meta, by=breakdowns if groups else None)


def flat_confidences_to_uncertainties(claims: np.ndarray, layout: ClaimLayout) -> np.ndarray:
    """``1 - p`` of flat claim confidences laid out as ``layout``'s evaluated claims (each in [0, 1])."""
    outside = np.flatnonzero(~((claims >= 0) & (claims <= 1)) & np.isfinite(claims))
    if outside.size:
        sample = int(layout.claim_sample[outside[0]])
        raise ValueError(f"sample {layout.name(sample)}: with score_type='confidence', 'claim_scores' must be "
                         f"probabilities in [0, 1], got {claims[outside[0]]}")
    return 1.0 - claims
