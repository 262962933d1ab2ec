"""EigenScore (INSIDE, Chen et al., 2024; a baseline of the semantic isotropy seed): the spread of the answers'
sentence embeddings, as the mean log eigenvalue of their regularised covariance.

For M answers (the answer and its N samples, as ``semantic_isotropy``) with embeddings ``z_k`` (D-dim) stacked as
``Z`` (D x M): ``Σ = Zᵀ J_D Z`` with ``J_D = I - 11ᵀ/D`` (each vector centred over its features), and
``EigenScore = (1/M) Σ log(λ_k(Σ) + α)`` = ``(1/M) log det(Σ + α I)``, α = 0.001 (INSIDE's value). Higher = more
diverse = more uncertain; the signal is the logistic ``1 / (1 + e^-x)`` of it, in [0, 1] like the other sampling
detectors' (strictly increasing: the ranking is EigenScore's). Every claim gets its answer's value (a claim-level
signal, :mod:`much_metric.baselines.claims`).

INSIDE embeds each answer with the generating model's own middle-layer hidden state. Here the vectors come from the
run's encoder: ``--encoder observer:<model>@<layer>`` gives a causal LM's mean-pooled states at that layer (INSIDE
takes the last token's; for the embedded sample, ``observer:smollm2@15`` is SmolLM2's middle layer -- the observer,
not the Mu-SHROOM authors). An internals pack of the samples would hold every sample token's states at several layers
(``builder internals`` on the samples rows: ~N times the answers' pack, 4.5 GB per million tokens for SmolLM2) to
use one vector per sample; one forward pass per text through the encoder is cheaper and stores nothing, so
EigenScore takes that route.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from much_metric.baselines._arrays import TokenArrays
from much_metric.baselines.claims import answer_texts, claim_counts, claim_signal
from much_metric.baselines.encoders import prefetch
from much_metric.baselines.registry import Baseline

__all__ = ["EIGENSCORE_ALPHA", "eigenscore"]

#: INSIDE's regulariser of the covariance.
EIGENSCORE_ALPHA = 1e-3


def eigenscore(embeddings: np.ndarray, *, alpha: float = EIGENSCORE_ALPHA) -> float:
    """``(1/M) log det(Zᵀ J_D Z + α I)`` of M embeddings (M, D)."""
    z = np.asarray(embeddings, dtype=np.float64)
    if z.ndim != 2 or not z.shape[0]:
        raise ValueError(f"EigenScore needs a non-empty (M, D) matrix, got {z.shape}")
    centred = z - z.mean(axis=1, keepdims=True)  # J_D applied to each column of Z (one answer's vector)
    covariance = centred @ centred.T
    eigenvalues = np.linalg.eigvalsh(covariance)
    return float(np.log(np.clip(eigenvalues, 0.0, None) + alpha).mean())


def _compute(arrays: TokenArrays, *, samples: Any, encoder: Any, tokenizer: Any) -> list[np.ndarray]:
    answers = answer_texts(arrays, tokenizer, "eigenscore")
    prefetch(encoder, [*answers, *(t for gid in arrays.generation_ids for t in samples.of(gid))])
    values = []
    counts = claim_counts(arrays, "eigenscore").tolist()
    for gid, answer, count in zip(arrays.generation_ids, answers, counts, strict=True):
        score = eigenscore(encoder.encode([answer, *samples.of(gid)]))
        values.append(np.full(count, 0.5 * (1.0 + np.tanh(0.5 * score))))
    return claim_signal(arrays, values, "eigenscore")


BASELINES = (
    Baseline(name="eigenscore", compute=_compute, display="EigenScore", needs=("samples", "encoder", "tokenizer"),
             top_k=0, level="claim", order=305,
             description="logistic of (1/M) log det(Z^T J Z + 0.001 I) of the answer and its samples' embeddings "
                         "(INSIDE)"),
)
