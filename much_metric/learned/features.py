"""Per-token inputs of the learned detectors, computed from the 24 stored probabilities only (numpy, vectorised).

Two views of the same ``(N_tokens, 24)`` candidate arrays (:class:`much_metric.baselines.TokenArrays`):

* :func:`token_features` -- the linear detector's features, shape ``(N_tokens, len(FEATURES))``:

  - ``max_likelihood``, ``token_likelihood``, ``token_entropy_24``: the probability baselines' own token scores,
    taken from the baseline registry (so they are exactly what ``much run`` scores);
  - ``wepr_1`` ... ``wepr_24``: the rank-wise entropy contributions ``-p_r log p_r`` of the stored top-24
    (WEPR, arXiv 2509.04492, learns one weight per rank over these terms; here the 24 stored, un-renormalised
    probabilities stand for WEPR's top-k);
  - ``tail_mass``: ``1 - sum_r p_r``, the probability outside the stored candidates;
  - ``sampled_rank``: rank of the sampled token among the candidates, / 23 (0 = the most likely one);
  - ``log_position``: ``log(1 + i)`` with ``i`` the token's index in the answer.

  Position *in the claim* (asked for in the issue) is not among them: a registered baseline receives the token
  arrays without the claim segmentation (``Baseline.compute(arrays)``), and the live monitor scores tokens before
  their claim is closed. The claim structure enters through the training loss instead (the metric's aggregator
  over each claim's tokens), and the position in the answer is causal.

* :func:`sequence_inputs` -- the sequence detector's per-token vector, shape ``(N_tokens, len(SEQUENCE_INPUTS))``:
  ``log p_r`` for the 24 ranks (floored at ``log 1e-12``), the sampled token's ``log p`` and the tail mass, as HALT
  feeds the top-20 log-probabilities of each step to its recurrent model (arXiv 2602.02888).

Every value is finite; the detectors standardise with the training mean and standard deviation.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from much_dataset.schema import TOP_K

__all__ = ["FEATURES", "SEQUENCE_INPUTS", "token_features", "sequence_inputs"]

#: Signal names of the probability baselines whose token scores are features.
BASELINE_FEATURES = ("max_likelihood", "token_likelihood", "token_entropy_24")
#: Column names of :func:`token_features`.
FEATURES = (*BASELINE_FEATURES, *(f"wepr_{r}" for r in range(1, TOP_K + 1)), "tail_mass", "sampled_rank",
            "log_position")
#: Column names of :func:`sequence_inputs`.
SEQUENCE_INPUTS = (*(f"log_p_{r}" for r in range(1, TOP_K + 1)), "log_p_sampled", "tail_mass")

_LOG_FLOOR = np.log(1e-12)


def _arrays(data: Any):
    from much_metric.baselines import token_arrays

    arrays = token_arrays(data).sorted_by_probability()
    if arrays.probabilities.shape[1] != TOP_K:
        raise ValueError(f"the learned detectors read {TOP_K} candidates per token (MUCH's top-{TOP_K}); these data "
                         f"have {arrays.probabilities.shape[1]}")
    return arrays


def _sampled(arrays) -> tuple[np.ndarray, np.ndarray]:
    """(rank, probability) of each sampled token; a token absent from its candidates gets rank 24, probability 0."""
    match = arrays.candidate_ids == arrays.output_tokens[:, None]
    found = match.any(axis=1)
    rank = np.where(found, match.argmax(axis=1), TOP_K)
    probability = np.where(found, arrays.probabilities[np.arange(arrays.n_tokens), np.minimum(rank, TOP_K - 1)], 0.0)
    return rank, probability


def _positions(arrays) -> np.ndarray:
    lengths = np.diff(arrays.offsets)
    return np.arange(arrays.n_tokens) - np.repeat(arrays.offsets[:-1], lengths)


def token_features(data: Any) -> np.ndarray:
    """The linear detector's features (see the module docstring), float64 array of shape ``(N_tokens, 30)``.

    Parameters
    ----------
    data : datasets.Dataset, pyarrow.Table, list of rows or TokenArrays
        A MUCH split (24 candidates per token).
    """
    from much_metric.baselines.registry import resolve

    arrays = _arrays(data)
    p = arrays.probabilities
    rank, sampled = _sampled(arrays)
    # token_likelihood is 1 - p(sampled) as the registry's, but a sampled token absent from the candidates (never
    # in MUCH) scores 1 here instead of failing.
    baseline = [1.0 - sampled if name == "token_likelihood" else resolve(name).compute(arrays, {}, {})
                for name in BASELINE_FEATURES]
    with np.errstate(divide="ignore", invalid="ignore"):
        plogp = np.where(p > 0, -p * np.log(p), 0.0)
    columns = [*(np.asarray(b, dtype=np.float64)[:, None] for b in baseline), plogp,
               np.clip(1.0 - p.sum(axis=1), 0.0, 1.0)[:, None], (rank / (TOP_K - 1))[:, None],
               np.log1p(_positions(arrays))[:, None]]
    return np.concatenate(columns, axis=1)


def sequence_inputs(data: Any) -> np.ndarray:
    """The sequence detector's per-token vectors (see the module docstring), float32 ``(N_tokens, 26)``."""
    arrays = _arrays(data)
    p = arrays.probabilities
    with np.errstate(divide="ignore"):
        log_p = np.maximum(np.log(p), _LOG_FLOOR)
        _, sampled = _sampled(arrays)
        log_sampled = np.maximum(np.log(sampled), _LOG_FLOOR)
    tail = np.clip(1.0 - p.sum(axis=1), 0.0, 1.0)
    return np.concatenate([log_p, log_sampled[:, None], tail[:, None]], axis=1).astype(np.float32)
