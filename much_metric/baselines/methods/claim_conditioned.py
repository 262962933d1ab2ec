"""Claim-conditioned probability without an NLI model (variants of CCP, Fadeeva et al., 2024).

CCP (:mod:`much_metric.baselines.methods.ccp`) asks an NLI model, for each of the top-``delta`` candidates ``c``
of a token, whether replacing the sampled token ``t`` by ``c`` keeps the meaning (entailment, mass ``E``), changes it
(contradiction, mass ``C``) or neither; ``CCP = 1 - E / (E + C)``. LM-Polygraph's claim-level CCP additionally
treats function words as entailment. Two model-free variants replace the NLI decision:

* ``ccp_no_nli_{delta}`` -- every candidate other than ``t`` counts as contradiction:
  ``1 - p(t) / (sum_{k <= delta} p_k + p(t) [t not in the top delta])``, i.e. Token Likelihood conditioned on the
  top ``delta`` candidates. It is an **upper bound of CCP** with the same ``delta`` for any NLI model (entailment or
  neutral decisions can only lower the score). Needs nothing but the stored probabilities.
* ``ccp_surface_{delta}`` -- candidates whose decoded text equals ``t``'s up to case and surrounding whitespace
  (``" Paris"``, ``"paris"``) count as entailment, the others as contradiction. Needs the generating LLM's tokenizer
  (it is in the group ``all``, not ``all-probability``). Between the two: ``ccp_surface <= ccp_no_nli``.

Values in [0, 1], higher = more uncertain.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from much_metric.baselines._arrays import TokenArrays, per_sample
from much_metric.baselines._topk import check_delta, check_delta_param, rank_of_sampled, sampled_rank, sorted_arrays
from much_metric.baselines.context import decode_groups, decode_ids
from much_metric.baselines.registry import Baseline, Requirements

__all__ = ["ccp_no_nli", "ccp_surface"]


def _candidates(arrays: TokenArrays, delta: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(candidate ids (N, delta + 1), their probabilities, valid mask): the top delta plus the sampled token appended
    (probability 0 and invalid when it already is in the top delta), as CCP builds them."""
    delta = check_delta(delta, arrays.probabilities.shape[1])
    rank = sampled_rank(arrays)
    rows = np.arange(arrays.n_tokens)
    outside = rank >= delta
    ids = np.concatenate([arrays.candidate_ids[:, :delta], arrays.output_tokens[:, None]], axis=1)
    p = np.concatenate([arrays.probabilities[:, :delta], np.where(outside, arrays.probabilities[rows, rank], 0.0)
                        [:, None]], axis=1)
    valid = np.concatenate([np.ones((arrays.n_tokens, delta), dtype=bool), outside[:, None]], axis=1)
    return ids, p, valid


def _ratio(arrays: TokenArrays, entail: np.ndarray, total: np.ndarray) -> np.ndarray:
    if (zero := np.flatnonzero(total <= 0)).size:
        raise ValueError(f"{arrays.where(int(zero[0]))}: the candidate probabilities sum to 0; CCP undefined")
    return 1.0 - entail / total


def _no_nli_flat(arrays: TokenArrays, *, delta: int = 10) -> np.ndarray:
    delta = check_delta(delta, arrays.probabilities.shape[1])
    arrays = sorted_arrays(arrays)
    rank = rank_of_sampled(arrays)
    sampled = arrays.probabilities[np.arange(arrays.n_tokens), rank]
    total = arrays.probabilities[:, :delta].sum(axis=1) + np.where(rank >= delta, sampled, 0.0)
    return _ratio(arrays, sampled, total)


def _normalised(decode):
    def run(batch):
        return [text.strip().casefold() for text in decode(batch)]
    return run


def _surface_flat(arrays: TokenArrays, *, delta: int = 10, tokenizer: Any) -> np.ndarray:
    if tokenizer is None:
        raise ValueError(f"ccp_surface_{delta} needs the generating LLM's tokenizer (tokenizer=...)")
    flat = np.empty(arrays.n_tokens)
    for samples, part, decode in decode_groups(arrays, tokenizer):
        part = part.sorted_by_probability()
        ids, p, valid = _candidates(part, delta)
        text = decode_ids(_normalised(decode), ids)
        same = valid & (text == text[:, -1:])  # the last column decodes the sampled token itself
        values = _ratio(part, (p * same).sum(axis=1), (p * valid).sum(axis=1))
        if samples is None:
            return values
        flat[arrays.token_index(samples)] = values
    return flat


def ccp_no_nli(dataset: Any, *, delta: int = 10) -> list[np.ndarray]:
    """``1 - p(t) / (mass of the top delta, t included)`` per token: CCP with every alternative a contradiction.

    Returns
    -------
    list of length n_samples of ndarray of shape (n_tokens_i,)
        Values in [0, 1], higher = more uncertain; >= ``ccp(..., delta=delta)`` for any NLI model.
    """
    return per_sample(_no_nli_flat, dataset, delta=delta)


def ccp_surface(dataset: Any, *, tokenizer: Any, delta: int = 10) -> list[np.ndarray]:
    """CCP with entailment = same decoded text as the sampled token up to case and surrounding whitespace.

    Parameters
    ----------
    tokenizer : tokenizer, callable or PerSampleDecoder
        The generating LLM's tokenizer (as for :func:`much_metric.baselines.methods.ccp.ccp`).

    Returns
    -------
    list of length n_samples of ndarray of shape (n_tokens_i,)
        Values in [0, 1], higher = more uncertain.
    """
    return per_sample(_surface_flat, dataset, delta=delta, tokenizer=tokenizer)


BASELINES = (
    Baseline(
        name="ccp_no_nli_{delta}", compute=_no_nli_flat, display="CCP-no-NLI-{delta}", order=11,
        defaults=("ccp_no_nli_10", "ccp_no_nli_24"), check=check_delta_param, requirements=Requirements(top_k="delta"),
        description="CCP with every other candidate a contradiction: 1 - p(t) / top-delta mass (upper bound of CCP)",
    ),
    Baseline(
        name="ccp_surface_{delta}", compute=_surface_flat, display="CCP-surface-{delta}", order=12,
        defaults=("ccp_surface_10",), check=check_delta_param,
        requirements=Requirements(top_k="delta", resources=("tokenizer",)),
        description="CCP with entailment = same decoded text as the sampled token (case/space-insensitive)",
    ),
)
