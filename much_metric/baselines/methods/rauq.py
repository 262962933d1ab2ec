"""Attention baselines over an internals pack: RAUQ and the previous-token attention alone.

RAUQ (Vazhentsev et al., "Uncertainty-aware attention heads", 2025; the authors' public ``rauq.py``): in each layer
``l`` of the middle third (``L // 3`` .. ``ceil(2L / 3)``, 0-based, inclusive), the head ``h_l`` that pays the most
attention to the previous token on average over the sample's output tokens (tokens 1..n-1) is selected, and a
confidence runs along the output::

    c_l(0) = p(0)
    c_l(t) = alpha * p(t) + (1 - alpha) * a_{l, h_l}(t) * c_l(t - 1)      (alpha = 0.2)

where ``p(t)`` is the stored probability of the sampled token ``t`` and ``a_{l,h}(t)`` the weight from the position
that reads token ``t`` to the one before it (the pack's ``attention_to_previous``). The authors aggregate
``1 - c`` over a whole sequence and then over layers by the mean; at claim level the token score is
``1 - mean_l c_l(t)`` (higher = more uncertain, in [0, 1]) and the claim aggregator does the rest: under the mean
aggregator a claim's score is exactly the authors' mean/mean sequence score restricted to the claim.

``attention_previous``: ``1 - mean_l a_{l, h_l}(t)`` with the same layers and heads (the attention term alone).

Both need an internals pack (``much run --internals PACK``, ``python -m builder internals``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from much_metric.baselines._arrays import TokenArrays
from much_metric.baselines._topk import sampled_probability
from much_metric.baselines.registry import Baseline, Requirements

__all__ = ["rauq_layers", "select_heads", "rauq_confidences", "rauq", "attention_previous", "pack_array",
           "BASELINES"]

#: RAUQ's default alpha (the authors' ``rauq.py``).
ALPHA = 0.2


def rauq_layers(n_layers: int) -> np.ndarray:
    """The middle third of the layers, as the authors select them: ``L // 3`` .. ``ceil(2L / 3)`` inclusive."""
    return np.arange(n_layers // 3, min(math.ceil(n_layers / 3 * 2) + 1, n_layers))


def select_heads(attention: np.ndarray, layers: np.ndarray) -> np.ndarray:
    """Per layer, the head with the largest mean previous-token attention over output tokens 1..n-1 (head 0 for a
    one-token output)."""
    if attention.shape[0] < 2:
        return np.zeros(len(layers), dtype=np.int64)
    return attention[1:, layers, :].astype(np.float64).mean(axis=0).argmax(axis=-1)


def rauq_confidences(probability: np.ndarray, attention: np.ndarray, *, alpha: float = ALPHA,
                     layers: np.ndarray | None = None) -> np.ndarray:
    """RAUQ's recurrent confidences ``c_l(t)``, shape (n_tokens, n_selected_layers), of one sample.

    ``probability``: (n_tokens,) stored probabilities of the sampled tokens; ``attention``: (n_tokens, layers,
    heads) ``attention_to_previous`` of the pack.
    """
    if attention.ndim != 3 or attention.shape[0] != probability.shape[0]:
        raise ValueError(f"attention of shape {attention.shape} for {probability.shape[0]} tokens")
    layers = rauq_layers(attention.shape[1]) if layers is None else np.asarray(layers)
    heads = select_heads(attention, layers)
    weights = attention[:, layers, heads].astype(np.float64)  # (n, |layers|)
    confidence = np.empty_like(weights)
    confidence[0] = probability[0]
    for t in range(1, len(probability)):  # sequential in t, vectorised over layers
        confidence[t] = alpha * probability[t] + (1.0 - alpha) * weights[t] * confidence[t - 1]
    return confidence


def pack_array(internals: Any, generation_id: str, name: str, *, flag: str = "") -> np.ndarray:
    """The ``name`` array of one row of an internals pack, or a ``ValueError`` naming the sample, the pack (its
    ``manifest.json``), the missing array and what the pack holds (a hidden-states-only pack, ``--engine vllm``, has
    no attention; ``flag``: the ``builder internals`` option that stores ``name``)."""
    stored = internals[generation_id]
    if name not in stored:
        path = getattr(internals, "path", None)
        where = f"{path}/manifest.json" if path is not None else "the internals pack"
        engine = (getattr(internals, "manifest", None) or {}).get("engine", "transformers")
        raise ValueError(f"generation_id={generation_id!r}: {where} has no {name!r} array (it holds {sorted(stored)}; "
                         f"engine {engine}): rebuild it with `python -m builder internals --engine transformers"
                         f"{' ' + flag if flag else ''}`")
    return np.asarray(stored[name])


def _per_sample(arrays: TokenArrays, internals: Any, name: str) -> list[tuple[np.ndarray, np.ndarray]]:
    probabilities = arrays.split(sampled_probability(arrays, missing="raise"))
    pairs = []
    for gid, probability in zip(arrays.generation_ids, probabilities, strict=True):
        attention = pack_array(internals, gid, name)
        if attention.shape[0] != len(probability):
            raise ValueError(f"generation_id={gid!r}: the internals pack's {name!r} has {attention.shape[0]} rows for "
                             f"{len(probability)} output tokens (a pack of another dataset)")
        pairs.append((np.asarray(probability, dtype=np.float64), attention))
    return pairs


def rauq(arrays: TokenArrays, *, internals: Any, alpha: float = ALPHA) -> list[np.ndarray]:
    """RAUQ token scores ``1 - mean_l c_l(t)`` per sample (higher = more uncertain)."""
    return [1.0 - rauq_confidences(p, a, alpha=alpha).mean(axis=1)
            for p, a in _per_sample(arrays, internals, "attention_to_previous")]


def attention_previous(arrays: TokenArrays, *, internals: Any) -> list[np.ndarray]:
    """``1 - mean_l a_{l,h_l}(t)``: the previous-token attention of RAUQ's heads alone."""
    scores = []
    for _, attention in _per_sample(arrays, internals, "attention_to_previous"):
        layers = rauq_layers(attention.shape[1])
        heads = select_heads(attention, layers)
        scores.append(1.0 - attention[:, layers, heads].astype(np.float64).mean(axis=1))
    return scores


BASELINES = (
    Baseline(name="rauq", compute=rauq, display="RAUQ", order=70,
             requirements=Requirements(top_k=0, resources=("internals",)),
             description="RAUQ: recurrent previous-token attention x probability, middle-third layers, best head per "
                         "layer (needs --internals PACK)"),
    Baseline(name="attention_previous", compute=attention_previous, display="Attention to previous",
             requirements=Requirements(top_k=0, resources=("internals",)), order=71,
             description="1 - previous-token attention of RAUQ's heads (needs --internals PACK)"),
)
