"""The MUCH metric: token scores -> claim scores -> claim-level ROC/PR metrics, with breakdowns and bootstrap.

numpy only (no scikit-learn, torch, datasets or evaluate import). Sign conventions:

* token and claim scores are **uncertainties**: higher = more likely hallucinated (``confidence=True`` converts
  probabilities/confidences ``p`` into uncertainties ``1 - p`` first);
* the positive class of every metric is the hallucinated claim (label ``-1``, :data:`much_dataset.schema.HALLUCINATED`).

Defaults reproduce the reference evaluation (docs/reference-behaviour.md#evaluation): the last chunk of every sample
(the EOS claim) is dropped,
stopword tokens are *nulled* (score 0, still counted in the claim length) and claims are aggregated with the
noisy-OR ``product``.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from much_dataset.schema import HALLUCINATED, MUCH_GENERATION_CONFIGS
from much_dataset.selection import select_samples
from much_metric.scoring._aggregation import (
    AGGREGATORS,
    STOPWORD_MODES,
    ClaimLayout,
    MuchMetricWarning,
    aggregate_flat,
    claim_layout,
    flatten_scores,
)
from much_metric.scoring._bootstrap import bootstrap_intervals, paired_bootstrap
from much_metric.scoring._checks import check_bootstrap, check_finite_claims, check_sample_ids, group_values
from much_metric.scoring._ranking import METRICS, curve_metrics, sort_claims

__all__ = [
    "AGGREGATORS",
    "STOPWORD_MODES",
    "METRICS",
    "MUCH_GENERATION_CONFIGS",
    "ClaimLayout",
    "MuchMetricWarning",
    "aggregate_claims",
    "claim_layout",
    "score",
    "score_claims",
    "compare",
    "select_samples",
]

def _layout_and_scores(
    token_scores: Any,
    token_chunks: Any,
    labels: Any,
    stopword_mask: Any,
    *,
    drop_last_chunk: bool,
    confidence: bool,
    sample_ids: Sequence[str] | None,
) -> tuple[np.ndarray, ClaimLayout]:
    flat, offsets = flatten_scores(token_scores, confidence=confidence, sample_ids=sample_ids)
    check_sample_ids(sample_ids, len(offsets) - 1)
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
        drop_last_chunk=drop_last_chunk,
        sample_ids=sample_ids,
    )
    return flat, layout


def aggregate_claims(
    token_scores: Any,
    token_chunks: Any,
    stopword_mask: Any = None,
    aggregator: str = "product",
    stopwords: str = "null",
    drop_last_chunk: bool = True,
    *,
    confidence: bool = False,
    sample_ids: Sequence[str] | None = None,
) -> list[np.ndarray]:
    """Aggregate token scores into one score per claim.

    Parameters
    ----------
    token_scores : sequence of length n_samples of 1-D float sequences
        Per sample, one score per output token (EOS included): **uncertainties**, higher = more likely
        hallucinated. Lists, numpy arrays, pyarrow list arrays and ``datasets`` columns are accepted.
    token_chunks : sequence of length n_samples of lists of int lists, or ClaimLayout
        Per sample, the claims as runs of consecutive token indices (``token_chunks`` column), or a layout from
        :func:`claim_layout` to reuse across calls.
    stopword_mask : sequence of length n_samples of bool sequences, optional
        Per token, whether it is a stopword (``stopword_mask`` column). Without it no token is a stopword.
    aggregator : {"product", "mean", "max", "geometric"}, default "product"
        With ``s`` the claim's token scores and ``n`` their number (docs/reference-behaviour.md#aggregators):
        ``product`` = 1 - prod(1 - s) (noisy-OR, reference default), ``mean`` = mean(s), ``max`` = max(s),
        ``geometric`` = 1 - (prod(1 - s) + 1e-5) ** (1 / n). ``product`` and ``geometric`` assume s in [0, 1].
    stopwords : {"null", "exclude"}, default "null"
        ``"null"`` (reference, docs/reference-behaviour.md#stopword-rule; reproduces the paper's numbers): stopword
        tokens score 0 but still
        count in ``n``, so an all-stopword claim scores 0 (``geometric``: about -1e-5 / n).
        ``"exclude"`` (corrected): stopword tokens are removed from their claim; a claim made only of stopwords
        keeps all its tokens (it would otherwise have no score).
    drop_last_chunk : bool, default True
        Drop each sample's last chunk, the EOS claim (docs/reference-behaviour.md#evaluation-modes).
    confidence : bool, default False
        ``token_scores`` are confidences (e.g. the sampled token's probability) in [0, 1]: they are converted to
        uncertainties ``1 - p`` before aggregation (values outside [0, 1] are an error).
    sample_ids : sequence of str, optional
        ``generation_id`` of each sample, named in error messages.

    Returns
    -------
    list of length n_samples of ndarray of shape (n_claims_i,)
        Claim uncertainties per sample (higher = more likely hallucinated), the EOS claim excluded by default.
    """
    flat, layout = _layout_and_scores(
        token_scores, token_chunks, None, stopword_mask,
        drop_last_chunk=drop_last_chunk, confidence=confidence, sample_ids=sample_ids,
    )
    claims = aggregate_flat(flat, layout, aggregator=aggregator, stopwords=stopwords)
    return np.split(claims, layout.sample_claim_offsets()[1:-1])


def _metrics_of(
    claim_scores: np.ndarray,
    hallucinated: np.ndarray,
    claim_sample: np.ndarray,
    n_samples: int,
    *,
    group: str,
    n_bootstrap: int,
    confidence_level: float,
    random_state: int | None,
) -> dict[str, Any]:
    n_hallucinated = int(np.count_nonzero(hallucinated))
    n_claims = int(len(hallucinated))
    if n_hallucinated == 0 or n_hallucinated == n_claims:
        kind = "no claim" if n_claims == 0 else ("no hallucinated" if n_hallucinated == 0 else "no correct")
        warnings.warn(
            f"{group}: {kind} claim among {n_claims} claims of {n_samples} samples; undefined metrics are nan",
            MuchMetricWarning,
            stacklevel=3,
        )
    point = curve_metrics(sort_claims(claim_scores, hallucinated))
    result: dict[str, Any] = {key: float(point[key][0]) for key in METRICS}
    result.update(n_samples=int(n_samples), n_claims=n_claims, n_hallucinated=n_hallucinated)
    if n_bootstrap:
        intervals = bootstrap_intervals(
            claim_scores, hallucinated, claim_sample, n_samples,
            n_resamples=n_bootstrap, confidence_level=confidence_level, random_state=random_state,
        )
        result["intervals"] = {key: list(value) for key, value in intervals.items()}
    return result


def _score_layout(
    claims: np.ndarray,
    layout: ClaimLayout,
    by: Mapping[str, Sequence[Any]] | None,
    *,
    n_bootstrap: int,
    confidence_level: float,
    random_state: int | None,
) -> dict[str, Any]:
    """Metrics (and breakdowns) of flat claim scores laid out as ``layout``'s evaluated claims."""
    groups = group_values(by, layout.n_samples) if by is not None else {}
    hallucinated = layout.labels == HALLUCINATED
    options = dict(n_bootstrap=n_bootstrap, confidence_level=confidence_level, random_state=random_state)
    result = _metrics_of(claims, hallucinated, layout.claim_sample, layout.n_samples, group="all samples", **options)
    if groups:
        result["by"] = {}
        for name, (keys, sample_group) in groups.items():
            per_value = {}
            for position, key in enumerate(keys):
                members = np.flatnonzero(sample_group == position)
                remap = np.full(layout.n_samples, -1)
                remap[members] = np.arange(len(members))
                in_group = remap[layout.claim_sample] >= 0
                per_value[key] = _metrics_of(
                    claims[in_group], hallucinated[in_group], remap[layout.claim_sample[in_group]], len(members),
                    group=f"{name}={key}", **options,
                )
            result["by"][name] = per_value
    return result


def score(
    token_scores: Any,
    token_chunks: Any,
    labels: Any,
    stopword_mask: Any = None,
    aggregator: str = "product",
    *,
    stopwords: str = "null",
    drop_last_chunk: bool = True,
    confidence: bool = False,
    by: Mapping[str, Sequence[Any]] | None = None,
    n_bootstrap: int = 0,
    confidence_level: float = 0.95,
    random_state: int | None = 0,
    sample_ids: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Claim-level detection metrics of token scores (positive class = hallucinated claim, label -1).

    Parameters
    ----------
    token_scores, token_chunks, stopword_mask, aggregator, stopwords, drop_last_chunk, confidence, sample_ids
        As in :func:`aggregate_claims`.
    labels : sequence of length n_samples of int sequences, or None with a ClaimLayout
        One label per chunk (EOS claim included): -1 hallucinated, +1 correct.
    by : mapping of str to sequence of length n_samples, optional
        Breakdowns, e.g. ``{"lang": ds["lang"], "generation_config": ds["generation_config"]}``: the result gets
        ``result["by"][name][value]``, the same dict computed on the samples of each value. (Cross two keys by
        passing one combined key per sample.)
    n_bootstrap : int, default 0
        If > 0, ``result["intervals"][metric] = [low, high]``: percentile interval at ``confidence_level`` over
        ``n_bootstrap`` resamples of the **samples** (all claims of a drawn sample move together), seeded by
        ``random_state``; also for every group.

    Returns
    -------
    dict
        ``roc_auc``, ``pr_auc`` (trapezoid over the precision-recall curve, as the reference),
        ``average_precision``, ``tpr_at_fpr_10`` (largest TPR over thresholds with FPR <= 0.10, no interpolation),
        ``recall_at_precision_80`` (largest recall over thresholds with precision >= 0.80, no interpolation; 0 if
        none), ``partial_pr_auc_recall_20`` (reference definition, docs/reference-behaviour.md#metrics: trapezoid over
        the PR points with
        recall <= 0.2 including the (0, 1) end point, / 0.2), ``partial_average_precision_recall_20`` (corrected:
        step-wise AP over recall in [0, 0.2], / 0.2), ``n_samples``, ``n_claims``, ``n_hallucinated``,
        ``aggregator``, ``stopwords``; plus ``intervals`` and ``by`` when asked. A metric undefined on the data
        (a single class) is ``nan`` with a :class:`MuchMetricWarning`. See :mod:`much_metric.scoring._ranking`.
    """
    if isinstance(token_chunks, ClaimLayout) and labels is None:
        if token_chunks.labels is None:
            raise ValueError("score() needs labels: pass them, or build the ClaimLayout with labels=")
    elif labels is None:
        raise ValueError("score() needs labels (one per chunk, -1 hallucinated / +1 correct)")
    check_bootstrap(n_bootstrap)
    flat, layout = _layout_and_scores(
        token_scores, token_chunks, labels, stopword_mask,
        drop_last_chunk=drop_last_chunk, confidence=confidence, sample_ids=sample_ids,
    )
    claims = aggregate_flat(flat, layout, aggregator=aggregator, stopwords=stopwords)
    check_finite_claims(claims, layout, f"the {aggregator!r} aggregator")
    result = _score_layout(claims, layout, by, n_bootstrap=n_bootstrap, confidence_level=confidence_level,
                           random_state=random_state)
    result.update(aggregator=aggregator, stopwords=stopwords)
    return result


def score_claims(
    claim_scores: Any,
    token_chunks: Any,
    labels: Any = None,
    *,
    drop_last_chunk: bool = True,
    by: Mapping[str, Sequence[Any]] | None = None,
    n_bootstrap: int = 0,
    confidence_level: float = 0.95,
    random_state: int | None = 0,
    sample_ids: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Claim-level detection metrics of methods that score claims directly (P(True), sampling, judges).

    Parameters
    ----------
    claim_scores : sequence of length n_samples of 1-D float sequences, or ndarray of shape (n_claims,)
        Per sample, **one score per chunk of** ``token_chunks`` (EOS claim included, like ``labels``; its value is
        ignored when ``drop_last_chunk``), higher = more likely hallucinated. With a :class:`ClaimLayout` as
        ``token_chunks``, a flat array over the layout's evaluated claims is accepted too.
    token_chunks : sequence of length n_samples of lists of int lists, or ClaimLayout
        The claims (only their number per sample is used, and their labels).
    labels, drop_last_chunk, by, n_bootstrap, confidence_level, random_state, sample_ids
        As in :func:`score`.

    Returns
    -------
    dict
        The same keys as :func:`score` (without ``aggregator`` / ``stopwords``), and ``level="claim"``.
    """
    check_bootstrap(n_bootstrap)
    if isinstance(token_chunks, ClaimLayout):
        layout = token_chunks
        if labels is not None:
            raise ValueError("labels are part of a ClaimLayout; pass them to claim_layout()")
    else:
        if labels is None:
            raise ValueError("score_claims() needs labels (one per chunk, -1 hallucinated / +1 correct)")
        n_tokens = [sum(len(chunk) for chunk in chunks) for chunks in token_chunks]
        layout = claim_layout(token_chunks, n_tokens, labels=labels, drop_last_chunk=drop_last_chunk,
                              sample_ids=sample_ids)
    if layout.labels is None:
        raise ValueError("score_claims() needs labels: build the ClaimLayout with labels=")
    if isinstance(claim_scores, np.ndarray) and claim_scores.ndim == 1 and len(claim_scores) == layout.n_claims \
            and isinstance(token_chunks, ClaimLayout):
        claims = np.asarray(claim_scores, dtype=np.float64)
    else:
        per_chunk, offsets = flatten_scores(claim_scores, sample_ids=layout.sample_ids)
        n_chunks = np.diff(layout.chunk_offsets)
        if len(offsets) - 1 != layout.n_samples:
            raise ValueError(f"claim_scores has {len(offsets) - 1} samples but token_chunks has {layout.n_samples}")
        wrong = np.flatnonzero(np.diff(offsets) != n_chunks)
        if wrong.size:
            bad = int(wrong[0])
            raise ValueError(f"sample {layout.name(bad)}: claim_scores has {int(np.diff(offsets)[bad])} values but "
                             f"token_chunks has {int(n_chunks[bad])} chunks (one score per chunk, EOS claim included)")
        claims = per_chunk[layout.kept_chunks]
    check_finite_claims(claims, layout, "claim_scores")
    result = _score_layout(claims, layout, by, n_bootstrap=n_bootstrap, confidence_level=confidence_level,
                           random_state=random_state)
    result["level"] = "claim"
    return result


def compare(
    token_scores_a: Any,
    token_scores_b: Any,
    token_chunks: Any,
    labels: Any,
    *,
    stopword_mask: Any = None,
    aggregator: str = "product",
    stopwords: str = "null",
    drop_last_chunk: bool = True,
    n_bootstrap: int = 1000,
    confidence_level: float = 0.95,
    random_state: int | None = 0,
    sample_ids: Sequence[str] | None = None,
) -> dict[str, dict[str, Any]]:
    """Paired bootstrap comparison of two methods' token scores on the same samples.

    Returns, per metric of :data:`METRICS`, ``a``, ``b``, ``difference`` (a - b), ``interval`` (percentile
    interval of the difference over ``n_bootstrap`` paired resamples of the samples) and ``p_value`` (two-sided
    bootstrap p-value of no difference, see :func:`much_metric.scoring._bootstrap.paired_bootstrap`).
    """
    check_bootstrap(n_bootstrap)
    flat_a, layout = _layout_and_scores(
        token_scores_a, token_chunks, labels, stopword_mask,
        drop_last_chunk=drop_last_chunk, confidence=False, sample_ids=sample_ids,
    )
    flat_b, offsets_b = flatten_scores(token_scores_b, sample_ids=sample_ids)
    if len(offsets_b) - 1 != layout.n_samples or not np.array_equal(offsets_b, layout.token_offsets):
        lengths_a, lengths_b = np.diff(layout.token_offsets), np.diff(offsets_b)
        if len(lengths_b) != len(lengths_a):
            raise ValueError(f"token_scores_b has {len(lengths_b)} samples but token_scores_a has {len(lengths_a)}")
        bad = int(np.flatnonzero(lengths_a != lengths_b)[0])
        raise ValueError(f"sample {layout.name(bad)}: token_scores_b has {int(lengths_b[bad])} scores but "
                         f"token_scores_a and the chunks have {int(lengths_a[bad])}")
    claims_a = aggregate_flat(flat_a, layout, aggregator=aggregator, stopwords=stopwords)
    claims_b = aggregate_flat(flat_b, layout, aggregator=aggregator, stopwords=stopwords)
    check_finite_claims(claims_a, layout, "token_scores_a")
    check_finite_claims(claims_b, layout, "token_scores_b")
    return paired_bootstrap(
        claims_a, claims_b, layout.labels == HALLUCINATED, layout.claim_sample, layout.n_samples,
        n_resamples=n_bootstrap, confidence_level=confidence_level, random_state=random_state,
    )
