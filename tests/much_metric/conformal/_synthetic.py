"""Synthetic exchangeable answers for the conformal tests: i.i.d. answers, i.i.d. claims within each."""

from __future__ import annotations

import numpy as np

from much_metric.conformal import ClaimSet

LANGS = ("en", "fr", "es", "de")


def synthetic_claims(n_answers: int = 300, *, seed: int = 0, prevalence: float = 0.3, shift: float = 1.0,
                     langs: tuple[str, ...] = LANGS, prefix: str = "g") -> ClaimSet:
    """``n_answers`` answers of 1 to 6 claims; a claim is hallucinated with ``prevalence``, its uncertainty is
    normal noise plus ``shift`` when hallucinated; each answer has a language and an article shared by two answers."""
    rng = np.random.default_rng(seed)
    n_claims = rng.integers(1, 7, size=n_answers)
    answer = np.repeat(np.array([f"{prefix}{i}" for i in range(n_answers)], dtype=object), n_claims)
    lang = np.repeat(np.asarray(langs, dtype=object)[rng.integers(len(langs), size=n_answers)], n_claims)
    article = np.repeat(np.array([f"article{i // 2}" for i in range(n_answers)], dtype=object), n_claims)
    hallucinated = rng.random(n_claims.sum()) < prevalence
    scores = rng.normal(size=n_claims.sum()) + shift * hallucinated
    return ClaimSet(claim_scores=scores, answer=answer, hallucinated=hallucinated,
                    groups={"lang": lang, "article": article})
