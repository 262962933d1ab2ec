"""SAR, Shifting Attention to Relevance (Duan et al., 2024), adapted to MUCH as in the paper
(docs/reference-behaviour.md#signals).

For token ``i`` with sampled token ``t``: A = prefix + dec(t) + suffix (the context window with the token) and
B = prefix + suffix (without it). The NLI model is run on (A, B) and (B, A);
``relevance_i = mean over the two pairs of (1 - P(entailment))`` -- removing a token that carries meaning breaks the
mutual entailment -- and ``SAR_i = (1 - p(t)) * relevance_i`` (higher = more uncertain). The original SAR weights
``-log p``; the reference (and this module) use ``1 - p`` so that scores stay in [0, 1] for the product aggregator.

All ``2 * N_tokens`` pairs of the split go to the NLI model in one de-duplicated, length-sorted, batched call.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from much_metric.baselines._arrays import TokenArrays, token_arrays
from much_metric.baselines._topk import sampled_probability
from much_metric.baselines.context import Decoder, context_windows, decode_groups, decode_ids
from much_metric.baselines.nli import (
    NLI_SUFFIX_PATTERN,
    checked_signal_name,
    nli_label_indices,
    nli_signal_suffix,
    pair_generation_ids,
    resolve_nli,
    run_nli,
)
from much_metric.baselines.registry import Baseline, Requirements

__all__ = ["sar", "sar_signal_name", "sar_pairs"]


def sar_signal_name(sigma: int = 8, nli_name: str | None = None) -> str:
    """Reference signal name: ``sar_{sigma}`` plus the NLI model's suffix (``_M``, ``_S``, ``_<alias>``)."""
    return f"sar_{sigma}{nli_signal_suffix(nli_name)}"


def sar_pairs(arrays: TokenArrays, decode: Decoder, *, sigma: int, reference_window: bool = False
              ) -> tuple[list[str], list[str]]:
    """Premises and hypotheses of SAR: ``[A_0..A_{N-1}, B_0..B_{N-1}]`` and ``[B_0.., A_0..]``."""
    prefix, suffix = context_windows(arrays, decode, sigma, reference_window=reference_window)
    with_token = prefix + decode_ids(decode, arrays.output_tokens) + suffix
    without = prefix + suffix
    return with_token.tolist() + without.tolist(), without.tolist() + with_token.tolist()


def _sar_flat(arrays: TokenArrays, *, nli: Any, decode: Any, sigma: int, reference_window: bool) -> np.ndarray:
    labels = nli_label_indices(nli.id2label)
    p_sampled = sampled_probability(arrays)
    groups = [(samples, part, sar_pairs(part, decoder, sigma=sigma, reference_window=reference_window))
              for samples, part, decoder in decode_groups(arrays, decode)]
    premises = [p for _, _, (premise, _) in groups for p in premise]
    hypotheses = [h for _, _, (_, hypothesis) in groups for h in hypothesis]
    pair_ids = [g for _, part, _ in groups for g in 2 * pair_generation_ids(part, np.arange(part.n_tokens))] \
        if getattr(nli, "routes_by_sample", False) else None
    entail = run_nli(nli, premises, hypotheses, labels.n_labels, pair_ids)[:, labels.entailment]
    relevance = np.empty(arrays.n_tokens)
    start = 0
    for samples, part, _ in groups:
        n = part.n_tokens
        # Per group, the pairs are [(A_i, B_i) for all i] then [(B_i, A_i) for all i].
        values = ((1.0 - entail[start : start + n]) + (1.0 - entail[start + n : start + 2 * n])) / 2.0
        start += 2 * n
        if samples is None:
            relevance = values
        else:
            relevance[arrays.token_index(samples)] = values
    return (1.0 - p_sampled) * relevance


def sar(
    dataset: Any,
    *,
    nli: Any,
    tokenizer: Any,
    sigma: int = 8,
    reference_window: bool = False,
) -> list[np.ndarray]:
    """SAR token scores of a split (see the module docstring for the formula).

    Parameters
    ----------
    dataset : datasets.Dataset, pyarrow.Table, list of rows or TokenArrays
        A MUCH split (``output_tokens``, ``logits_token_ids``, ``logits_values``). The sampled token must be among
        the stored candidates (always true in MUCH); otherwise a ValueError names the sample and token.
    nli : str, NliScorer, or object with ``id2label`` and ``predict_proba(premises, hypotheses)``
        As in :func:`much_metric.baselines.methods.ccp.ccp`; P(entailment) is the softmax column named entailment.
    tokenizer : tokenizer, callable or PerSampleDecoder
        The generating LLM's tokenizer, a batch decode function, or a per-sample mapping (as in CCP).
    sigma : int, default 8
        Context tokens on each side. Signal name ``sar_{sigma}``.
    reference_window : bool, default False
        The reference's ``sigma - 1`` token suffix.

    Returns
    -------
    list of length n_samples of ndarray of shape (n_tokens_i,)
        Values in [0, 1], higher = more uncertain.
    """
    arrays = token_arrays(dataset)
    values = _sar_flat(arrays, nli=resolve_nli(nli), decode=tokenizer, sigma=sigma,
                       reference_window=reference_window)
    return arrays.split(values)


def _sar_compute(arrays: TokenArrays, *, sigma: int, suffix: str = "", nli: Any, tokenizer: Any,
                 reference_window: bool = False) -> np.ndarray:
    return _sar_flat(arrays, nli=nli, decode=tokenizer, sigma=sigma, reference_window=reference_window)


def _sar_name(signal: str, params: dict[str, Any], resources: dict[str, Any]) -> str:
    nli_name = getattr(resources.get("nli"), "name", None)
    return checked_signal_name(signal, params["suffix"], sar_signal_name(params["sigma"], nli_name), nli_name)


BASELINES = (
    Baseline(
        name="sar_{sigma}{suffix}", compute=_sar_compute, display="SAR-{sigma}{suffix}",
        params={"suffix": NLI_SUFFIX_PATTERN}, defaults=("sar_8",),
        requirements=Requirements(top_k=0, resources=("tokenizer", "nli")),
        options=("reference_window",), signal_name=_sar_name, order=20,
        description="token likelihood weighted by its NLI relevance on sigma-token windows (Duan et al. 2024; "
                    "docs/reference-behaviour.md#signals)",
    ),
)
