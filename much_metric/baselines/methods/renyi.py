"""Rényi entropy of the top-``delta`` candidates, normalised (Rényi, 1961, "On measures of entropy and information").

With ``q`` the ``delta`` largest probabilities renormalised to sum to 1 (as Token Entropy),
``H_alpha(q) = log(sum_k q_k^alpha) / (1 - alpha)``, divided by ``ln(delta)`` so that values lie in [0, 1]
(0 = all mass on one candidate, 1 = uniform). Limits: ``alpha = 0`` is ``log(#{q_k > 0})`` (Hartley),
``alpha = 1`` the Shannon entropy (= ``token_entropy_{delta}``), ``alpha = inf`` the min-entropy ``-log max q``.
``alpha < 1`` weighs the many small candidates more (a long flat tail), ``alpha > 1`` the dominant ones.

Signal names: ``renyi_entropy_{alpha}_{delta}``, ``alpha`` a non-negative decimal or ``inf`` written as in the
name (``renyi_entropy_0.5_24``, ``renyi_entropy_2_24``, ``renyi_entropy_inf_24``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from much_dataset.schema import TOP_K
from much_metric.baselines._arrays import TokenArrays, per_sample
from much_metric.baselines._topk import check_delta, renormalised_top, xlogx
from much_metric.baselines.registry import Baseline, Requirements

__all__ = ["renyi_entropy"]


def _check_alpha(alpha: Any) -> float:
    if isinstance(alpha, bool) or not isinstance(alpha, int | float | np.integer | np.floating) or not alpha >= 0:
        raise ValueError(f"alpha (Rényi order) must be a number >= 0 or inf, got {alpha!r}")
    return float(alpha)


def _renyi_flat(arrays: TokenArrays, *, alpha: float, delta: int) -> np.ndarray:
    alpha = _check_alpha(alpha)
    q = renormalised_top(arrays, delta)
    delta = q.shape[1]
    if alpha == 0.0:
        entropy = np.log((q > 0).sum(axis=1))
    elif alpha == 1.0:
        entropy = -xlogx(q).sum(axis=1)
    elif np.isinf(alpha):
        entropy = -np.log(q.max(axis=1))
    elif alpha == 2.0:
        entropy = -np.log(np.einsum("ij,ij->i", q, q))  # collision entropy; faster than q ** 2
    elif alpha == 0.5:
        entropy = 2.0 * np.log(np.sqrt(q).sum(axis=1))
    else:
        # q ** alpha of a 0 is 0 for alpha > 0; the sum is >= max(q) ** alpha > 0.
        entropy = np.log((q**alpha).sum(axis=1)) / (1.0 - alpha)
    return entropy / np.log(delta)


def renyi_entropy(dataset: Any, *, alpha: float = 2.0, delta: int = 24) -> list[np.ndarray]:
    """Normalised Rényi entropy of order ``alpha`` of the top-``delta`` candidates (formula in the module docstring).

    Parameters
    ----------
    dataset : datasets.Dataset, pyarrow.Table, list of rows or TokenArrays
    alpha : float >= 0 or inf, default 2.0
    delta : int in [2, K], default 24

    Returns
    -------
    list of length n_samples of ndarray of shape (n_tokens_i,)
        Values in [0, 1], higher = more uncertain.
    """
    return per_sample(_renyi_flat, dataset, alpha=alpha, delta=delta)


def _check(params: dict[str, Any]) -> None:
    _check_alpha(params["alpha"])
    check_delta(params["delta"], TOP_K)


BASELINES = (
    Baseline(
        name="renyi_entropy_{alpha}_{delta}", compute=_renyi_flat, display="Rényi Entropy-{alpha}-{delta}", order=52,
        params={"alpha": r"[0-9]+(?:\.[0-9]+)?|inf"}, defaults=("renyi_entropy_0.5_24", "renyi_entropy_2_24"),
        check=_check, requirements=Requirements(top_k="delta"),
        description="Rényi entropy of order alpha of the top-delta probabilities renormalised, / ln(delta) "
                    "(Rényi 1961)",
    ),
)
