"""UQLM's own white-box scorers on MUCH's stored top-24 and claims (no LLM call).

UQLM scores *responses* from OpenAI-style logprob lists; ``WhiteBoxUQ(llm=None, scorers=[...],
top_k_logprobs=K).score(logprobs_results=...)`` does so without a model (LangChain is still imported). A MUCH claim
becomes one response made of its tokens (:func:`much_peers._inputs.claim_tokens`): per token ``{"token", "logprob",
"top_logprobs": [{"token", "logprob"} x K]}`` from ``output_tokens``, ``logits_token_ids`` and ``logits_values``.
``top_k_logprobs`` is the stored K (24 in MUCH): UQLM's top-logprob scorers give NaN for a token whose list is not
exactly ``top_k_logprobs`` long, and its default (15) would make every MUCH token NaN. UQLM returns confidences
(higher = more certain); the adapter returns ``1 - confidence``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np

from much_peers._catalogue import UQLM, UQLM_REFUSED
from much_peers._inputs import check_sampled_stored, claim_tokens

__all__ = ["check_scorer", "claim_scores"]


def check_scorer(name: str) -> None:
    """Raise ``ValueError`` naming what a refused or unknown scorer needs (cheap: imports no peer)."""
    name = str(name)
    if name in UQLM:
        return
    if name in UQLM_REFUSED:
        raise ValueError(f"UQLM's {name} scorer needs {UQLM_REFUSED[name]}, which MUCH's stored top-24 does not "
                         f"hold; scorers that run here: {', '.join(UQLM)}")
    raise ValueError(f"{name!r} is not a UQLM white-box scorer this adapter runs; it runs: {', '.join(UQLM)} "
                     f"(refused, with the reason: {', '.join(UQLM_REFUSED)})")


def _responses(arrays: Any, claims_per_sample: list[list[np.ndarray]]) -> list[list[dict[str, Any]]]:
    """One OpenAI-style logprob list per claim, in sample then claim order."""
    with np.errstate(divide="ignore"):
        logp = np.log(arrays.probabilities)
    ids = arrays.candidate_ids
    rows = np.arange(arrays.n_tokens)
    sampled = arrays.output_tokens
    # log p of the sampled token (its column among the stored candidates; -inf when it was not stored)
    hit = ids == sampled[:, None]
    sampled_logp = np.where(hit.any(axis=1), logp[rows, hit.argmax(axis=1)], -np.inf)
    entries = [{"token": str(int(sampled[t])), "logprob": float(sampled_logp[t]),
                "top_logprobs": [{"token": str(int(i)), "logprob": float(v)}
                                 for i, v in zip(ids[t].tolist(), logp[t].tolist(), strict=True)]}
               for t in range(arrays.n_tokens)]
    responses = []
    for sample, claims in enumerate(claims_per_sample):
        start = int(arrays.offsets[sample])
        responses.extend([entries[start + t] for t in tokens.tolist()] for tokens in claims)
    return responses


def claim_scores(arrays: Any, scorer: str, *, convention: str = "much") -> list[np.ndarray]:
    """UQLM's ``scorer`` on every claim of a split, as ``1 - confidence`` (higher = more uncertain).

    Parameters as :func:`much_peers.lmpolygraph.claim_scores`; ``scorer`` among
    :data:`much_peers._catalogue.UQLM`.
    """
    check_scorer(scorer)
    from uqlm import WhiteBoxUQ

    claims = claim_tokens(arrays, convention=convention)
    check_sampled_stored(arrays)
    responses = _responses(arrays, claims)
    width = int(arrays.probabilities.shape[1])
    uq = WhiteBoxUQ(llm=None, scorers=[scorer], top_k_logprobs=width)
    result = asyncio.run(uq.score(logprobs_results=responses, show_progress_bars=False))
    confidence = np.asarray(result.data[scorer], dtype=np.float64)
    counts = [len(c) for c in claims]
    return np.split(1.0 - confidence, np.cumsum(counts)[:-1])
