"""Training data of a detector: standardised per-token inputs, the metric's claim layout, and padded batches.

numpy only. A :class:`Prepared` holds a split's inputs flattened over tokens and the claims exactly as the metric
builds them (:func:`much_metric.scoring.claim_layout`: EOS claim dropped, stopword flags), so that training
aggregates token scores into claims the way :func:`much_metric.scoring.aggregate_flat` does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from much_dataset.schema import GENERATION_ID, HALLUCINATED, LABELS, STOPWORD_MASK, TOKEN_CHUNKS


@dataclass(frozen=True)
class Prepared:
    """One split ready for training.

    inputs : (N_tokens, D) float32, standardised; offsets : (n_samples + 1,); gather : (n_claim_tokens,) flat token
    positions of the claims' tokens, claim after claim; claim_offsets : (n_claims + 1,); claim_sample :
    (n_claims,); stopword : (n_claim_tokens,) bool or None; target : (n_claims,) float32, 1 = hallucinated;
    segments : (N_tokens,) int64 claim id of each token within its sample (the claim head), or None.
    """

    inputs: np.ndarray
    offsets: np.ndarray
    gather: np.ndarray
    claim_offsets: np.ndarray
    claim_sample: np.ndarray
    stopword: np.ndarray | None
    target: np.ndarray
    generation_ids: list[str]
    segments: np.ndarray | None = None

    @property
    def n_samples(self) -> int:
        return len(self.offsets) - 1


@dataclass(frozen=True)
class Batch:
    """Padded inputs of some samples and their claims, indexed into the padded ``(B * T,)`` token scores."""

    inputs: np.ndarray          # (B, T, D) float32, zero-padded
    mask: np.ndarray            # (B, T) bool
    positions: np.ndarray       # (n_claim_tokens,) index into the flattened (B * T) scores
    claim_of: np.ndarray        # (n_claim_tokens,) claim index within the batch
    stopword: np.ndarray | None  # (n_claim_tokens,) bool
    lengths: np.ndarray         # (n_claims,) tokens per claim
    target: np.ndarray          # (n_claims,) float32
    segments: np.ndarray | None = None  # (B, T) int64 claim ids, -1 = padding (claim head only)


def column(dataset: Any, name: str) -> list[Any]:
    if hasattr(dataset, "column_names"):
        return list(dataset[name]) if name in dataset.column_names else []
    return [row[name] for row in dataset if name in row]


def prepare(dataset: Any, inputs: np.ndarray, mean: np.ndarray, std: np.ndarray,
            segments: np.ndarray | None = None) -> Prepared:
    """Standardise ``inputs`` (flat over the dataset's tokens) and lay out the claims as the metric does
    (``segments``: each token's claim id, kept for the claim head)."""
    from much_metric.baselines import token_arrays
    from much_metric.scoring import claim_layout

    arrays = token_arrays(dataset)
    if inputs.shape[0] != arrays.n_tokens:
        raise ValueError(f"inputs have {inputs.shape[0]} rows for {arrays.n_tokens} tokens")
    masks = column(dataset, STOPWORD_MASK)
    stopword_mask = masks if masks and all(m is not None for m in masks) else None
    layout = claim_layout(column(dataset, TOKEN_CHUNKS), np.diff(arrays.offsets), labels=column(dataset, LABELS),
                          stopword_mask=stopword_mask, generation_ids=column(dataset, GENERATION_ID))
    standardised = ((inputs - mean) / std).astype(np.float32)
    return Prepared(standardised, arrays.offsets, layout.gather, layout.claim_offsets, layout.claim_sample,
                    layout.stopword, (layout.labels == HALLUCINATED).astype(np.float32), list(arrays.generation_ids),
                    segments)


def standardisation(inputs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-column mean and standard deviation (1 where a column is constant), float32."""
    mean = inputs.mean(axis=0)
    std = inputs.std(axis=0)
    return mean.astype(np.float32), np.where(std > 1e-8, std, 1.0).astype(np.float32)


def concatenated_ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenation of ``arange(start, start + length)`` for each pair, without a Python loop."""
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    return np.repeat(starts - offsets[:-1], lengths) + np.arange(offsets[-1])


def batch(data: Prepared, samples: np.ndarray) -> Batch:
    """The padded batch of ``samples`` (indices into ``data``'s samples, in that order)."""
    samples = np.asarray(samples, dtype=np.int64)
    starts = data.offsets[samples]
    n_tokens = data.offsets[samples + 1] - starts
    width = int(n_tokens.max())
    row = np.repeat(np.arange(len(samples)), n_tokens)
    time = np.arange(int(n_tokens.sum())) - np.repeat(np.concatenate([[0], np.cumsum(n_tokens)[:-1]]), n_tokens)
    inputs = np.zeros((len(samples), width, data.inputs.shape[1]), dtype=np.float32)
    inputs[row, time] = data.inputs[concatenated_ranges(starts, n_tokens)]
    mask = np.zeros((len(samples), width), dtype=bool)
    mask[row, time] = True
    segments = None
    if data.segments is not None:
        segments = np.full((len(samples), width), -1, dtype=np.int64)
        segments[row, time] = data.segments[concatenated_ranges(starts, n_tokens)]
    # Claims of these samples (claims are stored sample after sample).
    sample_claims = np.concatenate([[0], np.cumsum(np.bincount(data.claim_sample, minlength=data.n_samples))])
    claim_starts, claim_counts = sample_claims[samples], sample_claims[samples + 1] - sample_claims[samples]
    claims = concatenated_ranges(claim_starts, claim_counts)
    claim_lengths = np.diff(data.claim_offsets)[claims]
    tokens = concatenated_ranges(data.claim_offsets[claims], claim_lengths)  # indices into gather
    flat = data.gather[tokens]
    owner = np.repeat(np.repeat(np.arange(len(samples)), claim_counts), claim_lengths)
    positions = owner * width + (flat - starts[owner])
    return Batch(inputs, mask, positions, np.repeat(np.arange(len(claims)), claim_lengths),
                 None if data.stopword is None else data.stopword[tokens], claim_lengths, data.target[claims],
                 segments)


def batches(data: Prepared, *, batch_size: int, rng: np.random.Generator | None) -> list[np.ndarray]:
    """Sample indices of each batch: shuffled with ``rng`` (None: in order), then grouped by length within
    windows of 20 batches so that a batch pads little."""
    order = np.arange(data.n_samples) if rng is None else rng.permutation(data.n_samples)
    lengths = np.diff(data.offsets)[order]
    window = batch_size * 20
    chunks = [order[start:start + window][np.argsort(lengths[start:start + window], kind="stable")]
              for start in range(0, len(order), window)]
    ordered = np.concatenate(chunks) if chunks else order
    groups = [ordered[start:start + batch_size] for start in range(0, len(ordered), batch_size)]
    if rng is not None:
        groups = [groups[i] for i in rng.permutation(len(groups))]
    return groups
