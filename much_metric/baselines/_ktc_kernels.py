"""KTC's kernel and entropy, vectorised over a batch of tokens (docs/reference-behaviour.md#signals; numpy only).

For every token, the ``delta`` candidates carry probabilities ``q`` (descending, not renormalised) and a symmetric
adjacency ``A`` (unit diagonal). A positive semi-definite kernel ``K`` (trace 1) is built from ``A``, weighted by
``q``, and the token's score is the normalised von Neumann entropy of that kernel. All tokens of a batch go through
the same batched calls: the heat kernel ``expm(-tau L)`` comes from a handful of batched matrix products (a Taylor
polynomial of the similarity graph's Laplacian, see :func:`heat_kernel_taylor`; one ``eigh`` per token only for
``tau * delta > 300``), and the entropy from one batched ``numpy.linalg.eigvalsh`` on the ``(n, delta, delta)`` stack
of normalised kernels -- the one LAPACK call per token that remains, and the floor of the cost. There is no
per-token ``expm``. With ``device`` (a torch device such as ``"cuda"``), that last batched eigen-decomposition runs
in torch on the device instead, still in float64 (the kernels are built on the CPU either way).

The reference computes in float32 (torch defaults); this module computes in float64, so its scores differ from the
reference's by float32 rounding (about 1e-6), not by formula.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

__all__ = ["EPSILON", "KERNELS", "NORMALIZATIONS", "check_device", "heat_kernel_taylor", "ktc_token_scores"]

#: Eigenvalue floor of the reference (``EPSILON`` in its ``signals/utils.py``): clip kernel, augm shift, entropy.
EPSILON = 1e-5
KERNELS = ("heat", "square", "augm", "clip")
NORMALIZATIONS = ("scale", "comb", "none")
#: Tokens per batched call: keeps the (chunk, delta, delta) float64 temporaries (2.4 MB at delta=24) in cache.
_CHUNK = 512
#: Tokens per batched call when the eigen-decomposition runs on a torch device: fewer, larger transfers and launches.
_DEVICE_CHUNK = 16384
#: Heat kernel by Taylor polynomial while tau * delta stays far from exp's range (else one eigh per token).
_TAYLOR_MAX_TAU_DELTA = 300.0
_TAYLOR_NORM = 0.5
_TAYLOR_COEFFICIENTS = tuple(1.0 / math.factorial(k) for k in range(13))


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


def _check_probabilities(probabilities: Any) -> np.ndarray:
    q = np.asarray(probabilities, dtype=np.float64)
    if q.ndim != 2 or q.shape[1] < 2:
        raise ValueError(f"probabilities must have shape (n_tokens, delta) with delta >= 2, got {q.shape}")
    bad = ~np.isfinite(q) | (q < 0) | (q > 1)
    if bad.any():
        token, column = np.argwhere(bad)[0]
        raise ValueError(f"token {token}: probabilities[{token}, {column}] = {q[token, column]} is not in [0, 1]")
    if (bad := np.flatnonzero(q.sum(axis=1) <= 0)).size:
        raise ValueError(f"token {bad[0]}: all {q.shape[1]} candidate probabilities are 0; KTC is undefined")
    return q


def _check_arrays(probabilities: Any, adjacency: Any) -> tuple[np.ndarray, np.ndarray]:
    q = _check_probabilities(probabilities)
    a = np.asarray(adjacency, dtype=np.float64)
    if a.shape != (q.shape[0], q.shape[1], q.shape[1]):
        raise ValueError(f"adjacency must have shape (n_tokens, delta, delta) = {(q.shape[0], q.shape[1], q.shape[1])}"
                         f", got {a.shape}")
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
    """``(K, eigenvalues of K, eigenvectors of K or None)``; K is None when only its eigenvalues are cheap to give
    (the caller builds it from the eigenvectors when it needs it). The eigenvalues sum to 1; K is only known to have
    a positive trace (the caller divides where the scale matters: only ``comb`` mixes K with another matrix)."""
    if kernel == "heat":
        if tau * a.shape[1] <= _TAYLOR_MAX_TAU_DELTA:
            return heat_kernel_taylor(a, tau), np.empty(0), None
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
        return a @ a, np.empty(0), None
    # augm: shift the diagonal by the most negative eigenvalue (at most -EPSILON)
    shift = np.minimum(np.linalg.eigvalsh(a)[:, 0], -EPSILON)
    k = a.copy()
    idx = np.arange(a.shape[1])
    k[:, idx, idx] -= shift[:, None]
    return k, np.empty(0), None


def heat_kernel_taylor(a: np.ndarray, tau: float) -> np.ndarray:
    """``expm(-tau L)`` up to a positive factor per token, by batched matrix products instead of an eigh per token.

    With ``B = J - A`` (zero diagonal, the candidates' *similarity*) and ``L_B`` its Laplacian,
    ``L = delta I - J - L_B`` and ``J`` commutes with ``L_B`` (both annihilate the ones vector), hence
    ``expm(-tau L) = e^(-tau delta) expm(tau L_B) + (1 - e^(-tau delta)) / delta J``. ``B`` is sparse in practice (a
    candidate shares neighbours with few others), so ``tau L_B - c I`` (``c`` its largest diagonal entry, which
    makes its infinity norm ``c``) is small: a degree-12 Taylor polynomial (Paterson-Stockmeyer, 5 products) after
    ``s`` halvings and ``s`` squarings, tokens grouped by ``s``; truncation error below 1e-13 relative.
    """
    n, delta, _ = a.shape
    idx = np.arange(delta)
    x = tau * (a - 1.0)  # -tau B, off-diagonal
    x[:, idx, idx] = 0.0
    degree = -x.sum(axis=2)  # tau * (row sums of B)
    shift = degree.max(axis=1)  # c per token: ||tau L_B - c I||_inf = c
    x[:, idx, idx] = degree - shift[:, None]
    halvings = np.zeros(n, dtype=np.int64)
    big = shift > _TAYLOR_NORM
    halvings[big] = np.ceil(np.log2(shift[big] / _TAYLOR_NORM)).astype(np.int64)
    out = np.empty_like(x)
    c = _TAYLOR_COEFFICIENTS
    # Weights of y, y^2, y^3 in the three Paterson-Stockmeyer parts (one pass builds all three); their identity terms
    # are added on the diagonal only.
    weights = np.array([[c[4 * j + 1], c[4 * j + 2], c[4 * j + 3]] for j in range(3)])
    groups = np.unique(halvings)
    for s in groups:
        rows = np.flatnonzero(halvings == s) if len(groups) > 1 else slice(None)
        y = x[rows]  # a copy, or x itself (no longer needed) when every token has the same s
        if s:
            y *= 0.5 ** s
        powers = np.empty((3, *y.shape))
        powers[0] = y
        np.matmul(y, y, out=powers[1])
        np.matmul(powers[1], y, out=powers[2])
        y4 = powers[1] @ powers[1]
        # einsum's own loop, not BLAS: a threaded BLAS call inside our worker threads oversubscribes the cores.
        parts = np.einsum("jk,k...->j...", weights, powers, optimize=False)
        for j in range(3):
            parts[j][:, idx, idx] += c[4 * j]
        e = parts[2]
        e += c[12] * y4
        e = y4 @ e
        e += parts[1]
        e = y4 @ e
        e += parts[0]
        for _ in range(s):
            e = e @ e
        out[rows] = e
    # e^(-tau delta) expm(tau L_B) = e^(c - tau delta) expm(tau L_B - c I), with c <= tau (delta - 1): no overflow.
    out *= np.exp(shift - tau * delta)[:, None, None]
    out += (1.0 - np.exp(-tau * delta)) / delta
    return out


def _entropy(eigenvalues: np.ndarray, delta: int) -> np.ndarray:
    lam = np.maximum(eigenvalues, EPSILON)
    return -(lam * np.log(lam)).sum(axis=1) / np.log(delta)


def check_device(device: Any) -> str | None:
    """``device`` as a torch device name, or None for numpy's LAPACK; a :class:`ValueError` naming it when torch
    does not know it or cannot use it."""
    if device is None:
        return None
    if not isinstance(device, str):
        raise ValueError(f"device must be a torch device name such as 'cuda' or 'cpu', or None, got {device!r}")
    try:
        import torch
    except ImportError as error:
        raise ImportError(f"device={device!r} needs torch (pip install torch); device=None uses numpy") from error
    try:
        parsed = torch.device(device)
    except (RuntimeError, ValueError) as error:
        raise ValueError(f"device={device!r} is not a torch device name: {error}") from None
    if parsed.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={device!r}: torch sees no CUDA device here")
    return str(parsed)


def _eigvalsh(k: np.ndarray, device: str | None) -> np.ndarray:
    """Ascending eigenvalues of a stack of symmetric float64 matrices: numpy's LAPACK, or torch's batched solver on
    ``device``."""
    if device is None:
        return np.linalg.eigvalsh(k)
    import torch

    return torch.linalg.eigvalsh(torch.from_numpy(k).to(device)).cpu().numpy()


class KernelSettings(NamedTuple):
    """The checked options of one KTC computation (:func:`kernel_settings`)."""

    tau: float
    kernel: str
    normalization: str
    alpha: float
    device: str | None


def kernel_settings(*, tau: Any, kernel: Any = "heat", normalization: Any = "scale", alpha: Any = 0.5,
                    device: Any = None) -> KernelSettings:
    """Check KTC's options once (the :class:`ValueError` of :func:`ktc_token_scores`) for many blocks of tokens."""
    tau, alpha = _check_options(tau, kernel, normalization, alpha)
    return KernelSettings(tau, kernel, normalization, alpha, check_device(device))


def _scores(q: np.ndarray, a: np.ndarray, settings: KernelSettings) -> np.ndarray:
    tau, kernel, normalization, alpha, device = settings
    k, eigenvalues, vectors = _kernel(a, kernel, tau)
    if normalization == "none" and k is None:
        return _entropy(eigenvalues, q.shape[1])  # eigenvalues of K are known: no second decomposition
    if k is None:
        k = (vectors * eigenvalues[:, None, :]) @ vectors.transpose(0, 2, 1)
    # k is a fresh array from here on: scaled in place. Its own trace only matters for "comb"; for "scale" and
    # "none" the final division by the trace absorbs it.
    if normalization == "scale":
        root = np.sqrt(q)
        k *= root[:, :, None]
        k *= root[:, None, :]
    elif normalization == "comb":
        # The code's weights (alpha on the probabilities); the reference's docstring states the reverse.
        k *= ((1.0 - alpha) / np.trace(k, axis1=1, axis2=2))[:, None, None]
        idx = np.arange(q.shape[1])
        k[:, idx, idx] += alpha * q
    trace = np.trace(k, axis1=1, axis2=2)
    if (bad := np.flatnonzero(~(trace > 0))).size:
        raise ValueError(f"token {bad[0]}: the normalised kernel has trace {trace[bad[0]]}; KTC is undefined")
    k /= trace[:, None, None]
    return _entropy(_eigvalsh(k, device), q.shape[1])


def ktc_token_scores(
    probabilities: Any,
    adjacency: Any,
    *,
    tau: float,
    kernel: str = "heat",
    normalization: str = "scale",
    alpha: float = 0.5,
    device: str | None = None,
) -> np.ndarray:
    """KTC score of each token: the normalised von Neumann entropy of its candidates' kernel
    (docs/reference-behaviour.md#signals).

    Parameters
    ----------
    probabilities : array-like of shape (n_tokens, delta)
        Candidate probabilities ``q``, by decreasing probability, **not** renormalised (MUCH's ``logits_values``).
    adjacency : array-like of shape (n_tokens, delta, delta)
        Symmetric, unit diagonal; entry (a, b) is how much candidates a and b do *not* contradict each other
        (see :func:`much_metric.baselines.methods.ktc.ktc_adjacency`).
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
    device : str, optional
        Torch device (``"cuda"``, ``"cuda:1"``, ``"cpu"``) for the batched eigen-decomposition of the normalised
        kernels, in float64; None (default) uses numpy's LAPACK. The scores agree to float64 rounding.

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
        [0, 1]; a device torch does not know.
    """
    settings = kernel_settings(tau=tau, kernel=kernel, normalization=normalization, alpha=alpha, device=device)
    q, a = _check_arrays(probabilities, adjacency)
    return _chunked_scores(q, a, settings)


def ktc_scores_of_built_adjacency(probabilities: Any, adjacency: np.ndarray, settings: KernelSettings) -> np.ndarray:
    """:func:`ktc_token_scores` for an adjacency that :func:`much_metric.baselines.methods.ktc.ktc_adjacency` just built
    (float64, symmetric, unit diagonal by construction), with options :func:`kernel_settings` checked: the
    probabilities are checked, the adjacency's three full passes of checks are skipped."""
    q = _check_probabilities(probabilities)
    if adjacency.dtype != np.float64 or adjacency.shape != (q.shape[0], q.shape[1], q.shape[1]):
        raise ValueError(f"adjacency must be float64 of shape {(q.shape[0], q.shape[1], q.shape[1])}, got "
                         f"{adjacency.dtype} {adjacency.shape}")
    return _chunked_scores(q, adjacency, settings)


def _chunked_scores(q: np.ndarray, a: np.ndarray, settings: KernelSettings) -> np.ndarray:
    out = np.empty(q.shape[0])
    chunk = _CHUNK if settings.device is None else _DEVICE_CHUNK
    for start in range(0, q.shape[0], chunk):
        part = slice(start, start + chunk)
        out[part] = _scores(q[part], a[part], settings)
    return out
