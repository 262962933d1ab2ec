"""Token-to-claim aggregation, vectorised over all samples at once.

All samples' token scores are concatenated into one flat array; claims become segments of a flat gather index, and
every aggregator is one ``np.ufunc.reduceat`` over those segments. There is no per-token Python loop; the only
Python-level iteration flattens the ragged inputs (C-speed ``itertools.chain``, or none for pyarrow columns).

Sign convention: token scores are **uncertainties** (higher = more likely hallucinated), and so are claim scores.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from much_dataset.params import check_param
from much_dataset.schema import LABEL_VALUES, LABELS, STOPWORD_MASK, TOKEN_CHUNKS
from much_metric.scoring._options import (
    AGGREGATOR,
    AGGREGATORS,
    SCORE_TYPE,
    SCORE_TYPES,
    STOPWORD_MODE,
    STOPWORD_MODES,
)
from much_metric.scoring._ragged import flatten_1d, flatten_2d

__all__ = ["AGGREGATORS", "STOPWORD_MODES", "SCORE_TYPES", "ClaimLayout", "claim_layout", "aggregate_flat",
           "MuchMetricWarning", "NO_LABELS_HINT"]

#: Added inside the geometric aggregator's root, as the reference does (docs/reference-behaviour.md#aggregators).
GEOMETRIC_EPS = 1e-5

_TOKEN_SCORES = "token_scores"


class MuchMetricWarning(UserWarning):
    """A metric is undefined on these data (e.g. a group with a single class) and is reported as ``nan``."""


def _id_namer(generation_ids: Sequence[str] | None) -> Callable[[int], str]:
    if generation_ids is None:
        return lambda index: f"#{index}"
    # A too-short generation_ids list is reported by the caller's length check; never an IndexError inside a message.
    return lambda index: (f"#{index} (generation_id={generation_ids[index]!r})" if index < len(generation_ids)
                          else f"#{index}")


@dataclass(frozen=True)
class ClaimLayout:
    """Where every evaluated claim lives in the flattened token arrays.

    Built once by :func:`claim_layout` and reusable across aggregators and methods that share the same samples.

    Attributes
    ----------
    n_samples : int
    token_offsets : ndarray of shape (n_samples + 1,)
        Sample ``i``'s tokens are ``flat[token_offsets[i]:token_offsets[i + 1]]`` in the flattened score array.
    gather : ndarray of shape (n_claim_tokens,)
        Flat token positions of the evaluated claims' tokens, claim after claim.
    claim_offsets : ndarray of shape (n_claims + 1,)
        Claim ``c`` covers ``gather[claim_offsets[c]:claim_offsets[c + 1]]``.
    claim_sample : ndarray of shape (n_claims,)
        Index of the sample each claim belongs to.
    labels : ndarray of shape (n_claims,) or None
        Claim labels (-1 hallucinated, +1 correct) if labels were given.
    stopword : ndarray of shape (n_claim_tokens,) or None
        Stopword flag of each gathered token if a stopword mask was given.
    generation_ids : sequence of str or None
    chunk_offsets : ndarray of shape (n_samples + 1,)
        Sample ``i`` has chunks ``chunk_offsets[i]:chunk_offsets[i + 1]`` among all chunks (EOS claim included).
    kept_chunks : ndarray of shape (n_chunks,), bool
        Which chunks are evaluated claims (False for the dropped EOS claim).
    """

    n_samples: int
    token_offsets: np.ndarray
    gather: np.ndarray
    claim_offsets: np.ndarray
    claim_sample: np.ndarray
    labels: np.ndarray | None
    stopword: np.ndarray | None
    generation_ids: Sequence[str] | None
    chunk_offsets: np.ndarray | None = None
    kept_chunks: np.ndarray | None = None

    @property
    def n_claims(self) -> int:
        return len(self.claim_sample)

    def sample_claim_offsets(self) -> np.ndarray:
        """``(n_samples + 1,)`` offsets of each sample's claims among the evaluated claims."""
        counts = np.bincount(self.claim_sample, minlength=self.n_samples)
        return np.concatenate([[0], np.cumsum(counts)])

    def name(self, index: int) -> str:
        return _id_namer(self.generation_ids)(index)


#: The end of every "no labels" message of the metric: where a split's withheld labels are scored instead.
NO_LABELS_HINT = ("rows without labels are a split whose labels are withheld, scored only by the leaderboard that "
                  "holds its label file (much-leaderboard serve --private-labels FILE): compute the signals with "
                  "`much run --out DIR` and submit DIR as a zip")


def _first_sample(mask: np.ndarray, offsets: np.ndarray) -> int:
    """Sample owning the first True entry of a flat mask laid out by ``offsets``."""
    return int(np.searchsorted(offsets, int(np.flatnonzero(mask)[0]), side="right") - 1)


