"""The two conformal procedures, as pure numpy functions over flat claim arrays.

Every function reads claims as flat arrays of equal length: ``claim_scores`` (uncertainties, higher = more likely
hallucinated), ``hallucinated`` (bool, label -1) and ``answer`` (an integer id of the answer each claim belongs to).
"""

from __future__ import annotations

import math

import numpy as np

from much_dataset.params import OPEN_FRACTION, check_param

__all__ = ["answer_level_threshold", "answer_risk_scores", "benjamini_hochberg", "check_alpha", "conformal_p_values",
           "min_answers_for", "select_claims"]


def check_alpha(alpha: float, owner: str) -> float:
    """``alpha`` as a float in (0, 1), else :class:`InvalidParameterError` naming ``owner``."""
    return float(check_param("alpha", alpha, OPEN_FRACTION, owner=owner))


def answer_risk_scores(claim_scores: np.ndarray, hallucinated: np.ndarray, answer: np.ndarray) -> np.ndarray:
    """Per distinct answer (in ``np.unique(answer)`` order), the lowest uncertainty among its hallucinated claims;
    ``+inf`` for an answer without one.

    Keeping the claims with uncertainty ``< r`` keeps only correct claims of that answer exactly when ``r`` is at
    most this value. (Mohri & Hashimoto write it with confidences: the largest confidence of a hallucinated claim,
    ``-inf`` if none; with uncertainties = minus confidences the sign and the extremum flip.)
    """
    scores = np.asarray(claim_scores, dtype=np.float64)
    positive = np.asarray(hallucinated, dtype=bool)
    _, inverse = np.unique(np.asarray(answer), return_inverse=True)
    risk = np.full(int(inverse.max()) + 1 if inverse.size else 0, np.inf)
    np.minimum.at(risk, inverse[positive], scores[positive])
    return risk


def min_answers_for(alpha: float) -> int:
    """The fewest calibration answers for which the answer-level threshold can keep anything:
    ``ceil((n + 1)(1 - alpha)) <= n`` needs ``n >= (1 - alpha) / alpha``."""
    alpha = check_alpha(alpha, "min_answers_for")
    return int(math.ceil((1.0 - alpha) / alpha - 1e-12))


def answer_level_threshold(risk_scores: np.ndarray, alpha: float) -> float:
    """Split-conformal threshold of Mohri & Hashimoto (ICML 2024), in uncertainties: keep a new answer's claims with
    uncertainty ``< threshold``.

    Guarantee: if the calibration answers and the new answer are exchangeable, then
    P(every kept claim of the new answer is correct) >= 1 - alpha (over the calibration draw and the new answer).

    ``risk_scores``: :func:`answer_risk_scores` of the ``n`` calibration answers. With confidences ``c = -u`` the
    paper's threshold is the ``ceil((n + 1)(1 - alpha))``-th smallest of the answers' largest hallucinated
    confidences, keeping claims with confidence above it; here that is the ``k``-th *largest* risk score,
    ``k = ceil((n + 1)(1 - alpha))``. ``-inf`` (keep nothing) when ``k > n``: too few answers for this alpha.
    """
    alpha = check_alpha(alpha, "answer_level_threshold")
    risk = np.sort(np.asarray(risk_scores, dtype=np.float64))
    n = risk.size
    k = int(math.ceil((n + 1) * (1.0 - alpha) - 1e-12))
    if k > n:
        return -math.inf
    return float(risk[n - k])


def conformal_p_values(test_scores: np.ndarray, null_scores: np.ndarray, n_calibration: int) -> np.ndarray:
    """Conformal p-values of Jin & Candès (2023) for "this claim is hallucinated" (the null), one per test claim.

    ``null_scores``: the uncertainties of the hallucinated calibration claims; ``n_calibration``: all calibration
    claims, hallucinated or not. A correct calibration claim gets the clipped score ``+inf`` (it never counts below a
    test claim), so ``p_j = (1 + #{hallucinated i: u_i <= u_j}) / (n_calibration + 1)`` -- the deterministic
    (tie-conservative) form of the paper's p-value. A low uncertainty against many hallucinated calibration claims
    gives a small p-value.
    """
    nulls = np.sort(np.asarray(null_scores, dtype=np.float64))
    if nulls.size > n_calibration:
        raise ValueError(f"{nulls.size} hallucinated calibration claims among only {n_calibration} claims")
    below = np.searchsorted(nulls, np.asarray(test_scores, dtype=np.float64), side="right")
    return (1.0 + below) / (n_calibration + 1.0)


def benjamini_hochberg(p_values: np.ndarray, alpha: float) -> np.ndarray:
    """Benjamini-Hochberg at level ``alpha``: select the ``k*`` smallest p-values, ``k* = max{k: p_(k) <= k alpha / m}``
    (none when no k qualifies). Returns a bool mask in the order of ``p_values``."""
    alpha = check_alpha(alpha, "benjamini_hochberg")
    p = np.asarray(p_values, dtype=np.float64)
    m = p.size
    selected = np.zeros(m, dtype=bool)
    if m == 0:
        return selected
    order = np.argsort(p, kind="stable")
    passing = np.flatnonzero(p[order] <= alpha * np.arange(1, m + 1) / m)
    if passing.size:
        selected[order[: passing[-1] + 1]] = True
    return selected


def select_claims(test_scores: np.ndarray, null_scores: np.ndarray, n_calibration: int, alpha: float) -> np.ndarray:
    """Conformal selection (Jin & Candès 2023): which test claims to keep so that the false discovery rate -- the
    expected fraction of hallucinated claims among the kept ones (0 when none is kept) -- is at most ``alpha``.

    Guarantee: if the calibration claims and the test claims are exchangeable (claims of one answer are not
    independent: with calibration and test split by answer this holds only approximately, and BENCHMARKS.md measures
    it), then E[#hallucinated kept / max(#kept, 1)] <= alpha over the calibration draw and the test batch.
    The selection is made jointly over the batch ``test_scores`` (one answer's claims in ``much monitor``).
    """
    return benjamini_hochberg(conformal_p_values(test_scores, null_scores, n_calibration), alpha)
