"""The MUCH metric: token scores -> claim scores -> claim-level ROC/PR metrics, with breakdowns and bootstrap.

numpy only (no scikit-learn, torch, datasets or evaluate import). Sign conventions:

* token and claim scores are **uncertainties**: higher = more likely hallucinated
  (``aggregation=Aggregation(score_type="confidence")`` converts probabilities/confidences ``p`` into uncertainties
  ``1 - p`` first);
* the positive class of every metric is the hallucinated claim (label ``-1``, :data:`much_dataset.schema.HALLUCINATED`).

Defaults reproduce the reference evaluation (docs/reference-behaviour.md#evaluation): the last chunk of every sample
(the EOS claim) is dropped,
stopword tokens are *nulled* (score 0, still counted in the claim length) and claims are aggregated with the
noisy-OR ``product``: the defaults of :class:`~much_metric.scoring.Aggregation`, passed as ``aggregation=``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np

from much_dataset.schema import HALLUCINATED, MUCH_GENERATION_CONFIGS
from much_dataset.selection import select_samples
from much_metric.scoring._aggregation import (
    AGGREGATORS,
    NO_LABELS_HINT,
    STOPWORD_MODES,
    ClaimLayout,
    MuchMetricWarning,
    check_score_type,
    claim_layout,
    flatten_scores,
)
from much_metric.scoring._bootstrap import Bootstrap, paired_bootstrap
from much_metric.scoring._checks import check_bootstrap, check_finite_claims
from much_metric.scoring._comparison import Comparison
from much_metric.scoring._options import Aggregation, as_aggregation
from much_metric.scoring._ranking import METRICS
from much_metric.scoring._result import ScoreResult
from much_metric.scoring._steps import (
    MissingStopwordMaskWarning,
    aggregate_with,
    flat_confidences_to_uncertainties,
    layout_and_scores,
    score_layout,
    warn_missing_mask,
)

__all__ = [
    "AGGREGATORS",
    "Aggregation",
    "STOPWORD_MODES",
    "METRICS",
    "MUCH_GENERATION_CONFIGS",
    "ClaimLayout",
    "MissingStopwordMaskWarning",
    "MuchMetricWarning",
    "aggregate_claims",
    "claim_layout",
    "score",
    "score_claims",
    "compare",
    "select_samples",
]


def aggregate_claims(
    token_scores: Any,
    token_chunks: Any,
    stopword_mask: Any = None,
    *,
    aggregation: Aggregation | str = "product",
    generation_ids: Sequence[str] | None = None,
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
        Per token, whether it is a stopword (``stopword_mask`` column). Without it no token is a stopword
        (:func:`score` and :func:`compare` then warn with :class:`MissingStopwordMaskWarning`: the reference
        evaluation needs the mask).
    aggregation : Aggregation or str, default "product"
        How token scores become claim scores: the aggregator (``product`` = 1 - prod(1 - s), the reference's
        noisy-OR; ``mean``; ``max``; ``geometric``), the stopword rule (``"null"``, reference, or ``"exclude"``),
        whether the EOS claim is dropped and whether the scores are uncertainties or confidences: see
        :class:`~much_metric.scoring.Aggregation`. A str is the aggregator name, ``Aggregation(aggregator=name)``.
    generation_ids : sequence of str, optional
        ``generation_id`` of each sample, named in error messages.

    Returns
    -------
    list of length n_samples of ndarray of shape (n_claims_i,)
        Claim uncertainties per sample (higher = more likely hallucinated), the EOS claim excluded by default.

    Examples
    --------
    One answer of four tokens in three chunks (the last, the EOS claim, is dropped); the second claim has two
    tokens:

    >>> from much_metric import aggregate_claims
    >>> scores, chunks = [[0.5, 0.2, 0.5, 0.0]], [[[0], [1, 2], [3]]]
    >>> [claims.tolist() for claims in aggregate_claims(scores, chunks)]  # product: 1 - prod(1 - s)
    [[0.5, 0.6]]
    >>> [claims.tolist() for claims in aggregate_claims(scores, chunks, aggregation="max")]
    [[0.5, 0.5]]
    >>> mask = [[False, False, True, False]]  # token 2 is a stopword: nulled (score 0) by default
    >>> [claims.tolist() for claims in aggregate_claims(scores, chunks, mask, aggregation="mean")]
    [[0.5, 0.1]]
    >>> from much_metric import Aggregation
    >>> excluded = Aggregation(aggregator="mean", stopword_handling="exclude")
    >>> [claims.tolist() for claims in aggregate_claims(scores, chunks, mask, aggregation=excluded)]
    [[0.5, 0.2]]
    >>> confidences = Aggregation(score_type="confidence")
    >>> [claims.tolist() for claims in aggregate_claims([[0.5, 0.8, 0.5, 1.0]], chunks, aggregation=confidences)]
    [[0.5, 0.6]]
    >>> [claims.tolist() for claims in aggregate_claims(scores, chunks, aggregation=Aggregation(drop_last_chunk=False))]
    [[0.5, 0.6, 0.0]]
    >>> aggregate_claims(scores, chunks, aggregation={"aggregator": "max"})
    Traceback (most recent call last):
    ...
    much_dataset.params.InvalidParameterError: aggregate_claims: aggregation must be a much_metric.Aggregation or an aggregator name (one of ('product', 'mean', 'max', 'geometric')), got dict {'aggregator': 'max'} (the options moved into one object: aggregation=Aggregation(aggregator=..., stopword_handling=..., drop_last_chunk=..., score_type=...))
    """  # noqa: E501
    options = as_aggregation(aggregation, "aggregate_claims")
    flat, layout = layout_and_scores(token_scores, token_chunks, None, stopword_mask, options, generation_ids)
    claims = aggregate_with(flat, layout, options)
    return np.split(claims, layout.sample_claim_offsets()[1:-1])