def _flatten_aligned(
    values: Any,
    counts: np.ndarray,
    *,
    dtype: Any,
    field: str,
    name: Callable[[int], str],
    expected: Callable[[int], str],
) -> np.ndarray:
    """Flatten a per-sample column that must have ``counts[i]`` entries in sample ``i``; the error names the sample
    and the field (``expected(n)`` describes what the entry count should have matched)."""
    if len(values) != len(counts):
        raise ValueError(f"{field!r} has {len(values)} samples but the token scores have {len(counts)}")
    flat, offsets = flatten_1d(values, dtype=dtype, field=field, sample_ids=name)
    found = np.diff(offsets)
    mismatch = found != counts
    if mismatch.any():
        bad = int(np.flatnonzero(mismatch)[0])
        raise ValueError(
            f"sample {name(bad)}: {field!r} has {int(found[bad])} entries but {expected(int(counts[bad]))}"
        )
    return flat


def _coverage_defect(sample_indices: np.ndarray) -> str:
    """What is wrong with one sample's flat chunk indices that are not 0, 1, ..., n-1 (error path only)."""
    counts = np.bincount(sample_indices)
    if (counts > 1).any():
        return f"overlap: token {int(np.flatnonzero(counts > 1)[0])} is in two chunks"
    if (counts == 0).any():
        return f"leave a gap: token {int(np.flatnonzero(counts == 0)[0])} is in no chunk"
    return f"come out of order: token {int(sample_indices[0])} comes first" if sample_indices[0] else \
        f"come out of order at token {int(sample_indices[np.flatnonzero(np.diff(sample_indices) != 1)[0] + 1])}"


def _check_coverage(indices: np.ndarray, token_sample: np.ndarray, n_tokens: np.ndarray,
                    name: Callable[[int], str]) -> None:
    """MUCH's convention: a sample's chunks, in order, cover its token indices 0..n-1 exactly once. So a token
    score list one longer or shorter than the chunks (a kept BOS or prompt token, a missing EOS) is an error, not a
    silent shift of every claim."""
    n_samples = len(n_tokens)
    covered = np.bincount(token_sample, minlength=n_samples)
    starts = np.concatenate([[0], np.cumsum(covered)])[:-1]
    expected = np.arange(len(indices)) - starts[token_sample]
    wrong = np.flatnonzero(indices != expected)
    if wrong.size:
        bad = int(token_sample[int(wrong[0])])
        raise ValueError(
            f"sample {name(bad)}: the chunks of {TOKEN_CHUNKS!r} {_coverage_defect(indices[token_sample == bad])}; "
            "MUCH's chunks are consecutive, in order, and cover every output token exactly once"
        )
    short = np.flatnonzero(covered != n_tokens)
    if short.size:
        bad = int(short[0])
        raise ValueError(
            f"sample {name(bad)}: there are {int(n_tokens[bad])} token scores but {TOKEN_CHUNKS!r} covers "
            f"{int(covered[bad])} tokens; a method must give exactly one score per output token (EOS included, no "
            "BOS or prompt token)"
        )


