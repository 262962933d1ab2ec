"""BoostedProb (Dinh and Niehues, 2025, "Are Generative Models Underconfident? Better Quality Estimation with
Boosted Model Probability", EMNLP 2025; LM-Polygraph PR #405), approximated on the 24 stored candidates.

Models spread probability over several equally good continuations; BoostedProb credits a sampled token with the
mass of all of them. With ``p_(1) >= p_(2) >= ...`` the sorted probabilities, gap ``j`` is a *jump* when
``p_(j) - p_(j+1) > p_jump * p_(j)`` and ``p_(j) - p_(j+1) > epsilon`` (the authors' default "difference jump"
rule, ``p_jump = 0.3``, ``epsilon = 0.005``). The **dominant** tokens are ranks ``1..J`` with ``J`` the last jump
(none if there is no jump). Then

    ``BoostedProb = sum of the dominant probabilities`` if the sampled token is dominant, else ``p(sampled)``

and the score is ``1 - BoostedProb`` in [0, 1] (higher = more uncertain).

What the approximation changes: only the 23 gaps between the stored candidates are seen; a jump at or after the
24th candidate (gap to the unstored 25th) is missed, so the dominant set is cut at the last jump among the stored
ones. This is **exact whenever p_(24) <= epsilon** (then no later gap can exceed epsilon), which holds for almost
every MUCH token; where it does not, the score can only be higher (a smaller dominant set or none).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from much_metric.baselines._arrays import TokenArrays, per_sample
from much_metric.baselines._topk import rank_of_sampled, sorted_arrays
from much_metric.baselines.registry import Baseline

__all__ = ["BOOSTED_EPSILON", "BOOSTED_P_JUMP", "boosted_prob", "dominant_count"]

#: Relative size of a jump between consecutive sorted probabilities (the authors' default).
BOOSTED_P_JUMP = 0.3
#: Absolute size of a jump (the authors' default).
BOOSTED_EPSILON = 0.005


def dominant_count(sorted_probabilities: np.ndarray, *, p_jump: float = BOOSTED_P_JUMP,
                   epsilon: float = BOOSTED_EPSILON) -> np.ndarray:
    """Number of dominant candidates per row of decreasing probabilities, shape (N,); 0 where there is no jump."""
    p = sorted_probabilities
    gap = p[:, :-1] - p[:, 1:]
    jump = (gap > p_jump * p[:, :-1]) & (gap > epsilon)
    # The last jump's 1-based position, 0 without a jump.
    return np.where(jump, np.arange(1, p.shape[1]), 0).max(axis=1) if jump.shape[1] else np.zeros(len(p), int)


def _boosted_flat(arrays: TokenArrays) -> np.ndarray:
    if arrays.probabilities.shape[1] < 2:
        raise ValueError("BoostedProb needs at least 2 stored candidates per token")
    arrays = sorted_arrays(arrays)
    p = arrays.probabilities
    rank = rank_of_sampled(arrays)
    rows = np.arange(arrays.n_tokens)
    n_dominant = dominant_count(p)
    dominant_mass = np.einsum("ij,ij->i", p, np.arange(p.shape[1]) < n_dominant[:, None])
    boosted = np.where(rank < n_dominant, dominant_mass, p[rows, rank])
    return np.clip(1.0 - boosted, 0.0, 1.0)  # float32 rows can sum to 1 + 1e-7


def boosted_prob(dataset: Any) -> list[np.ndarray]:
    """``1 - BoostedProb`` per token (formula and approximation in the module docstring).

    The sampled token must be among the stored candidates (always in MUCH); otherwise ValueError names it.

    Returns
    -------
    list of length n_samples of ndarray of shape (n_tokens_i,)
        Values in [0, 1], higher = more uncertain.
    """
    return per_sample(_boosted_flat, dataset)


BASELINES = (
    Baseline(
        name="boosted_prob", compute=_boosted_flat, display="BoostedProb", order=42,
        description="1 - (dominant mass if the sampled token is dominant else its p) (Dinh & Niehues 2025, top 24)",
    ),
)
