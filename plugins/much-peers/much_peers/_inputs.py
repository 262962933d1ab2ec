"""Claims of a MUCH split as the peers see them, and the peers' claim scores as MUCH claim scores.

A peer scores a *claim*: LM-Polygraph through ``Claim.aligned_token_ids``, UQLM through a "response" made of the
claim's tokens. Which tokens a claim hands the peer is the **token convention**:

* ``"much"`` (default): the claim's non-stopword tokens (``stopword_mask`` False), or all its tokens when it has
  none -- the tokens MUCH's own ``stopword_handling="exclude"`` aggregation keeps, and the only ones that move a
  claim's score under ``"null"``. With it, LM-Polygraph's MaximumClaimProbability is the same product as Token
  Likelihood under the product aggregator (docs/peers.md).
* ``"all"``: every token of the claim, the peers' own convention (they have no stopword rule for these scores).

The claims and the claim-level signal come from the toolkit's public helpers
(:mod:`much_metric.baselines.claims`): a peer's signal is claim-level, one value per claim, scored as it is whatever
the aggregator (docs/extending.md#a-claim-level-method).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from much_metric.baselines.claims import claim_tokens as much_claim_tokens

__all__ = ["CONVENTIONS", "check_sampled_stored", "claim_tokens", "to_unit"]

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
    scores -- :func:`much_metric.baselines.claims.claim_tokens` under the token ``convention``.

    Returns
    -------
    list of length n_samples of list of ndarray of int64
        Never empty: a claim made only of stopwords hands over all its tokens.
    """
    _check(arrays, convention)
    return much_claim_tokens(arrays, "the peers' claim scores", content_only=convention == "much")


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
