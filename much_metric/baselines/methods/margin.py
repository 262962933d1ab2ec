"""Probability margin: ``1 - (p_1 - p_2)``, the gap between the two most likely candidates, as an uncertainty.

Margin sampling (Scheffer, Decomain and Wrobel, 2001, "Active Hidden Markov Models for Information Extraction")
scores a prediction by ``p_1 - p_2``; a small gap means the model hesitates between two continuations. Unlike Max
Likelihood it does not depend on the mass left to the other 22 candidates and the tail. Uses the stored
(not renormalised) probabilities; values in [0, 1], higher = more uncertain. Independent of the sampled token.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from much_metric.baselines._arrays import TokenArrays, per_sample
from much_metric.baselines._topk import top_delta
from much_metric.baselines.registry import Baseline, Requirements

__all__ = ["probability_margin"]


def _margin_flat(arrays: TokenArrays) -> np.ndarray:
    if arrays.probabilities.shape[1] < 2:
        raise ValueError("the probability margin needs at least 2 stored candidates per token")
    top = top_delta(arrays.probabilities, 2)
    return 1.0 - (top[:, 0] - top[:, 1])


def probability_margin(dataset: Any) -> list[np.ndarray]:
    """``1 - (p_1 - p_2)`` per token, p_1 >= p_2 the two largest stored probabilities.

    Returns
    -------
    list of length n_samples of ndarray of shape (n_tokens_i,)
        Values in [0, 1], higher = more uncertain.
    """
    return per_sample(_margin_flat, dataset)


BASELINES = (
    Baseline(
        name="probability_margin", compute=_margin_flat, display="Probability Margin", order=35,
        requirements=Requirements(top_k=2),
        description="1 - (p1 - p2), the two largest candidate probabilities (margin; Scheffer et al. 2001)",
    ),
)
