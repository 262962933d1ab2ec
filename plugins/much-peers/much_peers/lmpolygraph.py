"""LM-Polygraph's own estimators on MUCH's stored top-24 and claims (no model, no re-implementation).

Per sample, the stored rows go through LM-Polygraph's model-free statistics path: its
``VLLMLogprobsExtractionCalculator`` turns ``{token_ids, logprobs}`` (one ``{candidate id: logprob}`` dict per token,
built from ``logits_token_ids`` / ``log(logits_values)``) into ``greedy_log_likelihoods``, ``greedy_log_probs`` and
``greedy_tokens``; its ``EntropyCalculator`` adds ``entropy``. Claims are LM-Polygraph ``Claim`` objects whose
``aligned_token_ids`` are MUCH's claim tokens (:func:`much_peers._inputs.claim_tokens`). Then the estimator class
itself is called.

* Claim-level estimators (``...Claim``) get one sample's claims per call (``BoostedProbClaim`` also needs that sample's
  ``greedy_tokens`` unnested: its ``__call__`` hands the whole batch's ``greedy_tokens`` to every sample,
  docs/peers.md).
* Sequence-level estimators get each claim's tokens as one generation (the rows of ``greedy_log_likelihoods``,
  ``greedy_log_probs``, ``entropy`` and ``greedy_tokens`` at the claim's tokens).

BoostedProb indexes ``greedy_log_probs`` by vocabulary id, so it gets a dense matrix over the sample's own
vocabulary (every id stored for that sample, remapped to 0..V-1; log p = -inf where an id was not stored), the
faithful form of a top-24 row.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from much_peers._catalogue import LMPOLYGRAPH, LMPOLYGRAPH_REFUSED
from much_peers._inputs import check_sampled_stored, claim_tokens

__all__ = ["check_estimator", "claim_scores"]


class _Logprob:
    """What ``VLLMLogprobsExtractionCalculator`` reads from a vLLM logprob entry: ``.logprob``."""

    __slots__ = ("logprob",)

    def __init__(self, logprob: float) -> None:
        self.logprob = logprob


def check_estimator(name: str) -> None:
    """Raise ``ValueError`` naming what a refused or unknown estimator needs (cheap: imports no peer)."""
    name = str(name)
    if name in LMPOLYGRAPH:
        return
    if name in LMPOLYGRAPH_REFUSED:
        raise ValueError(f"LM-Polygraph's {name} needs {LMPOLYGRAPH_REFUSED[name]}, which MUCH's stored top-24 "
                         f"does not hold; estimators that run here: {', '.join(LMPOLYGRAPH)}")
    raise ValueError(f"{name!r} is not an LM-Polygraph estimator this adapter runs; it runs: "
                     f"{', '.join(LMPOLYGRAPH)} (refused, with the reason: {', '.join(LMPOLYGRAPH_REFUSED)})")


def _log(p: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.log(p)


def _sample_stats(arrays: Any, sample: int, needed: tuple[str, ...]) -> dict[str, Any]:
    from lm_polygraph.stat_calculators.vllm_logprobs_extraction import VLLMLogprobsExtractionCalculator

    start, stop = int(arrays.offsets[sample]), int(arrays.offsets[sample + 1])
    ids = arrays.candidate_ids[start:stop]
    logp = _log(arrays.probabilities[start:stop])
    logprobs = [{int(i): _Logprob(float(v)) for i, v in zip(row_ids, row_lp, strict=True)}
                for row_ids, row_lp in zip(ids.tolist(), logp.tolist(), strict=True)]
    tokens = arrays.output_tokens[start:stop].tolist()
    stats = VLLMLogprobsExtractionCalculator(output_matrix=False)({"token_ids": tokens, "logprobs": logprobs})
    if "entropy" in needed:
        from lm_polygraph.stat_calculators.entropy import EntropyCalculator

        stats.update(EntropyCalculator()(stats))
    if "greedy_tokens" in needed:  # BoostedProb: a dense log-prob matrix over the sample's own vocabulary
        vocabulary, inverse = np.unique(np.concatenate([ids.reshape(-1), np.asarray(tokens)]), return_inverse=True)
        dense = np.full((len(tokens), vocabulary.size), -np.inf)
        np.put_along_axis(dense, inverse[: ids.size].reshape(ids.shape), logp, axis=1)
        stats["greedy_log_probs"] = [dense]
        stats["greedy_tokens"] = [inverse[ids.size:].tolist()]
    return stats


def _claim_level(estimator: Any, name: str, stats: dict[str, Any], claims: list[np.ndarray]) -> list[float]:
    from lm_polygraph.stat_calculators.extract_claims import Claim

    stats = {**stats, "claims": [[Claim(claim_text="", sentence="", aligned_token_ids=tokens.tolist())
                                  for tokens in claims]]}
    if name == "BoostedProbClaim":
        # Its __call__ passes stats["greedy_tokens"] whole (every sample's tokens) as the target of each sample's
        # log-prob matrix: with the per-sample nesting ([[ids]]) the target is (1, T) against a (T, V) matrix and
        # BoostedProb fails. One sample with a flat token list is the only call that works (docs/peers.md).
        stats["greedy_tokens"] = stats["greedy_tokens"][0]
    return list(estimator(stats)[0])


def _sequence_level(estimator: Any, stats: dict[str, Any], claims: list[np.ndarray]) -> list[float]:
    """Each claim as one generation: the per-token statistics at the claim's tokens."""
    per_claim: dict[str, list] = {}
    for key in ("greedy_log_likelihoods", "greedy_log_probs", "entropy", "greedy_tokens"):
        if key not in stats:
            continue
        rows = stats[key][0]
        if isinstance(rows, np.ndarray):
            per_claim[key] = [rows[tokens] for tokens in claims]
        else:
            per_claim[key] = [[rows[t] for t in tokens] for tokens in claims]
    if "greedy_log_probs" in per_claim and not isinstance(stats["greedy_log_probs"][0], np.ndarray):
        per_claim["greedy_log_probs"] = [np.asarray(rows) for rows in per_claim["greedy_log_probs"]]
    return list(np.asarray(estimator(per_claim), dtype=np.float64))


def claim_scores(arrays: Any, estimator: str, *, convention: str = "much") -> list[np.ndarray]:
    """LM-Polygraph's ``estimator`` (a class name of ``lm_polygraph.estimators``) on every claim of a split.

    Parameters
    ----------
    arrays : much_metric.baselines.TokenArrays
        With ``token_chunks`` (and ``stopword_mask`` for the ``"much"`` convention).
    estimator : str
        Among :data:`much_peers._catalogue.LMPOLYGRAPH`; others are refused with what they need.
    convention : {"much", "all"}, default "much"
        Which tokens of a claim the estimator sees (:func:`much_peers._inputs.claim_tokens`).

    Returns
    -------
    list of length n_samples of ndarray of shape (n_claims_i,)
        The estimator's raw claim uncertainties (higher = more uncertain), in ``token_chunks`` order.
    """
    check_estimator(estimator)
    import lm_polygraph.estimators as estimators

    spec = LMPOLYGRAPH[estimator]
    instance = getattr(estimators, estimator)()
    check_sampled_stored(arrays)
    result = []
    for sample, claims in enumerate(claim_tokens(arrays, convention=convention)):
        stats = _sample_stats(arrays, sample, spec.stats)
        if spec.level == "claim":
            values = _claim_level(instance, estimator, stats, claims)
        else:
            values = _sequence_level(instance, stats, claims)
        result.append(np.asarray(values, dtype=np.float64))
    return result
