"""LLM-Check's attention score over an internals pack (needs ``--attention-to-self`` when the pack is built).

LLM-Check (Sriramanan et al., NeurIPS 2024) scores a response from one layer's attention maps: for each head ``h``
the attention matrix ``A_h`` restricted to the response is lower-triangular (causal), so its log-determinant is the
sum of the log of its diagonal, and the response's attention score is ``sum_h (1 / m) log det A_h = sum_h mean_t log
a_h(t, t)`` over its ``m`` tokens (the authors' ``get_attn_eig_prod``: the mean log diagonal, summed over heads).

The token-level version scored here reads the pack's ``attention_to_self`` [n_tokens, layers, heads] (the weight
from the position that reads output token ``t`` to itself, ``a_{l,h}(t, t)``)::

    u(t) = mean over the layers L and over every head h of  log a_{l,h}(t, t)
    s(t) = 1 - exp(u(t))              (in [0, 1): one minus the geometric mean of the self-attention weights)

with ``L`` the middle third of the layers (RAUQ's ``L // 3 .. ceil(2L / 3)``; the authors sweep one layer at a time
and report a middle one) or the layers given. ``s`` is higher for tokens that attend less to themselves; the claim
aggregator does the rest. For one layer, the authors' score of any span of tokens is recovered exactly from the token
scores as ``H * mean_t log(1 - s(t))`` (``H`` heads; ``much_metric.baselines.methods.llm_check.span_attention_score``).
Weights below :data:`FLOOR` (float32 underflow) are floored before the logarithm.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from much_metric.baselines._arrays import TokenArrays
from much_metric.baselines.methods.rauq import pack_array, rauq_layers
from much_metric.baselines.registry import Baseline, Requirements

__all__ = ["FLOOR", "NAME", "self_attention_log", "llm_check_attention", "span_attention_score", "BASELINES"]

#: Smallest self-attention weight the logarithm sees (float32's smallest normal number).
FLOOR = float(np.finfo(np.float32).tiny)
#: The pack array this method reads (``python -m builder internals --attention-to-self``).
NAME = "attention_to_self"


def self_attention_log(attention: np.ndarray, layers: Any = None) -> np.ndarray:
    """``u(t)``: the mean over ``layers`` (default: the middle third) and every head of ``log a(t, t)``, for one
    sample's ``attention_to_self`` ([n_tokens, layers, heads]); float64, shape (n_tokens,)."""
    attention = np.asarray(attention)
    if attention.ndim != 3:
        raise ValueError(f"{NAME} must have shape [n_tokens, layers, heads], got {attention.shape}")
    chosen = rauq_layers(attention.shape[1]) if layers is None else np.asarray(layers, dtype=np.int64)
    weights = np.maximum(attention[:, chosen, :].astype(np.float64), FLOOR)
    return np.log(weights).mean(axis=(1, 2))


def llm_check_attention(arrays: TokenArrays, *, internals: Any, layers: Any = None) -> list[np.ndarray]:
    """Token scores ``1 - exp(u(t))`` per sample (higher = less self-attention = more uncertain)."""
    scores = []
    for gid, n in zip(arrays.generation_ids, np.diff(arrays.offsets), strict=True):
        attention = pack_array(internals, gid, NAME, flag="--attention-to-self")
        if attention.shape[0] != n:
            raise ValueError(f"generation_id={gid!r}: the internals pack's {NAME!r} has {attention.shape[0]} rows for "
                             f"{n} output tokens (a pack of another dataset)")
        scores.append(1.0 - np.exp(self_attention_log(attention, layers)))
    return scores


def span_attention_score(token_scores: np.ndarray, n_heads: int) -> float:
    """The authors' attention score of a span (one layer) from its token scores: ``H * mean_t log(1 - s(t))``."""
    return float(n_heads * np.mean(np.log(1.0 - np.asarray(token_scores, dtype=np.float64))))


BASELINES = (
    Baseline(name="llm_check_attention", compute=llm_check_attention, display="LLM-Check attention",
             requirements=Requirements(top_k=0, resources=("internals",)), order=72,
             description="LLM-Check's attention score: 1 - exp(mean log self-attention a(t,t)) over the heads of the "
                         "middle-third layers (needs --internals PACK built with --attention-to-self)"),
)
