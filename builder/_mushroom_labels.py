"""Character-level Mu-SHROOM spans -> claim labels (docs/reference-behaviour.md#mushroom-import). Pure numpy, no model.

A claim covers the characters ``[start, end)`` of the output text spanned by its tokens. A claim is hallucinated
(-1) when that range intersects a hallucinated span:

* ``rule="reference"``: the reference's rule -- soft-label spans with probability >= ``threshold`` (1.0, i.e. every
  annotator marked it), span ends treated as INCLUSIVE (the reference adds one character);
* ``rule="hard"``: Mu-SHROOM's majority ``hard_labels`` spans, ends exclusive (Mu-SHROOM's own convention).

:func:`claim_max_soft` gives, per claim, the largest soft-label probability over its characters (ends exclusive):
the fraction of annotators who marked some character of it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from much_dataset import schema
from much_metric import mushroom
from much_metric.mushroom import span_mask

__all__ = ["RULES", "claim_char_ranges", "span_mask", "claim_labels", "claim_max_soft", "hallucinated_mask"]

RULES = ("reference", "hard")


def claim_char_ranges(token_ends: Sequence[int], chunks: Sequence[Sequence[int]]) -> np.ndarray:
    """``(n_claims, 2)`` character ranges ``[start, end)`` of the claims; ``token_ends[i]`` = end of token ``i``
    (used as given, not checked to be non-decreasing)."""
    ends = np.asarray(token_ends, dtype=np.int64)
    return mushroom.claim_char_ranges(np.stack([np.concatenate([[0], ends[:-1]]), ends], axis=1), chunks)


def _covered(ranges: np.ndarray, mask: np.ndarray) -> np.ndarray:
    cumulative = np.concatenate([[0], np.cumsum(mask, dtype=np.int64)])
    clipped = np.clip(ranges, 0, len(mask))
    return cumulative[clipped[:, 1]] - cumulative[clipped[:, 0]] > 0


def hallucinated_mask(n_chars: int, row: dict, *, rule: str = "reference", threshold: float = 1.0) -> np.ndarray:
    """Per character of the output text, whether ``row`` (a Mu-SHROOM record) marks it hallucinated under ``rule``."""
    if rule == "reference":
        spans = [(s["start"], s["end"]) for s in row.get("soft_labels") or [] if float(s["prob"]) >= threshold]
        return span_mask(n_chars, spans, inclusive_end=True)
    if rule == "hard":
        return span_mask(n_chars, row.get("hard_labels") or [])
    raise ValueError(f"rule must be one of {RULES}, got {rule!r}")


def claim_labels(ranges: np.ndarray, mask: np.ndarray) -> list[int]:
    """-1 for claims whose character range intersects ``mask``, +1 otherwise."""
    hit = _covered(np.asarray(ranges, dtype=np.int64), mask)
    return np.where(hit, schema.HALLUCINATED, schema.CORRECT).astype(int).tolist()


def claim_max_soft(ranges: np.ndarray, soft_labels: Sequence[dict], n_chars: int) -> list[float]:
    """Largest soft-label probability over each claim's characters (0.0 where no annotator marked any)."""
    per_char = np.zeros(n_chars + 1, dtype=np.float64)  # +1: a sentinel so empty ranges reduce to 0
    for span in soft_labels:
        start, end = max(int(span["start"]), 0), min(int(span["end"]), n_chars)
        if end > start:
            np.maximum(per_char[start:end], float(span["prob"]), out=per_char[start:end])
    ranges = np.clip(np.asarray(ranges, dtype=np.int64), 0, n_chars)
    return [float(per_char[a:b].max()) if b > a else 0.0 for a, b in ranges]