def claim_layout(
    token_chunks: Any,
    n_tokens: Sequence[int] | np.ndarray,
    *,
    labels: Any = None,
    stopword_mask: Any = None,
    drop_last_chunk: bool = True,
    generation_ids: Sequence[str] | None = None,
) -> ClaimLayout:
    """Validate the claim structure of ``n_samples`` samples and flatten it.

    Parameters
    ----------
    token_chunks : sequence of length n_samples of lists of int lists
        Each sample's claims as lists of consecutive token indices (``token_chunks`` column).
    n_tokens : sequence of int, shape (n_samples,)
        Number of token scores of each sample (output tokens, EOS included).
    labels : sequence of length n_samples of int lists, optional
        One label per chunk: -1 hallucinated, +1 correct.
    stopword_mask : sequence of length n_samples of bool lists, optional
        Per token, whether it is a stopword (``stopword_mask`` column); must have ``n_tokens[i]`` entries.
    drop_last_chunk : bool, default True
        Drop each sample's last chunk (the EOS claim, docs/reference-behaviour.md#evaluation-modes) and its label.
    generation_ids : sequence of str, optional
        ``generation_id`` of each sample, used in error messages.
    """
    name = _id_namer(generation_ids)
    n_tokens = np.asarray(n_tokens, dtype=np.int64)
    n_samples = len(n_tokens)
    if len(token_chunks) != n_samples:
        raise ValueError(f"{TOKEN_CHUNKS!r} has {len(token_chunks)} samples but the token scores have {n_samples}")
    if generation_ids is not None and len(generation_ids) != n_samples:
        raise ValueError(f"generation_ids has {len(generation_ids)} ids but there are {n_samples} samples")
    token_offsets = np.concatenate([[0], np.cumsum(n_tokens)])
    indices, chunk_offsets, sample_offsets = flatten_2d(token_chunks, field=TOKEN_CHUNKS, sample_ids=name)
    n_chunks = np.diff(sample_offsets)
    chunk_len = np.diff(chunk_offsets)
    chunk_sample = np.repeat(np.arange(n_samples), n_chunks)
    if (n_chunks == 0).any():
        raise ValueError(f"sample {name(int(np.flatnonzero(n_chunks == 0)[0]))}: {TOKEN_CHUNKS!r} is empty")
    if (chunk_len == 0).any():
        bad = int(chunk_sample[np.flatnonzero(chunk_len == 0)[0]])
        raise ValueError(f"sample {name(bad)}: {TOKEN_CHUNKS!r} holds an empty chunk")
    token_sample = np.repeat(chunk_sample, chunk_len)
    out_of_range = (indices < 0) | (indices >= n_tokens[token_sample])
    if out_of_range.any():
        first = int(np.flatnonzero(out_of_range)[0])
        bad = int(token_sample[first])
        per_claim = int(n_tokens[bad]) in (int(n_chunks[bad]), int(n_chunks[bad]) - 1)
        raise ValueError(
            f"sample {name(bad)}: {TOKEN_CHUNKS!r} refers to token {int(indices[first])}, out of range for its "
            f"{int(n_tokens[bad])} token scores"
            + (f" (it has one score per claim, {int(n_chunks[bad])} chunks: claim scores go to "
               "much_metric.score_claims, not score)" if per_claim else "")
        )
    # Claims are runs of consecutive indices (docs/reference-behaviour.md#hub-columns); anything else is a corrupt
    # segmentation.
    step = np.diff(indices)
    inner = np.ones(len(indices), dtype=bool)
    inner[chunk_offsets[:-1]] = False  # first token of each chunk has no predecessor inside the chunk
    not_consecutive = inner[1:] & (step != 1)
    if not_consecutive.any():
        bad = int(token_sample[np.flatnonzero(not_consecutive)[0] + 1])
        raise ValueError(f"sample {name(bad)}: a chunk of {TOKEN_CHUNKS!r} is not a run of consecutive token indices")
    _check_coverage(indices, token_sample, n_tokens, name)

    keep = np.ones(len(chunk_len), dtype=bool)
    if drop_last_chunk:
        keep[sample_offsets[1:] - 1] = False

    claim_labels = None
    if labels is not None:
        absent = [index for index, value in enumerate(labels) if value is None]
        if absent:
            raise ValueError(f"sample {name(absent[0])}: no {LABELS!r} ({len(absent)} of {len(labels)} samples have "
                             f"None); {NO_LABELS_HINT}")
        flat_labels = _flatten_aligned(labels, n_chunks, dtype=np.float64, field=LABELS, name=name,
                                       expected=lambda n: f"{TOKEN_CHUNKS!r} has {n} chunks")
        invalid = ~np.isin(flat_labels, sorted(LABEL_VALUES))
        if invalid.any():
            bad = int(chunk_sample[np.flatnonzero(invalid)[0]])
            raise ValueError(
                f"sample {name(bad)}: {LABELS!r} must be -1 (hallucinated) or 1 (correct), got "
                f"{flat_labels[np.flatnonzero(invalid)[0]]:g}"
            )
        claim_labels = flat_labels[keep].astype(np.int8)

    kept_len = chunk_len[keep]
    token_keep = np.repeat(keep, chunk_len)
    gather = indices[token_keep] + token_offsets[token_sample[token_keep]]
    claim_offsets = np.concatenate([[0], np.cumsum(kept_len)])

    stopword = None
    if stopword_mask is not None:
        flat_mask = _flatten_aligned(stopword_mask, n_tokens, dtype=bool, field=STOPWORD_MASK, name=name,
                                     expected=lambda n: f"there are {n} token scores")
        stopword = flat_mask[gather]

    return ClaimLayout(
        n_samples=n_samples,
        token_offsets=token_offsets,
        gather=gather,
        claim_offsets=claim_offsets,
        claim_sample=chunk_sample[keep],
        labels=claim_labels,
        stopword=stopword,
        generation_ids=generation_ids,
        chunk_offsets=sample_offsets,
        kept_chunks=keep,
    )


def check_score_type(score_type: Any) -> None:
    check_param("score_type", score_type, SCORE_TYPE)


