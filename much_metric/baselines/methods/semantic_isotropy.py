"""Semantic isotropy (the semantic isotropy seed, section 3): how dispersed N answers to one prompt are on the unit
sphere, as the normalised von Neumann entropy of their cosine kernel.

For M texts with embeddings ``e_i`` (an encoder, :mod:`much_metric.baselines.encoders`): ``ē_i = e_i / ||e_i||``,
``K = Ē Ēᵀ`` (the cosine kernel, eq. 1), ``K̄ = K / trace(K)``, ``vNE = -Σ λ_i log λ_i`` over the eigenvalues of
``K̄`` (eq. 2, ``0 log 0 = 0``), and ``I = vNE / log M`` (eq. 3) in [0, 1]: 0 when every answer points the same way,
1 when they are orthogonal. Higher = more dispersed = less trustworthy: the signal's sign as MUCH wants it.

**Which answers.** The seed scores a prompt by its N sampled responses. MUCH labels one answer, so
``semantic_isotropy`` takes the answer **and** its N samples (M = N + 1): the answer is one more draw of the same
generating configuration (for ``orailix/MUCH``; for the embedded sample the answer was written by a Mu-SHROOM model
and the samples by the observer), and leaving it out would give every answer of a prompt the same score whatever it
says. ``semantic_isotropy_samples`` is the seed's prompt-level score on the N samples alone. The seed's alternative
kernel measures (its table 1), on the same M vectors and mapped into [0, 1] with the same sign:
``semantic_isotropy_frobenius`` = ``(M - ||K||_F) / (M - √M)`` (``||K||_F`` runs from √M, isotropic, to M, aligned)
and ``semantic_isotropy_logdet`` = ``det(K)^(1/M)`` = ``exp(log det K / M)`` (0 when K is singular -- M above the
embedding dimension, or two identical answers -- 1 when isotropic).

Every claim of an answer gets the answer's score (a claim-level signal, :mod:`much_metric.baselines.claims`), so
these signals rank answers, not claims within an answer. **Ours** (not in the seed): ``claim_isotropy`` scores each
claim by the isotropy of the claim and, from every sample, the sentence whose embedding is closest to the claim's
(M = N + 1): a claim that the samples restate tightly scores low, one each sample answers differently scores high.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from much_metric.baselines._arrays import TokenArrays
from much_metric.baselines.claims import answer_texts, claim_counts, claim_signal, claim_texts
from much_metric.baselines.encoders import prefetch
from much_metric.baselines.registry import Baseline

__all__ = ["cosine_kernel", "frobenius_isotropy", "logdet_isotropy", "semantic_isotropy_score"]

NEEDS = ("samples", "encoder", "tokenizer")


def cosine_kernel(embeddings: np.ndarray) -> np.ndarray:
    """``K = Ē Ēᵀ`` of the row-normalised embeddings (M, D) -> (M, M); a zero vector is an error."""
    embeddings = np.asarray(embeddings, dtype=np.float64)
    norms = np.linalg.norm(embeddings, axis=1, keepdims=True)
    if embeddings.ndim != 2 or not embeddings.shape[0]:
        raise ValueError(f"semantic isotropy needs a non-empty (M, D) matrix of embeddings, got {embeddings.shape}")
    if (norms == 0).any() or not np.isfinite(embeddings).all():
        raise ValueError("semantic isotropy: an embedding is zero or not finite (an empty text?)")
    unit = embeddings / norms
    return unit @ unit.T


def semantic_isotropy_score(embeddings: np.ndarray) -> float:
    """``vNE(K) / log M`` of M embeddings (eq. 3); 0 for M = 1 (a single answer has no dispersion)."""
    kernel = cosine_kernel(embeddings)
    m = kernel.shape[0]
    if m < 2:
        return 0.0
    eigenvalues = np.clip(np.linalg.eigvalsh(kernel / np.trace(kernel)), 0.0, None)
    nonzero = eigenvalues[eigenvalues > 0]
    return float(-(nonzero * np.log(nonzero)).sum() / np.log(m))


def frobenius_isotropy(embeddings: np.ndarray) -> float:
    """``(M - ||K||_F) / (M - √M)``: 0 aligned, 1 isotropic (0 for M = 1)."""
    kernel = cosine_kernel(embeddings)
    m = kernel.shape[0]
    if m < 2:
        return 0.0
    return float(np.clip((m - np.linalg.norm(kernel, "fro")) / (m - np.sqrt(m)), 0.0, 1.0))


def logdet_isotropy(embeddings: np.ndarray) -> float:
    """``det(K)^(1/M)``: 0 singular (aligned), 1 isotropic."""
    kernel = cosine_kernel(embeddings)
    sign, logdet = np.linalg.slogdet(kernel)
    if sign <= 0:
        return 0.0
    return float(np.clip(np.exp(logdet / kernel.shape[0]), 0.0, 1.0))


_MEASURES = {"vne": semantic_isotropy_score, "frobenius": frobenius_isotropy, "logdet": logdet_isotropy}


def _answer_level(arrays: TokenArrays, resources: dict[str, Any], measure: str, with_answer: bool,
                  method: str) -> list[np.ndarray]:
    samples, encoder = resources["samples"], resources["encoder"]
    answers = answer_texts(arrays, resources["tokenizer"], method)
    prefetch(encoder, [*answers, *(t for gid in arrays.generation_ids for t in samples.of(gid))])
    values = []
    for gid, answer in zip(arrays.generation_ids, answers, strict=True):
        texts = ([answer] if with_answer else []) + list(samples.of(gid))
        values.append(_MEASURES[measure](encoder.encode(texts)))
    return claim_signal(arrays, [np.full(count, value) for value, count in
                                 zip(values, claim_counts(arrays, method).tolist(), strict=True)], method)


def _claim_level(arrays: TokenArrays, *, samples: Any, encoder: Any, tokenizer: Any) -> list[np.ndarray]:
    claims = claim_texts(arrays, tokenizer, "claim_isotropy")
    prefetch(encoder, [*(t for texts in claims for t in texts),
                       *(u for gid in arrays.generation_ids for group in samples.sentences(gid) for u in group)])
    values = []
    for gid, texts in zip(arrays.generation_ids, claims, strict=True):
        sentences = samples.sentences(gid)
        claim_vectors = encoder.encode(texts)
        picked = []
        for group in sentences:  # the sentence of each sample closest to each claim
            if not group:
                continue
            vectors = encoder.encode(list(group))
            similarity = _unit(claim_vectors) @ _unit(vectors).T
            picked.append(vectors[similarity.argmax(axis=1)])
        row = []
        for index in range(len(texts)):
            stack = np.vstack([claim_vectors[index : index + 1], *[p[index : index + 1] for p in picked]])
            row.append(semantic_isotropy_score(stack))
        values.append(row)
    return claim_signal(arrays, values, "claim_isotropy")


def _unit(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1.0, norms)


def _answer_method(measure: str, with_answer: bool, name: str):
    def compute(arrays: TokenArrays, *, samples: Any, encoder: Any, tokenizer: Any) -> list[np.ndarray]:
        resources = {"samples": samples, "encoder": encoder, "tokenizer": tokenizer}
        return _answer_level(arrays, resources, measure, with_answer, name)
    return compute


BASELINES = (
    Baseline(name="semantic_isotropy", compute=_answer_method("vne", True, "semantic_isotropy"),
             display="Semantic isotropy", needs=NEEDS, top_k=0, level="claim", order=300,
             description="vNE(cosine kernel)/log M of the answer and its N samples (isotropy seed eq. 3)"),
    Baseline(name="semantic_isotropy_samples", compute=_answer_method("vne", False, "semantic_isotropy_samples"),
             display="Semantic isotropy (samples only)", needs=NEEDS, top_k=0, level="claim", order=301,
             description="vNE(cosine kernel)/log N of the N samples alone (the seed's prompt-level score)"),
    Baseline(name="semantic_isotropy_frobenius",
             compute=_answer_method("frobenius", True, "semantic_isotropy_frobenius"),
             display="Isotropy (Frobenius)", needs=NEEDS, top_k=0, level="claim", order=302,
             description="(M - ||K||_F)/(M - sqrt M) of the answer and its samples' cosine kernel (seed table 1)"),
    Baseline(name="semantic_isotropy_logdet", compute=_answer_method("logdet", True, "semantic_isotropy_logdet"),
             display="Isotropy (log-det)", needs=NEEDS, top_k=0, level="claim", order=303,
             description="det(K)^(1/M) of the answer and its samples' cosine kernel (seed table 1)"),
    Baseline(name="claim_isotropy", compute=_claim_level, display="Claim isotropy (ours)", needs=NEEDS,
             top_k=0, level="claim", order=304,
             description="isotropy of a claim and each sample's closest sentence (ours, not the seed's)"),
)
