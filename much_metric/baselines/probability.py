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

from much_dataset.schema import LOGITS_TOKEN_IDS, OUTPUT_TOKENS, TOP_K
from much_metric.baselines._arrays import TokenArrays, token_arrays
from much_metric.baselines.registry import Baseline

__all__ = [
    "MISSING_RULES",
    "sampled_token_probability",
    "token_likelihood",
    "max_likelihood",
    "token_entropy",
]

#: What to do when a sampled token is not among its stored candidates: ``"raise"`` or ``"nan"``.
MISSING_RULES = ("raise", "nan")


def _check_missing(missing: str) -> None:
    if missing not in MISSING_RULES:
        raise ValueError(f"missing must be one of {MISSING_RULES}, got {missing!r}")


def sampled_rank(arrays: TokenArrays, *, missing: str = "raise") -> np.ndarray:
    """Column of each sampled token among its candidates, shape (N_tokens,); -1 where absent (``missing="nan"``).

    If a candidate id occurs twice in a row (never in MUCH), the first occurrence (highest probability) is used.
    """
    _check_missing(missing)
    match = arrays.candidate_ids == arrays.output_tokens[:, None]
    found = match.any(axis=1)
    rank = np.where(found, match.argmax(axis=1), -1)
    if missing == "raise" and not found.all():
        token = int(np.flatnonzero(~found)[0])
        raise ValueError(
            f"{arrays.where(token)}: the sampled token id {int(arrays.output_tokens[token])} ({OUTPUT_TOKENS!r}) is "
            f"not among the {arrays.candidate_ids.shape[1]} stored candidates ({LOGITS_TOKEN_IDS!r}); pass "
            "missing='nan' to score such tokens nan"
        )
    return rank


def _sampled_probability_flat(arrays: TokenArrays, *, missing: str = "raise") -> np.ndarray:
    rank = sampled_rank(arrays, missing=missing)
    probability = arrays.probabilities[np.arange(arrays.n_tokens), np.maximum(rank, 0)]
    return np.where(rank >= 0, probability, np.nan)


def _token_likelihood_flat(arrays: TokenArrays, *, missing: str = "raise") -> np.ndarray:
    return 1.0 - _sampled_probability_flat(arrays, missing=missing)


def _max_likelihood_flat(arrays: TokenArrays) -> np.ndarray:
    # max rather than column 0: correct even if a producer did not sort the candidates.
    return 1.0 - arrays.probabilities.max(axis=1)


def _check_delta(delta: Any, width: int) -> int:
    if isinstance(delta, bool) or not isinstance(delta, int | np.integer) or not 2 <= delta <= width:
        raise ValueError(f"delta must be an integer in [2, {width}] (the number of stored candidates), got {delta!r}")
    return int(delta)


def _top_delta(probabilities: np.ndarray, delta: int) -> np.ndarray:
    """The ``delta`` largest probabilities of each row, shape (N, delta)."""
    if delta == probabilities.shape[1]:
        return probabilities
    if probabilities.shape[0] and np.all(probabilities[:, :-1] >= probabilities[:, 1:]):
        return probabilities[:, :delta]  # MUCH rows are sorted: the cheap path
    return -np.sort(-probabilities, axis=1)[:, :delta]


def _token_entropy_flat(arrays: TokenArrays, *, delta: int = 24) -> np.ndarray:
    delta = _check_delta(delta, arrays.probabilities.shape[1])
    top = _top_delta(arrays.probabilities, delta)
    total = top.sum(axis=1, keepdims=True)
    if (empty := np.flatnonzero(total[:, 0] <= 0)).size:
        raise ValueError(f"{arrays.where(int(empty[0]))}: the top-{delta} probabilities sum to 0; entropy undefined")
    q = top / total
    # 0 * log 0 = 0 (float32 probabilities can underflow to 0); masking after is 5x faster than two np.where.
    with np.errstate(divide="ignore", invalid="ignore"):
        plogp = q * np.log(q)
    plogp[q == 0] = 0.0
    return -plogp.sum(axis=1) / np.log(delta)


