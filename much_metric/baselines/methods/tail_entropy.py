"""Normalised entropy over the top ``delta`` **with the tail as one outcome** (a lower bound of the full entropy).

Token Entropy (``token_entropy_{delta}``) already is "the normalised entropy over the top delta": it renormalises the
``delta`` largest probabilities and divides by ``ln(delta)``. Renormalising forgets how much mass the top ``delta``
hold: a row ``[0.05, 0.05, ...]`` (95% of the mass elsewhere) and ``[0.5, 0.5, ...]`` look alike. This variant keeps
the stored (un-renormalised) ``p_1..p_delta`` and adds the rest of the vocabulary as one outcome
``r = max(0, 1 - sum_k p_k)``:

    ``H_tail = -(sum_k p_k log p_k + r log r) / ln(delta + 1)``

Grouping outcomes never increases entropy, so ``H_tail * ln(delta + 1)`` is a **lower bound of the entropy of the
full-vocabulary distribution** -- the quantity Token Entropy approximates (Malinin and Gales, 2021). Values in
[0, 1], higher = more uncertain.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from much_metric.baselines._arrays import TokenArrays, per_sample
from much_metric.baselines._topk import check_delta, check_delta_param, top_delta, xlogx
from much_metric.baselines.registry import Baseline, Requirements

__all__ = ["tail_entropy"]


def _tail_entropy_flat(arrays: TokenArrays, *, delta: int = 24) -> np.ndarray:
    delta = check_delta(delta, arrays.probabilities.shape[1])
    top = top_delta(arrays.probabilities, delta)
    rest = np.clip(1.0 - top.sum(axis=1), 0.0, 1.0)  # float32 rows can sum to 1 + 1e-7
    return -(xlogx(top).sum(axis=1) + xlogx(rest)) / np.log(delta + 1)


def tail_entropy(dataset: Any, *, delta: int = 24) -> list[np.ndarray]:
    """Entropy of ``(p_1, ..., p_delta, 1 - sum p)`` / ``ln(delta + 1)`` per token (see the module docstring).

    Returns
    -------
    list of length n_samples of ndarray of shape (n_tokens_i,)
        Values in [0, 1], higher = more uncertain.
    """
    return per_sample(_tail_entropy_flat, dataset, delta=delta)


BASELINES = (
    Baseline(
        name="tail_entropy_{delta}", compute=_tail_entropy_flat, display="Tail Entropy-{delta}", order=51,
        defaults=("tail_entropy_24",), check=check_delta_param, requirements=Requirements(top_k="delta"),
        description="entropy of the top-delta probabilities plus the rest of the vocabulary as one outcome, "
                    "/ ln(delta+1) (lower bound of the full entropy)",
    ),
)
