"""Ranks and rank correlation of the boards: competition ranks ("1224", ties share the best rank) and Kendall's
tau-b (ties corrected), numpy only; tau is checked against ``scipy.stats.kendalltau`` by the tests."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = ["competition_ranks", "kendall_tau"]


def competition_ranks(values: Sequence[float]) -> list[int]:
    """Rank 1 = highest value; equal values share the best rank of their group (1, 2, 2, 4)."""
    array = np.asarray(values, dtype=np.float64)
    return [int(1 + np.count_nonzero(array > value)) for value in array]


def kendall_tau(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Kendall's tau-b of two paired sequences (at least 2 pairs); None when either is constant."""
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if len(x) != len(y) or len(x) < 2:
        raise ValueError(f"kendall_tau needs two sequences of the same length >= 2, got {len(x)} and {len(y)}")
    i, j = np.triu_indices(len(x), k=1)
    dx, dy = np.sign(x[i] - x[j]), np.sign(y[i] - y[j])
    concordance = float(np.sum(dx * dy))
    pairs_x, pairs_y = float(np.count_nonzero(dx)), float(np.count_nonzero(dy))
    if pairs_x == 0 or pairs_y == 0:
        return None
    return concordance / math.sqrt(pairs_x * pairs_y)