def sampled_token_probability(data: Any, *, missing: str = "raise") -> list[np.ndarray]:
    """Probability of the generated token at each step (a confidence: higher = more certain).

    Parameters
    ----------
    data : datasets.Dataset, pyarrow.Table, list of rows or TokenArrays
        A MUCH split (``output_tokens``, ``logits_token_ids``, ``logits_values``).
    missing : {"raise", "nan"}, default "raise"
        The sampled token is always among the 24 candidates in MUCH. Elsewhere (another producer, a truncated
        candidate list), ``"raise"`` fails with the sample's ``generation_id`` and the token index, ``"nan"``
        gives ``nan`` for that token (which the metric then rejects unless you replace it).

    Returns
    -------
    list of length n_samples of ndarray of shape (n_tokens_i,)
    """
    arrays = token_arrays(data)
    return arrays.split(_sampled_probability_flat(arrays, missing=missing))


def token_likelihood(data: Any, *, missing: str = "raise") -> list[np.ndarray]:
    """Token Likelihood (Guerreiro et al., 2023): ``1 - p(sampled token)``; reference name ``token_likelihood``.

    Parameters and missing-token rule as in :func:`sampled_token_probability`.

    Returns
    -------
    list of length n_samples of ndarray of shape (n_tokens_i,)
        Values in [0, 1], higher = more uncertain.
    """
    arrays = token_arrays(data)
    return arrays.split(_token_likelihood_flat(arrays, missing=missing))


def max_likelihood(data: Any) -> list[np.ndarray]:
    """Max Likelihood (Aichberger et al., 2024): ``1 - max_c p(c)`` over the stored candidates (= 1 - top-1 p).

    Reference name ``max_likelihood``. Does not depend on which token was sampled.

    Returns
    -------
    list of length n_samples of ndarray of shape (n_tokens_i,)
        Values in [0, 1], higher = more uncertain.
    """
    arrays = token_arrays(data)
    return arrays.split(_max_likelihood_flat(arrays))


def token_entropy(data: Any, *, delta: int = 24) -> list[np.ndarray]:
    """Token Entropy (Malinin and Gales, 2021) of the ``delta`` most likely candidates, normalised.

    The ``delta`` largest probabilities are renormalised to sum to 1; the score is their Shannon entropy in nats
    divided by ``ln(delta)`` (as ``scipy.stats.entropy(top) / log(delta)`` in the reference). Reference name
    ``token_entropy_{delta}``; the paper uses ``delta`` in {5, 10, 24} and reports 24.

    Parameters
    ----------
    data : datasets.Dataset, pyarrow.Table, list of rows or TokenArrays
    delta : int, default 24
        In ``[2, K]`` with K the number of stored candidates (24 in MUCH).

    Returns
    -------
    list of length n_samples of ndarray of shape (n_tokens_i,)
        Values in [0, 1]: 0 = all mass on one candidate, 1 = uniform over the ``delta``; higher = more uncertain.
    """
    arrays = token_arrays(data)
    return arrays.split(_token_entropy_flat(arrays, delta=delta))


BASELINES = (
    Baseline(
        name="max_likelihood", compute=_max_likelihood_flat, display="Max Likelihood", order=30,
        description="1 - the largest stored candidate probability (paper section 5, "
                    "docs/reference-behaviour.md#signals)",
    ),
    Baseline(
        name="token_likelihood", compute=_token_likelihood_flat, display="Token Likelihood", order=40,
        description="1 - the probability of the sampled token (paper section 5, docs/reference-behaviour.md#signals)",
    ),
    Baseline(
        name="token_entropy_{delta}", compute=_token_entropy_flat, display="Token Entropy-{delta}", order=50,
        defaults=("token_entropy_24",), check=lambda params: _check_delta(params["delta"], TOP_K),
        description="entropy of the top-delta probabilities renormalised, / ln(delta) (paper section 5, "
                    "docs/reference-behaviour.md#signals)",
    ),
)