def score(
    token_scores: Any,
    token_chunks: Any,
    labels: Any,
    stopword_mask: Any = None,
    *,
    aggregation: Aggregation | str = "product",
    by: Mapping[str, Sequence[Any]] | None = None,
    bootstrap: Bootstrap | None = None,
    generation_ids: Sequence[str] | None = None,
) -> ScoreResult:
    """Claim-level detection metrics of token scores (positive class = hallucinated claim, label -1).

    Parameters
    ----------
    token_scores, token_chunks, stopword_mask, aggregation
        As in :func:`aggregate_claims`.
    generation_ids
        As in :func:`aggregate_claims`.
    labels : sequence of length n_samples of int sequences, or None with a ClaimLayout
        One label per chunk (EOS claim included): -1 hallucinated, +1 correct.
    by : mapping of str to sequence of length n_samples, optional
        Breakdowns, e.g. ``{"lang": ds["lang"], "generation_config": ds["generation_config"]}``: the result gets
        ``result.by[name][value]``, the same result computed on the samples of each value. (Cross two keys by
        passing one combined key per sample.)
    bootstrap : Bootstrap or None, default None
        With a :class:`Bootstrap`, ``result.intervals[metric] = (low, high)``: percentile interval at
        ``bootstrap.confidence_level`` over ``bootstrap.n_resamples`` resamples of the **samples** (all claims of a
        drawn sample move together), seeded by ``bootstrap.random_state``; also for every group. ``None``: no
        intervals.

    Returns
    -------
    ScoreResult
        A frozen dataclass (``result.to_dict()``: the plain dict) with one field per metric of
        :data:`~much_metric.scoring.METRIC_TABLE`, each higher = better detection:
        ``roc_auc``, ``pr_auc`` (trapezoid over the precision-recall curve including its (0, 1) end point, as the
        reference), ``average_precision``, ``tpr_at_fpr_10`` (largest TPR over thresholds with FPR <= 0.10, no
        interpolation), ``recall_at_precision_80`` (largest recall over thresholds with precision >= 0.80, no
        interpolation; 0 if none), ``partial_pr_auc_recall_20`` (reference definition: trapezoid over the PR points
        with recall <= 0.2 including the (0, 1) end point, / 0.2), ``partial_average_precision_recall_20``
        (corrected: step-wise AP over recall in [0, 0.2], / 0.2), ``prr`` (prediction-rejection ratio, 1 = oracle,
        0 = random) and ``prr_50`` (PRR up to 50 % rejected); then ``n_samples``, ``n_claims``,
        ``n_hallucinated``, ``level="token"``, ``aggregator``, ``stopword_handling``, ``intervals`` (or None) and
        ``by`` (or None). A metric undefined on the data (a single class) is ``nan`` with a
        :class:`MuchMetricWarning`.

    Examples
    --------
    Two answers of three chunks each; the last chunk is the EOS claim (dropped). The hallucinated claims (-1) get
    the higher uncertainties, so the ranking is perfect:

    >>> from much_metric import score
    >>> from much_metric.scoring import Bootstrap
    >>> result = score(
    ...     [[0.9, 0.1, 0.0], [0.2, 0.7, 0.6, 0.0]],      # one uncertainty per output token (EOS included)
    ...     [[[0], [1], [2]], [[0], [1, 2], [3]]],          # claims as runs of token indices
    ...     [[-1, 1, 1], [1, -1, 1]],                       # one label per chunk: -1 hallucinated, +1 correct
    ... )
    >>> result.roc_auc, result.n_claims, result.n_hallucinated
    (1.0, 4, 2)
    >>> round(score([[0.9, 0.1, 0.0], [0.2, 0.7, 0.6, 0.0]], [[[0], [1], [2]], [[0], [1, 2], [3]]],
    ...             [[-1, 1, 1], [1, -1, 1]], aggregation="mean").pr_auc, 4)
    1.0

    The options of the aggregation travel together in an :class:`~much_metric.scoring.Aggregation`; here the
    EOS claim is kept and counts as a correct claim:

    >>> from much_metric import Aggregation
    >>> kept = score([[0.9, 0.1, 0.0], [0.2, 0.7, 0.6, 0.0]], [[[0], [1], [2]], [[0], [1, 2], [3]]],
    ...              [[-1, 1, 1], [1, -1, 1]], aggregation=Aggregation(aggregator="max", drop_last_chunk=False))
    >>> kept.n_claims, kept.aggregator, kept.roc_auc
    (6, 'max', 1.0)
    >>> result.to_dict()["aggregator"], sorted(result.metrics)[:3]
    ('product', ['average_precision', 'partial_average_precision_recall_20', 'partial_pr_auc_recall_20'])
    >>> with_intervals = score([[0.9, 0.1, 0.0], [0.2, 0.7, 0.6, 0.0]], [[[0], [1], [2]], [[0], [1, 2], [3]]],
    ...                        [[-1, 1, 1], [1, -1, 1]], bootstrap=Bootstrap(n_resamples=50))
    >>> sorted(with_intervals.intervals) == sorted(with_intervals.metrics)
    True
    """
    if isinstance(token_chunks, ClaimLayout) and labels is None:
        if token_chunks.labels is None:
            raise ValueError("score() needs labels: pass them, or build the ClaimLayout with labels=")
    elif labels is None:
        raise ValueError(f"score() needs labels (one per chunk, -1 hallucinated / +1 correct); {NO_LABELS_HINT}")
    options = as_aggregation(aggregation, "score")
    check_bootstrap(bootstrap)
    if stopword_mask is None and not isinstance(token_chunks, ClaimLayout):
        warn_missing_mask("score")
    flat, layout = layout_and_scores(token_scores, token_chunks, labels, stopword_mask, options, generation_ids)
    claims = aggregate_with(flat, layout, options)
    check_finite_claims(claims, layout, f"the {options.aggregator!r} aggregator")
    return score_layout(claims, layout, by, bootstrap=bootstrap, level="token", aggregator=options.aggregator,
                         stopword_handling=options.stopword_handling)


