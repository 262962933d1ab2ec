"""Negative log-likelihood of the sampled token (perplexity-style), from the stored probabilities.

``nll_i = -log p(t_i)``, ``t_i`` the sampled token. Aggregated with ``--aggregator mean``, a claim's score is the mean
NLL of its tokens, i.e. the log of the claim's perplexity (Jelinek et al., 1977; as an uncertainty score e.g.
Fomicheva et al., 2020, "Unsupervised Quality Estimation for Neural Machine Translation"; LM-Polygraph's
``Perplexity``). Scores are in ``[0, inf)``: the ``product`` and ``geometric`` aggregators assume [0, 1] and warn.

Clipping (documented, never silent in the number's meaning):

* a sampled token absent from the stored candidates (never in MUCH; possible with another producer) gets the
  row's smallest stored probability, an **upper bound** of its true probability, so its NLL is a lower bound;
* a probability that underflowed to 0 in float32 is clipped to the smallest normal float32 (NLL ~ 87.3).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from much_metric.baselines._arrays import TokenArrays, per_sample
from much_metric.baselines._topk import sampled_probability_or_floor
from much_metric.baselines.registry import Baseline, Requirements

__all__ = ["NLL_FLOOR", "token_nll"]

#: Smallest probability used in the logarithm (the smallest normal float32, the hub's dtype).
NLL_FLOOR = float(np.finfo(np.float32).tiny)


def _nll_flat(arrays: TokenArrays) -> np.ndarray:
    p, _ = sampled_probability_or_floor(arrays)
    return -np.log(np.maximum(p, NLL_FLOOR))


def token_nll(dataset: Any) -> list[np.ndarray]:
    """``-log p(sampled token)`` per token (see the module docstring for the clipping rules).

    Returns
    -------
    list of length n_samples of ndarray of shape (n_tokens_i,)
        Values in [0, -log(NLL_FLOOR)], higher = more uncertain.
    """
    return per_sample(_nll_flat, dataset)


BASELINES = (
    Baseline(
        name="nll", compute=_nll_flat, display="NLL", order=41, requirements=Requirements(top_k=0),
        description="-log p(sampled token); with --aggregator mean = claim log-perplexity (unbounded, not [0, 1])",
    ),
)
