"""Probability baselines: Token Likelihood, Max Likelihood, Token Entropy (paper section 5,
docs/reference-behaviour.md#signals).

Each function takes a whole split and returns one score per output token (EOS included), per sample; **higher =
more uncertain**. They run on the concatenated ``(N_tokens, K)`` candidate arrays of the split at once (see
:mod:`much_metric.baselines._arrays`): no per-token or per-sample Python loop.

``logits_values`` are already probabilities (temperature-scaled softmax over the full vocabulary, top-K, **not**
renormalised); nothing here re-applies a softmax.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from much_metric.baselines._arrays import TokenArrays, per_sample
from much_metric.baselines._topk import MISSING_RULES, check_delta, check_delta_param, sampled_probability, top_delta
from much_metric.baselines.registry import Baseline, Requirements

__all__ = [
    "MISSING_RULES",
    "sampled_token_probability",
    "token_likelihood",
    "max_likelihood",
    "token_entropy",
]

def _token_likelihood_flat(arrays: TokenArrays, *, missing: str = "raise") -> np.ndarray:
    return 1.0 - sampled_probability(arrays, missing=missing)


def _max_likelihood_flat(arrays: TokenArrays) -> np.ndarray:
    # max rather than column 0: correct even if a producer did not sort the candidates.
    return 1.0 - arrays.probabilities.max(axis=1)


def _token_entropy_flat(arrays: TokenArrays, *, delta: int = 24) -> np.ndarray:
    delta = check_delta(delta, arrays.probabilities.shape[1])
    top = top_delta(arrays.probabilities, delta)
    total = top.sum(axis=1, keepdims=True)
    if (empty := np.flatnonzero(total[:, 0] <= 0)).size:
        raise ValueError(f"{arrays.where(int(empty[0]))}: the top-{delta} probabilities sum to 0; entropy undefined")
    q = top / total
    # 0 * log 0 = 0 (float32 probabilities can underflow to 0); masking after is 5x faster than two np.where.
    with np.errstate(divide="ignore", invalid="ignore"):
        plogp = q * np.log(q)
    plogp[q == 0] = 0.0
    return -plogp.sum(axis=1) / np.log(delta)


def sampled_token_probability(dataset: Any, *, missing: str = "raise") -> list[np.ndarray]:
    """Probability of the generated token at each step (a confidence: higher = more certain).

    Parameters
    ----------
    dataset : datasets.Dataset, pyarrow.Table, list of rows or TokenArrays
        A MUCH split (``output_tokens``, ``logits_token_ids``, ``logits_values``).
    missing : {"raise", "nan"}, default "raise"
        The sampled token is always among the 24 candidates in MUCH. Elsewhere (another producer, a truncated
        candidate list), ``"raise"`` fails with the sample's ``generation_id`` and the token index, ``"nan"``
        gives ``nan`` for that token (which the metric then rejects unless you replace it).

    Returns
    -------
    list of length n_samples of ndarray of shape (n_tokens_i,)
    """
    return per_sample(sampled_probability, dataset, missing=missing)


def token_likelihood(dataset: Any, *, missing: str = "raise") -> list[np.ndarray]:
    """Token Likelihood (Guerreiro et al., 2023): ``1 - p(sampled token)``; reference name ``token_likelihood``.

    Parameters and missing-token rule as in :func:`sampled_token_probability`.

    Returns
    -------
    list of length n_samples of ndarray of shape (n_tokens_i,)
        Values in [0, 1], higher = more uncertain.
    """
    return per_sample(_token_likelihood_flat, dataset, missing=missing)


def max_likelihood(dataset: Any) -> list[np.ndarray]:
    """Max Likelihood (Aichberger et al., 2024): ``1 - max_c p(c)`` over the stored candidates (= 1 - top-1 p).

    Reference name ``max_likelihood``. Does not depend on which token was sampled.

    Returns
    -------
    list of length n_samples of ndarray of shape (n_tokens_i,)
        Values in [0, 1], higher = more uncertain.
    """
    return per_sample(_max_likelihood_flat, dataset)


def token_entropy(dataset: Any, *, delta: int = 24) -> list[np.ndarray]:
    """Token Entropy (Malinin and Gales, 2021) of the ``delta`` most likely candidates, normalised.

    The ``delta`` largest probabilities are renormalised to sum to 1; the score is their Shannon entropy in nats
    divided by ``ln(delta)`` (as ``scipy.stats.entropy(top) / log(delta)`` in the reference). Reference name
    ``token_entropy_{delta}``; the paper uses ``delta`` in {5, 10, 24} and reports 24.

    Parameters
    ----------
    dataset : datasets.Dataset, pyarrow.Table, list of rows or TokenArrays
    delta : int, default 24
        In ``[2, K]`` with K the number of stored candidates (24 in MUCH).

    Returns
    -------
    list of length n_samples of ndarray of shape (n_tokens_i,)
        Values in [0, 1]: 0 = all mass on one candidate, 1 = uniform over the ``delta``; higher = more uncertain.
    """
    return per_sample(_token_entropy_flat, dataset, delta=delta)


BASELINES = (
    Baseline(
        name="max_likelihood", compute=_max_likelihood_flat, display="Max Likelihood", order=30,
        requirements=Requirements(top_k=1),
        description="1 - the largest stored candidate probability (paper section 5, "
                    "docs/reference-behaviour.md#signals)",
    ),
    Baseline(
        name="token_likelihood", compute=_token_likelihood_flat, display="Token Likelihood", order=40,
        requirements=Requirements(top_k=0),
        description="1 - the probability of the sampled token (paper section 5, docs/reference-behaviour.md#signals)",
    ),
    Baseline(
        name="token_entropy_{delta}", compute=_token_entropy_flat, display="Token Entropy-{delta}", order=50,
        defaults=("token_entropy_24",), check=check_delta_param, requirements=Requirements(top_k="delta"),
        description="entropy of the top-delta probabilities renormalised, / ln(delta) (paper section 5, "
                    "docs/reference-behaviour.md#signals)",
    ),
)