def score_claims(
    claim_scores: Any,
    token_chunks: Any,
    labels: Any = None,
    *,
    drop_last_chunk: bool = True,
    score_type: Literal["uncertainty", "confidence"] = "uncertainty",
    by: Mapping[str, Sequence[Any]] | None = None,
    bootstrap: Bootstrap | None = None,
    generation_ids: Sequence[str] | None = None,
) -> ScoreResult:
    """Claim-level detection metrics of methods that score claims directly (P(True), sampling, judges).

    Parameters
    ----------
    claim_scores : sequence of length n_samples of 1-D float sequences, or ndarray of shape (n_claims,)
        Per sample, **one score per chunk of** ``token_chunks`` (EOS claim included, like ``labels``; its value is
        ignored when ``drop_last_chunk``), higher = more likely hallucinated. With a :class:`ClaimLayout` as
        ``token_chunks``, a flat array over the layout's evaluated claims is accepted too.
    token_chunks : sequence of length n_samples of lists of int lists, or ClaimLayout
        The claims (only their number per sample is used, and their labels).
    score_type : {"uncertainty", "confidence"}, default "uncertainty"
        ``"confidence"``: ``claim_scores`` are confidences in [0, 1] (e.g. P(True)), converted to ``1 - p``
        (values outside [0, 1] are an error). Token-level options (aggregator, stopword handling) do not exist here:
        the claims are scored as given.
    drop_last_chunk : bool, default True
        Drop each sample's last chunk, the EOS claim, as ``Aggregation.drop_last_chunk`` does for :func:`score`.
        (Nothing is aggregated here, so these two options are plain keywords, not an
        :class:`~much_metric.scoring.Aggregation`.)
    labels, by, bootstrap, generation_ids
        As in :func:`score`.

    Returns
    -------
    ScoreResult
        As :func:`score`, with ``level="claim"`` and ``aggregator`` / ``stopword_handling`` None.

    Examples
    --------
    Two answers, one score per chunk (the EOS claim's score is ignored): a judge's P(hallucinated) ...

    >>> from much_metric import score_claims
    >>> chunks = [[[0], [1], [2]], [[0], [1, 2], [3]]]
    >>> labels = [[-1, 1, 1], [1, -1, 1]]
    >>> result = score_claims([[0.8, 0.3, 0.0], [0.4, 0.6, 0.0]], chunks, labels)
    >>> result.roc_auc, result.n_claims, result.level, result.aggregator
    (1.0, 4, 'claim', None)

    ... or P(True), a confidence: ``1 - p`` is scored.

    >>> score_claims([[0.2, 0.7, 1.0], [0.9, 0.8, 1.0]], chunks, labels, score_type="confidence").roc_auc
    0.75
    """
    check_bootstrap(bootstrap)
    if isinstance(token_chunks, ClaimLayout):
        layout = token_chunks
        if labels is not None:
            raise ValueError("labels are part of a ClaimLayout; pass them to claim_layout()")
    else:
        if labels is None:
            raise ValueError(f"score_claims() needs labels (one per chunk, -1 hallucinated / +1 correct); "
                             f"{NO_LABELS_HINT}")
        n_tokens = [sum(len(chunk) for chunk in chunks) for chunks in token_chunks]
        layout = claim_layout(token_chunks, n_tokens, labels=labels, drop_last_chunk=drop_last_chunk,
                              generation_ids=generation_ids)
    if layout.labels is None:
        raise ValueError("score_claims() needs labels: build the ClaimLayout with labels=")
    if isinstance(claim_scores, np.ndarray) and claim_scores.ndim == 1 and len(claim_scores) == layout.n_claims \
            and isinstance(token_chunks, ClaimLayout):
        claims = np.asarray(claim_scores, dtype=np.float64)
        check_score_type(score_type)
        if score_type == "confidence":
            claims = flat_confidences_to_uncertainties(claims, layout)
    else:
        per_chunk, offsets = flatten_scores(claim_scores, score_type=score_type, generation_ids=layout.generation_ids)
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
    return score_layout(claims, layout, by, bootstrap=bootstrap, level="claim")