def _refuse_one_flat_array(token_scores: Any) -> None:
    """One flat array of numbers (a learned detector's ``token_scores``, every sample's tokens end to end) where one
    array per sample is expected: say how to split it, not "sample #0 must be a 1-D sequence"."""
    first = token_scores[0] if isinstance(token_scores, (list, tuple)) and len(token_scores) else None
    flat_array = isinstance(token_scores, np.ndarray) and token_scores.ndim == 1 and token_scores.dtype.kind in "fiub"
    if flat_array or isinstance(first, (int, float, np.number)):
        raise ValueError(f"{_TOKEN_SCORES!r} is one flat sequence of {len(token_scores)} numbers; one sequence per "
                         "sample is expected (its output tokens' scores): split a flat array by the samples' token "
                         "counts, e.g. much_metric.baselines.token_arrays(split).split(scores) (Detector.token_scores "
                         "returns the flat array; Detector.sample_scores one array per sample); one score per claim "
                         "goes to much_metric.score_claims")


def flatten_scores(token_scores: Any, *, score_type: str = "uncertainty",
                   generation_ids: Sequence[str] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Concatenate per-sample scores into one float64 array of uncertainties; check they are finite (and in [0, 1]
    for ``score_type="confidence"``, then converted to ``1 - p``). Returns ``(flat, offsets)``."""
    check_score_type(score_type)
    name = _id_namer(generation_ids)
    _refuse_one_flat_array(token_scores)
    flat, offsets = flatten_1d(token_scores, dtype=np.float64, field=_TOKEN_SCORES, sample_ids=name)
    bad = ~np.isfinite(flat)
    if bad.any():
        sample = _first_sample(bad, offsets)
        position = int(np.flatnonzero(bad)[0] - offsets[sample])
        raise ValueError(
            f"sample {name(sample)}: {_TOKEN_SCORES!r} has a non-finite value ({flat[offsets[sample] + position]}) "
            f"at token {position}"
        )
    if score_type == "confidence":
        outside = (flat < 0) | (flat > 1)
        if outside.any():
            sample = _first_sample(outside, offsets)
            raise ValueError(
                f"sample {name(sample)}: with score_type='confidence', {_TOKEN_SCORES!r} must be probabilities in [0, "
                "1]"
            )
        flat = 1.0 - flat
    return flat, offsets


def aggregate_flat(
    flat_scores: np.ndarray,
    layout: ClaimLayout,
    *,
    aggregator: str = "product",
    stopword_handling: str = "null",
) -> np.ndarray:
    """Aggregate flattened token uncertainties into one uncertainty per evaluated claim, shape ``(n_claims,)``.

    See :func:`much_metric.scoring._api.aggregate_claims` for the formulas.
    """
    check_param("aggregator", aggregator, AGGREGATOR)
    check_param("stopword_handling", stopword_handling, STOPWORD_MODE)
    if layout.n_claims == 0:
        return np.zeros(0, dtype=np.float64)
    values = flat_scores[layout.gather]
    starts = layout.claim_offsets[:-1]
    lengths = np.diff(layout.claim_offsets).astype(np.float64)
    if layout.stopword is not None:
        if stopword_handling == "null":
            values = np.where(layout.stopword, 0.0, values)
        else:
            # Drop stopword tokens, except in claims made only of stopwords, which keep all their tokens
            # (otherwise they would have no score at all).
            content = (~layout.stopword).astype(np.int64)
            n_content = np.add.reduceat(content, starts)
            claim_of_token = np.repeat(np.arange(layout.n_claims), np.diff(layout.claim_offsets))
            keep = (content == 1) | (n_content == 0)[claim_of_token]
            values = values[keep]
            kept = np.where(n_content == 0, np.diff(layout.claim_offsets), n_content)
            starts = np.concatenate([[0], np.cumsum(kept)[:-1]])
            lengths = kept.astype(np.float64)
    if aggregator in ("product", "geometric") and ((values < 0) | (values > 1)).any():
        warnings.warn(
            f"the {aggregator!r} aggregator assumes token uncertainties in [0, 1] (it multiplies 1 - s); "
            "scores outside that range give meaningless claim scores",
            MuchMetricWarning,
            stacklevel=3,
        )
    if aggregator == "max":
        return np.maximum.reduceat(values, starts)
    if aggregator == "mean":
        with np.errstate(over="ignore"):
            means = np.add.reduceat(values, starts) / lengths
        overflow = ~np.isfinite(means)
        if overflow.any():
            # The mean of finite scores is finite, but their sum may overflow (scores near 1e308): re-sum those
            # claims' scores pre-divided by n. Only there, so ordinary claims keep the reference's sum / n bits.
            per_token = values / np.repeat(lengths, np.diff(np.append(starts, len(values))))
            means[overflow] = np.add.reduceat(per_token, starts)[overflow]
        return means
    with np.errstate(over="ignore"):  # only from scores > 1, warned about above; score() rejects the inf
        survival = np.multiply.reduceat(1.0 - values, starts)  # prod(1 - s) per claim
    if aggregator == "product":
        return 1.0 - survival
    with np.errstate(invalid="ignore"):
        # (negative survival only arises from scores > 1, already warned about)
        return 1.0 - np.power(survival + GEOMETRIC_EPS, 1.0 / lengths)
