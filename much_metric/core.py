"""The MUCH metric: token scores -> claim scores -> claim-level ROC/PR metrics, with breakdowns and bootstrap.

numpy only (no scikit-learn, torch, datasets or evaluate import). Sign conventions:

* token and claim scores are **uncertainties**: higher = more likely hallucinated (``confidence=True`` converts
  probabilities/confidences ``p`` into uncertainties ``1 - p`` first);
* the positive class of every metric is the hallucinated claim (label ``-1``, :data:`much_dataset.schema.HALLUCINATED`).

Defaults reproduce the reference evaluation (spec 9): the last chunk of every sample (the EOS claim) is dropped,
stopword tokens are *nulled* (score 0, still counted in the claim length) and claims are aggregated with the
noisy-OR ``product``.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from much_dataset.schema import HALLUCINATED, HUMAN_LABELS_0, HUMAN_LABELS_1, MUCH_CONFIGS, NO_HUMAN_LABEL
from much_metric.aggregation import (
    AGGREGATORS,
    STOPWORD_MODES,
    ClaimLayout,
    MuchMetricWarning,
    aggregate_flat,
    claim_layout,
    flatten_scores,
)
from much_metric.bootstrap import bootstrap_intervals, paired_bootstrap
from much_metric.metrics import METRICS, curve_metrics, sort_claims

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
    "compare",
    "select_samples",
]

#: The 8 generation configs of MUCH (spec 2.3): id -> model and sampling temperature, for ``by=`` breakdowns
#: (from :data:`much_dataset.schema.MUCH_CONFIGS`).
MUCH_GENERATION_CONFIGS: dict[str, dict[str, Any]] = {
    config_id: {"model": model, "temperature": temperature}
    for config_id, (model, temperature) in MUCH_CONFIGS.items()
}


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
        With ``s`` the claim's token scores and ``n`` their number (spec 9.3):
        ``product`` = 1 - prod(1 - s) (noisy-OR, reference default), ``mean`` = mean(s), ``max`` = max(s),
        ``geometric`` = 1 - (prod(1 - s) + 1e-5) ** (1 / n). ``product`` and ``geometric`` assume s in [0, 1].
    stopwords : {"null", "exclude"}, default "null"
        ``"null"`` (reference, spec 9.2/11.11; reproduces the paper's numbers): stopword tokens score 0 but still
        count in ``n``, so an all-stopword claim scores 0 (``geometric``: about -1e-5 / n).
        ``"exclude"`` (corrected): stopword tokens are removed from their claim; a claim made only of stopwords
        keeps all its tokens (it would otherwise have no score).
    drop_last_chunk : bool, default True
        Drop each sample's last chunk, the EOS claim (spec 9.1).
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


def _group_values(by: Mapping[str, Sequence[Any]], n_samples: int) -> dict[str, np.ndarray]:
    if not isinstance(by, Mapping):
        raise TypeError("by must map a breakdown name (e.g. 'lang') to one value per sample")
    groups = {}
    for name, values in by.items():
        values = np.asarray(list(values), dtype=object)
        if len(values) != n_samples:
            raise ValueError(f"by[{name!r}] has {len(values)} values but there are {n_samples} samples")
        groups[name] = values
    return groups


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
        none), ``partial_pr_auc_recall_20`` (reference definition, spec 9.4: trapezoid over the PR points with
        recall <= 0.2 including the (0, 1) end point, / 0.2), ``partial_average_precision_recall_20`` (corrected:
        step-wise AP over recall in [0, 0.2], / 0.2), ``n_samples``, ``n_claims``, ``n_hallucinated``,
        ``aggregator``, ``stopwords``; plus ``intervals`` and ``by`` when asked. A metric undefined on the data
        (a single class) is ``nan`` with a :class:`MuchMetricWarning`. See :mod:`much_metric.metrics`.
    """
    if isinstance(token_chunks, ClaimLayout) and labels is None:
        if token_chunks.labels is None:
            raise ValueError("score() needs labels: pass them, or build the ClaimLayout with labels=")
    elif labels is None:
        raise ValueError("score() needs labels (one per chunk, -1 hallucinated / +1 correct)")
    if not isinstance(n_bootstrap, int | np.integer) or n_bootstrap < 0:
        raise ValueError(f"n_bootstrap must be a non-negative integer, got {n_bootstrap!r}")
    flat, layout = _layout_and_scores(
        token_scores, token_chunks, labels, stopword_mask,
        drop_last_chunk=drop_last_chunk, confidence=confidence, sample_ids=sample_ids,
    )
    groups = _group_values(by, layout.n_samples) if by is not None else {}
    claims = aggregate_flat(flat, layout, aggregator=aggregator, stopwords=stopwords)
    hallucinated = layout.labels == HALLUCINATED
    options = dict(n_bootstrap=n_bootstrap, confidence_level=confidence_level, random_state=random_state)
    result = _metrics_of(claims, hallucinated, layout.claim_sample, layout.n_samples, group="all samples", **options)
    result.update(aggregator=aggregator, stopwords=stopwords)
    if groups:
        result["by"] = {}
        for name, values in groups.items():
            per_value = {}
            for value in sorted(set(values.tolist()), key=str):
                members = np.flatnonzero(values == value)
                remap = np.full(layout.n_samples, -1)
                remap[members] = np.arange(len(members))
                in_group = remap[layout.claim_sample] >= 0
                per_value[str(value)] = _metrics_of(
                    claims[in_group], hallucinated[in_group], remap[layout.claim_sample[in_group]], len(members),
                    group=f"{name}={value}", **options,
                )
            result["by"][name] = per_value
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
    bootstrap p-value of no difference, see :func:`much_metric.bootstrap.paired_bootstrap`).
    """
    flat_a, layout = _layout_and_scores(
        token_scores_a, token_chunks, labels, stopword_mask,
        drop_last_chunk=drop_last_chunk, confidence=False, sample_ids=sample_ids,
    )
    flat_b, _ = _layout_and_scores(
        token_scores_b, layout, None, None, drop_last_chunk=drop_last_chunk, confidence=False, sample_ids=sample_ids
    )
    claims_a = aggregate_flat(flat_a, layout, aggregator=aggregator, stopwords=stopwords)
    claims_b = aggregate_flat(flat_b, layout, aggregator=aggregator, stopwords=stopwords)
    return paired_bootstrap(
        claims_a, claims_b, layout.labels == HALLUCINATED, layout.claim_sample, layout.n_samples,
        n_resamples=n_bootstrap, confidence_level=confidence_level, random_state=random_state,
    )


def _is_labelled(values: Any) -> bool:
    return values is not None and list(values) != list(NO_HUMAN_LABEL)


def select_samples(dataset: Any, *, manual: bool | None = None) -> Any:
    """Samples of the reference evaluation modes (spec 9.1); ground truth stays ``labels`` in every mode.

    Parameters
    ----------
    dataset : datasets.Dataset or sequence of row mappings
        Needs the ``human_labels_0`` / ``human_labels_1`` columns.
    manual : bool or None
        ``True`` ("manual", the paper's human-checked benchmark): samples labelled by both annotators **and** on
        which they agree (the test split's agreed samples). ``False`` ("auto"): samples with no human label
        (the 4,673 train samples). ``None``: all samples.

    Returns
    -------
    The selected samples, as ``dataset.select(indices)`` for a ``datasets.Dataset`` or a list of rows otherwise.
    """
    if manual is None:
        return dataset
    if hasattr(dataset, "select") and hasattr(dataset, "column_names"):
        first, second = dataset[HUMAN_LABELS_0], dataset[HUMAN_LABELS_1]
    else:
        first = [row[HUMAN_LABELS_0] for row in dataset]
        second = [row[HUMAN_LABELS_1] for row in dataset]
    keep = []
    for index, (a, b) in enumerate(zip(first, second, strict=True)):
        has_a, has_b = _is_labelled(a), _is_labelled(b)
        if manual and has_a and has_b and list(a) == list(b) or not manual and not has_a and not has_b:
            keep.append(index)
    if hasattr(dataset, "select") and hasattr(dataset, "column_names"):
        return dataset.select(keep)
    return [dataset[i] for i in keep]

