"""Shared pieces of the baselines computed from the stored top-K probabilities (numpy only).

``logits_values`` are probabilities of the full-vocabulary softmax, truncated to the K = 24 most likely tokens and
**not** renormalised: a row sums to ``1 - tail`` where ``tail`` is the mass of the rest of the vocabulary.
"""

from __future__ import annotations

import numpy as np

from much_metric.baselines._arrays import TokenArrays
from much_metric.baselines.probability import _check_delta, _top_delta, sampled_rank

__all__ = ["renormalised_top", "sampled_probability_or_floor", "xlogx"]


def renormalised_top(arrays: TokenArrays, delta: int) -> np.ndarray:
    """The ``delta`` largest probabilities of each row divided by their sum, shape (N_tokens, delta).

    Raises ValueError naming the sample and token when a row's top-``delta`` mass is 0.
    """
    delta = _check_delta(delta, arrays.probabilities.shape[1])
    top = _top_delta(arrays.probabilities, delta)
    total = top.sum(axis=1, keepdims=True)
    if (empty := np.flatnonzero(total[:, 0] <= 0)).size:
        raise ValueError(f"{arrays.where(int(empty[0]))}: the top-{delta} probabilities sum to 0")
    return top / total


def xlogx(q: np.ndarray) -> np.ndarray:
    """``q * log(q)`` element-wise with ``0 log 0 = 0`` (float32 probabilities can underflow to 0)."""
    return np.where(q > 0, q * np.log(np.where(q > 0, q, 1.0)), 0.0)


def sampled_probability_or_floor(arrays: TokenArrays) -> tuple[np.ndarray, np.ndarray]:
    """(p, found): the sampled token's probability, or -- when it is not among the stored candidates (never in
    MUCH) -- the smallest stored probability of its row, an upper bound of its true probability."""
    rank = sampled_rank(arrays, missing="nan")
    found = rank >= 0
    rows = np.arange(arrays.n_tokens)
    p = np.where(found, arrays.probabilities[rows, np.maximum(rank, 0)], arrays.probabilities.min(axis=1)
                 if arrays.probabilities.shape[1] else 0.0)
    return p, found