def compare(
    token_scores_a: Any,
    token_scores_b: Any,
    token_chunks: Any,
    labels: Any,
    stopword_mask: Any = None,
    *,
    aggregation: Aggregation | str = "product",
    bootstrap: Bootstrap = Bootstrap(),
    generation_ids: Sequence[str] | None = None,
) -> Comparison:
    """Paired bootstrap comparison of two methods' token scores on the same samples.

    Returns a frozen :class:`~much_metric.scoring.Comparison`: per metric of :data:`METRICS` (a mapping, and an
    attribute), ``a``, ``b``, ``difference`` (a - b), ``interval`` (percentile
    interval of the difference over ``bootstrap.n_resamples`` paired resamples of the samples) and ``p_value``
    (two-sided bootstrap p-value of no difference, see :func:`much_metric.scoring._bootstrap.paired_bootstrap`). Both
    methods' scores are of one kind and aggregated alike (``aggregation``, as in :func:`score`;
    ``Aggregation(score_type="confidence")`` converts both to ``1 - p``); the other options are as in :func:`score`.

    Examples
    --------
    >>> from much_metric.scoring import Bootstrap, compare
    >>> sharp = [[0.9, 0.1, 0.0], [0.2, 0.7, 0.0], [0.8, 0.3, 0.0], [0.1, 0.9, 0.0]]
    >>> vague = [[0.5, 0.5, 0.0], [0.5, 0.5, 0.0], [0.4, 0.6, 0.0], [0.6, 0.4, 0.0]]
    >>> chunks = [[[0], [1], [2]]] * 4                  # three one-token claims per sample, the last one EOS
    >>> labels = [[-1, 1, 1], [1, -1, 1], [-1, 1, 1], [1, -1, 1]]
    >>> result = compare(sharp, vague, chunks, labels, bootstrap=Bootstrap(n_resamples=200, random_state=0))
    >>> result.roc_auc.a, result.roc_auc.b, result.roc_auc.difference
    (1.0, 0.125, 0.875)
    >>> result["roc_auc"]["interval"], result.roc_auc.p_value < 0.05
    ((0.5, 1.0), True)
    >>> from much_metric import Aggregation
    >>> kept = compare(sharp, vague, chunks, labels, aggregation=Aggregation(aggregator="max", drop_last_chunk=False),
    ...                bootstrap=Bootstrap(n_resamples=200, random_state=0))
    >>> kept.roc_auc.a, kept.roc_auc.b
    (1.0, 0.5625)
    """
    options = as_aggregation(aggregation, "compare")
    check_bootstrap(bootstrap, required=True)
    if stopword_mask is None and not isinstance(token_chunks, ClaimLayout):
        warn_missing_mask("compare")
    flat_a, layout = layout_and_scores(token_scores_a, token_chunks, labels, stopword_mask, options, generation_ids)
    flat_b, offsets_b = flatten_scores(token_scores_b, score_type=options.score_type, generation_ids=generation_ids)
    if len(offsets_b) - 1 != layout.n_samples or not np.array_equal(offsets_b, layout.token_offsets):
        lengths_a, lengths_b = np.diff(layout.token_offsets), np.diff(offsets_b)
        if len(lengths_b) != len(lengths_a):
            raise ValueError(f"token_scores_b has {len(lengths_b)} samples but token_scores_a has {len(lengths_a)}")
        bad = int(np.flatnonzero(lengths_a != lengths_b)[0])
        raise ValueError(f"sample {layout.name(bad)}: token_scores_b has {int(lengths_b[bad])} scores but "
                         f"token_scores_a and the chunks have {int(lengths_a[bad])}")
    claims_a = aggregate_with(flat_a, layout, options)
    claims_b = aggregate_with(flat_b, layout, options)
    check_finite_claims(claims_a, layout, "token_scores_a")
    check_finite_claims(claims_b, layout, "token_scores_b")
    return Comparison.from_dict(paired_bootstrap(
        claims_a, claims_b, layout.labels == HALLUCINATED, layout.claim_sample, layout.n_samples,
        n_resamples=bootstrap.n_resamples, confidence_level=bootstrap.confidence_level,
        random_state=bootstrap.random_state,
    ))
