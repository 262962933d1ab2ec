"""Synthetic MUCH-shaped rows for tests and benchmarks. NOT MUCH data.

Every row produced here has ``generation_config == "synthetic"`` and made-up token ids, text and labels. The rows
respect every structural convention of :mod:`much_dataset.schema` (sorted top-24 probabilities that sum to < 1,
sampled token among the candidates, contiguous exhaustive chunks, EOS claim last with label +1), and hallucinated
claims are drawn with flatter distributions so that uncertainty baselines score better than chance.
"""

from __future__ import annotations

import numpy as np

from much_dataset import schema

__all__ = ["SYNTHETIC_CONFIG", "make_rows"]

SYNTHETIC_CONFIG = "synthetic"
_EOS_ID = 2
_VOCAB = 32_000


def _chunk_lengths(rng: np.random.Generator, n_content: int) -> list[int]:
    lengths: list[int] = []
    left = n_content
    while left > 0:
        size = int(min(left, rng.integers(2, 8)))
        lengths.append(size)
        left -= size
    return lengths


def _probabilities(rng: np.random.Generator, n_tokens: int, sharpness: np.ndarray) -> np.ndarray:
    # Larger sharpness = peakier distribution = more confident generator.
    raw = rng.gamma(shape=1.0, size=(n_tokens, schema.TOP_K)) ** sharpness[:, None]
    raw /= raw.sum(axis=1, keepdims=True)
    raw *= rng.uniform(0.80, 0.999, size=(n_tokens, 1))  # top-24 mass < 1, as in MUCH
    return -np.sort(-raw, axis=1).astype(np.float32)


def make_rows(
    n_samples: int,
    *,
    seed: int = 0,
    mean_tokens: float = 21.0,
    with_stopword_mask: bool = True,
) -> list[dict]:
    """``n_samples`` synthetic rows in the hub's list-of-lists layout (see module docstring).

    Token counts are ``max(3, Poisson(mean_tokens - 1)) + 1`` (EOS included); chunks have 2-7 tokens; about 35% of
    content claims are hallucinated (-1).
    """
    rng = np.random.default_rng(seed)
    rows = []
    for index in range(n_samples):
        n_content = max(3, int(rng.poisson(mean_tokens - 1)))
        lengths = _chunk_lengths(rng, n_content)
        claim_labels = np.where(rng.random(len(lengths)) < 0.35, schema.HALLUCINATED, schema.CORRECT)
        token_claim_label = np.repeat(claim_labels, lengths)
        sharpness = np.where(token_claim_label == schema.HALLUCINATED, 2.0, 4.0) + rng.normal(0, 0.7, n_content)
        sharpness = np.append(np.clip(sharpness, 0.5, None), 6.0)  # EOS: confident
        n_tokens = n_content + 1
        probs = _probabilities(rng, n_tokens, sharpness)
        ids = rng.choice(_VOCAB, size=(n_tokens, schema.TOP_K + 4), replace=True)
        ids = np.array([list(dict.fromkeys(r))[: schema.TOP_K] for r in ids], dtype=np.int32)
        ids[-1, 0] = _EOS_ID
        # Sample the emitted token from the renormalised candidates.
        cum = np.cumsum(probs / probs.sum(axis=1, keepdims=True), axis=1)
        ranks = np.minimum((cum < rng.random((n_tokens, 1))).sum(axis=1), schema.TOP_K - 1)
        ranks[-1] = 0
        tokens = ids[np.arange(n_tokens), ranks]
        starts = np.cumsum([0, *lengths])
        chunks = [list(range(int(a), int(b))) for a, b in zip(starts[:-1], starts[1:], strict=True)] + [[n_content]]
        row = {
            schema.GENERATION_ID: f"synthetic-{seed}-{index:06d}",
            schema.GENERATION_CONFIG: SYNTHETIC_CONFIG,
            schema.LANG: schema.LANGUAGES[index % len(schema.LANGUAGES)],
            schema.WIKI_URL: "https://example.org/synthetic",
            schema.PROMPT: f"Synthetic question {index}?",
            schema.OUTPUT: " ".join(f"w{int(t)}" for t in tokens[:-1]) + "</s>",
            schema.OUTPUT_TOKENS: tokens.tolist(),
            schema.LOGITS_TOKEN_IDS: ids.tolist(),
            schema.LOGITS_VALUES: probs.tolist(),
            schema.TOKEN_CHUNKS: chunks,
            schema.LABELS: [*claim_labels.tolist(), schema.CORRECT],
            schema.HUMAN_LABELS_0: list(schema.NO_HUMAN_LABEL),
            schema.HUMAN_LABELS_1: list(schema.NO_HUMAN_LABEL),
        }
        if with_stopword_mask:
            row[schema.STOPWORD_MASK] = (rng.random(n_tokens) < 0.3).tolist()
        rows.append(row)
    return rows
