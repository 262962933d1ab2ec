"""Claims of a MUCH split as the peers see them, and claim scores back into MUCH's token-score format.

A peer scores a *claim*: LM-Polygraph through ``Claim.aligned_token_ids``, UQLM through a "response" made of the
claim's tokens. Which tokens a claim hands the peer is the **token convention**:

* ``"much"`` (default): the claim's non-stopword tokens (``stopword_mask`` False), or all its tokens when it has
  none -- the tokens MUCH's own ``stopword_handling="exclude"`` aggregation keeps, and the only ones that move a
  claim's score under ``"null"``. With it, LM-Polygraph's MaximumClaimProbability is the same product as Token
  Likelihood under the product aggregator (docs/peers.md).
* ``"all"``: every token of the claim, the peers' own convention (they have no stopword rule for these scores).

MUCH's signal files hold one value per output token, and the runner aggregates tokens into claims. A claim score
``u`` in [0, 1] goes back as a token score on one **carrier** token of the claim (its first non-stopword token, else
its first token), 0 on the others: the product aggregator gives ``1 - (1 - u) = u`` and the max aggregator ``u``, so
the table ranks claims exactly by the peer's score (the mean aggregator divides by the claim length: use product or
max). Claims never share tokens in MUCH; a split where they do is refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["CONVENTIONS", "check_sampled_stored", "claim_tokens", "carrier_scores", "to_unit"]

#: Token conventions: MUCH's stopword rule, or every claim token (the peers' own).
CONVENTIONS = ("much", "all")


def _check(arrays: Any, convention: str) -> None:
    if convention not in CONVENTIONS:
        raise ValueError(f"token convention must be one of {CONVENTIONS}, got {convention!r}")
    if getattr(arrays, "token_chunks", None) is None:
        raise ValueError("the peers score claims: the split needs its 'token_chunks' column (MUCH's claims)")
    if convention == "much" and getattr(arrays, "stopword_mask", None) is None:
        raise ValueError("the 'much' token convention needs the split's 'stopword_mask' column; use the 'all' "
                         "convention (signal suffix ':alltokens') for data without it")


def check_sampled_stored(arrays: Any) -> None:
    """Raise ``ValueError`` naming the first token whose sampled id is not among its stored candidates.

    MUCH always stores the sampled token; another producer may not. LM-Polygraph's
    ``VLLMLogprobsExtractionCalculator`` then gives that token log p = -100 without a word, and UQLM a -inf logprob:
    the adapters refuse such data instead (MUCH's ``token_likelihood`` raises too, unless ``missing="nan"``).
    """
    stored = (arrays.candidate_ids == arrays.output_tokens[:, None]).any(axis=1)
    if not stored.all():
        token = int(np.flatnonzero(~stored)[0])
        sample = int(np.searchsorted(arrays.offsets, token, side="right") - 1)
        position = token - int(arrays.offsets[sample])
        raise ValueError(f"generation_id={arrays.generation_ids[sample]!r}, token {position}: the sampled token id "
                         f"{int(arrays.output_tokens[token])} (field 'output_tokens') is not among the stored "
                         "candidates (field 'logits_token_ids'); LM-Polygraph would score it log p = -100 silently")


def claim_tokens(arrays: Any, *, convention: str = "much") -> list[list[np.ndarray]]:
    """Per sample, per claim (``token_chunks`` order, EOS claim included): the sample-local token indices the peer
    scores, and the carrier token of each claim (:func:`carrier_scores`).

    Returns
    -------
    list of length n_samples of list of ndarray of int64
        Never empty: a claim made only of stopwords hands over all its tokens.
    """
    _check(arrays, convention)
    result = []
    for sample, chunks in enumerate(arrays.token_chunks):
        start, stop = int(arrays.offsets[sample]), int(arrays.offsets[sample + 1])
        n_tokens = stop - start
        stop_words = arrays.stopword_mask[start:stop] if arrays.stopword_mask is not None else None
        claims, seen = [], np.zeros(n_tokens, dtype=bool)
        for index, chunk in enumerate(chunks):
            tokens = np.asarray(chunk, dtype=np.int64).reshape(-1)
            if tokens.size == 0 or tokens.min() < 0 or tokens.max() >= n_tokens:
                raise ValueError(f"generation_id={arrays.generation_ids[sample]!r}: field 'token_chunks' claim "
                                 f"{index} holds {tokens.tolist()}, not indices of its {n_tokens} output tokens")
            if seen[tokens].any():
                raise ValueError(f"generation_id={arrays.generation_ids[sample]!r}: field 'token_chunks' claim "
                                 f"{index} shares tokens with an earlier claim; the peers' claim scores need "
                                 "disjoint claims")
            seen[tokens] = True
            if convention == "much":
                content = tokens[~stop_words[tokens]]
                tokens = content if content.size else tokens
            claims.append(tokens)
        result.append(claims)
    return result


def carrier_scores(arrays: Any, claim_values: Sequence[Sequence[float]]) -> np.ndarray:
    """Flat token scores (N_tokens,) with each claim's value on its carrier token and 0 elsewhere.

    The carrier is the claim's first non-stopword token (its first token when it has none, or when the split has
    no ``stopword_mask``), so that MUCH's ``"null"`` stopword handling keeps exactly the claims it keeps for every
    token method.
    """
    flat = np.zeros(arrays.n_tokens, dtype=np.float64)
    for sample, (chunks, values) in enumerate(zip(arrays.token_chunks, claim_values, strict=True)):
        start = int(arrays.offsets[sample])
        if len(values) != len(chunks):
            raise ValueError(f"generation_id={arrays.generation_ids[sample]!r}: the peer returned {len(values)} claim "
                             f"scores for {len(chunks)} claims")
        for chunk, value in zip(chunks, values, strict=True):
            tokens = start + np.asarray(chunk, dtype=np.int64).reshape(-1)
            if arrays.stopword_mask is not None:
                content = tokens[~arrays.stopword_mask[tokens]]
                tokens = content if content.size else tokens
            flat[tokens[0]] = value
    return flat


def to_unit(values: np.ndarray, kind: str) -> np.ndarray:
    """A peer's claim uncertainty mapped into [0, 1] by a strictly increasing function (ranks are the peer's):

    * ``"unit"``: already in [0, 1] (checked);
    * ``"nll"``: a non-negative score such as ``-sum log p`` -> ``1 - exp(-x)`` (``-sum log p`` becomes
      ``1 - prod p``, Token Likelihood's product);
    * ``"negprob"``: a negated probability in [-1, 0] -> ``1 + x``;
    * ``"real"``: any real -> the logistic ``1 / (1 + exp(-x))``.
    """
    values = np.asarray(values, dtype=np.float64)
    if not np.isfinite(values).all():
        raise ValueError(f"the peer returned non-finite claim scores ({int((~np.isfinite(values)).sum())} of "
                         f"{values.size})")
    if kind == "unit":
        mapped = values
    elif kind == "nll":
        mapped = -np.expm1(-values)
    elif kind == "negprob":
        mapped = 1.0 + values
    elif kind == "real":
        mapped = 0.5 * (1.0 + np.tanh(0.5 * values))
    else:
        raise ValueError(f"unknown score kind {kind!r}")
    tolerance = 1e-9
    if ((mapped < -tolerance) | (mapped > 1 + tolerance)).any():
        raise ValueError(f"claim scores of kind {kind!r} fall outside [0, 1] (min {mapped.min()}, max {mapped.max()})")
    return np.clip(mapped, 0.0, 1.0)
