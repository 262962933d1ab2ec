"""Synthetic tasks with a known answer for the learned detectors (not MUCH data)."""

from __future__ import annotations

import numpy as np

from much_dataset import schema
from much_dataset.synthetic import make_rows


def planted_rows(n_samples: int, *, seed: int = 0, mean_tokens: float = 12.0) -> list[dict]:
    """Rows whose claim labels are planted in one feature only: the rank of the sampled token.

    Every token gets a distribution drawn independently of its claim's label (so Max Likelihood and Token Entropy
    carry no signal); a token of a hallucinated claim is sampled at rank 6 with probability 0.8 (else rank 0), a
    token of a correct claim with probability 0.02.
    """
    rng = np.random.default_rng(seed + 1000)
    rows = make_rows(n_samples, seed=seed, mean_tokens=mean_tokens)
    for row in rows:
        n_tokens = len(row[schema.OUTPUT_TOKENS])
        raw = rng.gamma(1.0, size=(n_tokens, schema.TOP_K)) ** 3.0
        raw = raw / raw.sum(axis=1, keepdims=True) * rng.uniform(0.8, 0.99, size=(n_tokens, 1))
        row[schema.LOGITS_VALUES] = (-np.sort(-raw, axis=1)).astype(np.float32).tolist()
        token_label = np.full(n_tokens, schema.CORRECT)
        for chunk, label in zip(row[schema.TOKEN_CHUNKS], row[schema.LABELS], strict=True):
            token_label[chunk] = label
        odd = rng.random(n_tokens) < np.where(token_label == schema.HALLUCINATED, 0.8, 0.02)
        odd[-1] = False  # EOS
        ids = np.asarray(row[schema.LOGITS_TOKEN_IDS])
        row[schema.OUTPUT_TOKENS] = ids[np.arange(n_tokens), np.where(odd, 6, 0)].tolist()
    return rows
