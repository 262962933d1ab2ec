"""Capture of the "24 logits" (docs/reference-behaviour.md#captured-distribution): temperature-scaled full-vocabulary
probabilities, top 24 per step.

Shared by the builder (``generate``, ``import-mushroom``: whole generations at once) and the real-time monitor
(:mod:`much_metric.monitor`: one step at a time, the same two operations in the same order, so the stored values are
bit-identical). Torch is imported inside the functions.
"""

from __future__ import annotations

from typing import Any

from much_dataset import schema

__all__ = ["scaled_probabilities", "top_candidates", "top_candidates_from_probabilities"]


def scaled_probabilities(logits: Any, *, temperature: float = 1.0):
    """Softmax over the FULL vocabulary of ``logits / temperature`` (float32), shape (n_tokens, vocab_size).

    No top-k/top-p truncation: MUCH stores the distribution before sampling warpers
    (docs/reference-behaviour.md#captured-distribution).
    """
    import torch

    return torch.softmax(logits.float() / float(temperature), dim=-1)


def top_candidates(logits: Any, chosen: Any, *, temperature: float = 1.0, top_k: int = schema.TOP_K,
                   extend: bool = True):
    """Top-``top_k`` probabilities of each row, extended down to the chosen token when it ranks lower
    (docs/reference-behaviour.md#captured-distribution).

    Parameters
    ----------
    logits : torch.Tensor of shape (n_tokens, vocab_size)
        Raw (unwarped) logits; row ``i`` produced ``chosen[i]``.
    chosen : torch.Tensor of shape (n_tokens,)
        The emitted (sampled or teacher-forced) token ids.
    temperature : float
        Logits are divided by it before the softmax over the FULL vocabulary (no top-k/top-p truncation).

    Returns
    -------
    ids : list of n_tokens lists of int
    probs : list of n_tokens lists of float
        Sorted by decreasing probability, float32 values, not renormalised. Length ``top_k``, or ``rank + 1`` when
        the chosen token's 0-based ``rank`` is ``>= top_k`` (the list then runs down to it, as the reference).
    ranks : list of int
        The chosen token's rank per row (number of tokens before it in the sorted order; with ``extend=False``, the
        number of strictly more probable tokens, at least ``top_k``, when it is outside the head).
    chosen_probs : list of float
        The chosen token's probability per row.

    With ``extend=False`` every row keeps exactly ``top_k`` candidates (no tail is materialised, which matters
    when a teacher-forced token ranks in the thousands).

    Notes
    -----
    ``torch.topk`` gives the head (one partial selection per row instead of a full vocabulary sort: the sort was
    most of the cost); ties keep topk's order, which is deterministic on a given device. Only rows whose chosen
    token falls outside the head are fully sorted (stable), to extend them.
    """
    return top_candidates_from_probabilities(scaled_probabilities(logits, temperature=temperature), chosen,
                                             top_k=top_k, extend=extend)


def top_candidates_from_probabilities(probs: Any, chosen: Any, *, top_k: int = schema.TOP_K, extend: bool = True):
    """:func:`top_candidates` on probabilities already computed by :func:`scaled_probabilities` (same outputs)."""
    import torch

    head_probs, head_ids = torch.topk(probs, k=min(top_k, probs.shape[-1]), dim=-1, sorted=True)
    chosen = chosen.to(probs.device).long()
    in_head = head_ids == chosen[:, None]
    found = in_head.any(dim=-1)
    chosen_probs = probs.gather(1, chosen[:, None])[:, 0]
    beyond = torch.clamp((probs > chosen_probs[:, None]).sum(dim=-1), min=top_k)
    ranks = torch.where(found, in_head.int().argmax(dim=-1), beyond).tolist()
    ids, values = head_ids.tolist(), head_probs.tolist()
    if not extend:
        return ids, values, ranks, chosen_probs.tolist()
    for row in torch.nonzero(~found).flatten().tolist():
        # The head stays topk's (so an extended row starts exactly like its extend=False row, even through exact
        # ties, which topk and a stable sort may order differently); the tail is the stable sort of the rest.
        row_probs, row_ids = torch.sort(probs[row], descending=True, stable=True)
        outside = ~torch.isin(row_ids, head_ids[row])
        tail_ids, tail_probs = row_ids[outside], row_probs[outside]
        tail_length = int(torch.nonzero(tail_ids == chosen[row]).flatten()[0]) + 1
        ranks[row] = top_k + tail_length - 1
        ids[row] = ids[row] + tail_ids[:tail_length].tolist()
        values[row] = values[row] + tail_probs[:tail_length].tolist()
    return ids, values, ranks, chosen_probs.tolist()
