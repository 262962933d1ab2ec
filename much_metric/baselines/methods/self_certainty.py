"""Self-certainty (Kang, Zhao and Song, 2025, "Scalable Best-of-N Selection for Large Language Models via
Self-Certainty", arXiv:2502.18581), approximated on the top ``delta`` stored candidates.

Kang et al. score a token by ``KL(U || p) = -(1/V) sum_v log p_v - log V``, the divergence of the next-token
distribution ``p`` over the vocabulary (size V) from the uniform one: large = peaked = confident. MUCH stores only
the 24 most likely probabilities, so here ``p`` is replaced by ``q``, the top ``delta`` renormalised:

    ``KL_delta = -(1/delta) sum_{k <= delta} log q_k - log delta``  and the score  ``exp(-KL_delta) = delta *
    geometric_mean(q)``

What the approximation changes: over the full vocabulary the mean of ``log p_v`` is dominated by the ~10^5 tail
tokens (it measures how low the model pushes the tail); on the top ``delta`` it measures how evenly the mass is
spread among the plausible candidates -- closer to an entropy. ``exp(-KL)`` is a monotone map of LM-Polygraph's
``-KL`` (same ranking per token) into [0, 1] (1 = uniform over the ``delta``, 0 = a candidate of probability 0),
so that the product aggregator applies. Higher = more uncertain.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from much_metric.baselines._arrays import TokenArrays, per_sample
from much_metric.baselines._topk import check_delta_param, renormalised_top
from much_metric.baselines.registry import Baseline, Requirements

__all__ = ["self_certainty"]


def _self_certainty_flat(arrays: TokenArrays, *, delta: int = 24) -> np.ndarray:
    q = renormalised_top(arrays, delta)
    with np.errstate(divide="ignore"):
        mean_log = np.log(q).mean(axis=1)  # -inf where a q_k is 0: the score is then exactly 0
    return np.minimum(q.shape[1] * np.exp(mean_log), 1.0)  # AM-GM: <= 1, up to rounding


def self_certainty(dataset: Any, *, delta: int = 24) -> list[np.ndarray]:
    """``exp(-KL(U_delta || q)) = delta * geometric_mean(q)`` per token, ``q`` the top-``delta`` renormalised.

    Returns
    -------
    list of length n_samples of ndarray of shape (n_tokens_i,)
        Values in [0, 1], higher = more uncertain.
    """
    return per_sample(_self_certainty_flat, dataset, delta=delta)


BASELINES = (
    Baseline(
        name="self_certainty_{delta}", compute=_self_certainty_flat, display="Self-Certainty-{delta}", order=53,
        defaults=("self_certainty_24",), check=check_delta_param, requirements=Requirements(top_k="delta"),
        description="exp(-KL(uniform || top-delta renormalised)) (self-certainty, Kang et al. 2025, on the top delta)",
    ),
)
