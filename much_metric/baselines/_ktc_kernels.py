"""KTC's kernel and entropy, vectorised over a batch of tokens (spec 8; numpy only).

For every token, the ``delta`` candidates carry probabilities ``q`` (descending, not renormalised) and a symmetric
adjacency ``A`` (unit diagonal). A positive semi-definite kernel ``K`` (trace 1) is built from ``A``, weighted by
``q``, and the token's score is the normalised von Neumann entropy of that kernel. All tokens of a batch go through
the same batched LAPACK calls (``numpy.linalg.eigh`` / ``eigvalsh`` on an ``(n, delta, delta)`` stack): there is no
per-token ``expm``; the heat kernel ``expm(-tau L)`` is ``V exp(-tau w) V^T`` from the eigendecomposition of the
Laplacian ``L``.

The reference computes in float32 (torch defaults); this module computes in float64, so its scores differ from the
reference's by float32 rounding (about 1e-6), not by formula.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["EPSILON", "KERNELS", "NORMALIZATIONS", "ktc_token_scores"]

#: Eigenvalue floor of the reference (``EPSILON`` in its ``signals/utils.py``): clip kernel, augm shift, entropy.
EPSILON = 1e-5
KERNELS = ("heat", "square", "augm", "clip")
NORMALIZATIONS = ("scale", "comb", "none")
#: Tokens per batched LAPACK call: bounds the (chunk, delta, delta) float64 temporaries to a few tens of MB.
_CHUNK = 4096


def _check_options(tau: Any, kernel: Any, normalization: Any, alpha: Any) -> tuple[float, float]:
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
    if normalization not in NORMALIZATIONS:
        raise ValueError(f"normalization must be one of {NORMALIZATIONS}, got {normalization!r}")
    if isinstance(tau, bool) or not isinstance(tau, int | float | np.floating | np.integer) or not np.isfinite(tau) \
            or tau < 0:
        raise ValueError(f"tau (heat diffusion time) must be a finite number >= 0, got {tau!r}")
    if isinstance(alpha, bool) or not isinstance(alpha, int | float | np.floating | np.integer) \
            or not 0 <= alpha <= 1:
        raise ValueError(f"alpha (weight of the probabilities in 'comb') must be in [0, 1], got {alpha!r}")
    return float(tau), float(alpha)


def _check_arrays(probabilities: Any, adjacency: Any) -> tuple[np.ndarray, np.ndarray]:
    q = np.asarray(probabilities, dtype=np.float64)
    a = np.asarray(adjacency, dtype=np.float64)
    if q.ndim != 2 or q.shape[1] < 2:
        raise ValueError(f"probabilities must have shape (n_tokens, delta) with delta >= 2, got {q.shape}")
    if a.shape != (q.shape[0], q.shape[1], q.shape[1]):
        raise ValueError(f"adjacency must have shape (n_tokens, delta, delta) = {(q.shape[0], q.shape[1], q.shape[1])}"
                         f", got {a.shape}")
    bad = ~np.isfinite(q) | (q < 0) | (q > 1)
    if bad.any():
        token, column = np.argwhere(bad)[0]
        raise ValueError(f"token {token}: probabilities[{token}, {column}] = {q[token, column]} is not in [0, 1]")
    if (bad := np.flatnonzero(q.sum(axis=1) <= 0)).size:
        raise ValueError(f"token {bad[0]}: all {q.shape[1]} candidate probabilities are 0; KTC is undefined")
    if not np.isfinite(a).all():
        raise ValueError(f"token {np.argwhere(~np.isfinite(a))[0][0]}: adjacency holds a non-finite value")
    asymmetric = np.abs(a - a.transpose(0, 2, 1)).max(axis=(1, 2)) > 1e-9 if a.size else np.zeros(0, bool)
    if (bad := np.flatnonzero(asymmetric)).size:
        raise ValueError(f"token {bad[0]}: adjacency is not symmetric")
    diagonal = np.diagonal(a, axis1=1, axis2=2)
    if (bad := np.flatnonzero((diagonal != 1).any(axis=1))).size:
        raise ValueError(f"token {bad[0]}: adjacency must have a unit diagonal, got {diagonal[bad[0]].tolist()}")
    return q, a


def _kernel(a: np.ndarray, kernel: str, tau: float) -> tuple[np.ndarray | None, np.ndarray, np.ndarray | None]:
    """``(K, eigenvalues of K, eigenvectors of K or None)`` with trace(K) = 1; K is None when only its eigenvalues
    are cheap to give (the caller builds it from the eigenvectors when it needs it)."""
    if kernel == "heat":
        laplacian = -a
        idx = np.arange(a.shape[1])
        laplacian[:, idx, idx] += a.sum(axis=1)  # column sums, as the reference (A is symmetric anyway)
        w, v = np.linalg.eigh(laplacian)
        # Shift by the smallest eigenvalue (0 for a Laplacian) before exp: same kernel after the trace division,
        # no overflow for large tau.
        e = np.exp(-tau * (w - w[:, :1]))
        e /= e.sum(axis=1, keepdims=True)
        return None, e, v
    if kernel == "clip":
        w, v = np.linalg.eigh(a)
        w = np.maximum(w, EPSILON)
        return None, w / w.sum(axis=1, keepdims=True), v
    if kernel == "square":
        k = a @ a
    else:  # augm: shift the diagonal by the most negative eigenvalue (at most -EPSILON)
        shift = np.minimum(np.linalg.eigvalsh(a)[:, 0], -EPSILON)
        k = a.copy()
        idx = np.arange(a.shape[1])
        k[:, idx, idx] -= shift[:, None]
    k /= np.trace(k, axis1=1, axis2=2)[:, None, None]
    return k, np.empty(0), None


def _entropy(eigenvalues: np.ndarray, delta: int) -> np.ndarray:
    lam = np.maximum(eigenvalues, EPSILON)
    return -(lam * np.log(lam)).sum(axis=1) / np.log(delta)


def _scores(q: np.ndarray, a: np.ndarray, *, tau: float, kernel: str, normalization: str, alpha: float) -> np.ndarray:
    k, eigenvalues, vectors = _kernel(a, kernel, tau)
    if normalization == "none" and k is None:
        return _entropy(eigenvalues, q.shape[1])  # eigenvalues of K are known: no second decomposition
    if k is None:
        k = (vectors * eigenvalues[:, None, :]) @ vectors.transpose(0, 2, 1)
    if normalization == "scale":
        root = np.sqrt(q)
        k = root[:, :, None] * k * root[:, None, :]
    elif normalization == "comb":
        # The code's weights (alpha on the probabilities); the reference's docstring states the reverse.
        k = (1.0 - alpha) * k
        idx = np.arange(q.shape[1])
        k[:, idx, idx] += alpha * q
    trace = np.trace(k, axis1=1, axis2=2)
    if (bad := np.flatnonzero(~(trace > 0))).size:
        raise ValueError(f"token {bad[0]}: the normalised kernel has trace {trace[bad[0]]}; KTC is undefined")
    return _entropy(np.linalg.eigvalsh(k / trace[:, None, None]), q.shape[1])


def ktc_token_scores(
    probabilities: Any,
    adjacency: Any,
    *,
    tau: float,
    kernel: str = "heat",
    normalization: str = "scale",
    alpha: float = 0.5,
) -> np.ndarray:
    """KTC score of each token: the normalised von Neumann entropy of its candidates' kernel (spec 8).

    Parameters
    ----------
    probabilities : array-like of shape (n_tokens, delta)
        Candidate probabilities ``q``, by decreasing probability, **not** renormalised (MUCH's ``logits_values``).
    adjacency : array-like of shape (n_tokens, delta, delta)
        Symmetric, unit diagonal; entry (a, b) is how much candidates a and b do *not* contradict each other
        (see :func:`much_metric.baselines.ktc.ktc_adjacency`).
    tau : float
        Diffusion time of the heat kernel (>= 0; unused by the other kernels).
    kernel : {"heat", "square", "augm", "clip"}, default "heat"
        ``heat``: ``expm(-tau L)`` with ``L = diag(column sums of A) - A``; ``square``: ``A @ A``; ``augm``: ``A``
        with its diagonal shifted by ``-min(lambda_min(A), -1e-5)``; ``clip``: ``A`` with its eigenvalues clamped
        at 1e-5. Each divided by its trace.
    normalization : {"scale", "comb", "none"}, default "scale"
        ``scale``: ``Q^1/2 K Q^1/2`` with ``Q = diag(q)``; ``comb``: ``alpha Q + (1 - alpha) K`` (the formula the
        reference runs; its docstring says the reverse); ``none``: ``K``.
    alpha : float, default 0.5
        Weight of ``Q`` in ``comb``, in [0, 1].

    Returns
    -------
    ndarray of shape (n_tokens,)
        ``-sum(l ln l) / ln(delta)`` over the eigenvalues ``l`` of the normalised kernel divided by its trace, each
        eigenvalue clamped at 1e-5 first (so the floor is about ``(delta - 1) * 1.2e-4 / ln(delta)``, not 0).
        In [0, 1]; higher = more uncertain.

    Raises
    ------
    ValueError
        Naming the token index: wrong shapes, probabilities outside [0, 1] or all zero, an adjacency that is not
        finite, not symmetric or without a unit diagonal; unknown kernel/normalisation, tau < 0, alpha outside
        [0, 1].
    """
    tau, alpha = _check_options(tau, kernel, normalization, alpha)
    q, a = _check_arrays(probabilities, adjacency)
    out = np.empty(q.shape[0])
    for start in range(0, q.shape[0], _CHUNK):
        part = slice(start, start + _CHUNK)
        out[part] = _scores(q[part], a[part], tau=tau, kernel=kernel, normalization=normalization, alpha=alpha)
    return out
