"""Compression of an internals pack's ``hidden`` array: ``none``, ``int8`` or ``pca:K`` (numpy only).

``python -m builder internals --hidden-compression int8|pca:K`` stores the hidden states compressed and
:func:`much_dataset.load_internals` gives them back as float32 arrays (:func:`decode_hidden`); the manifest says
``"compression"``.

* ``none``: the hidden states in ``--hidden-dtype`` (float16 by default).
* ``int8``: each token vector is cut into blocks of :data:`INT8_BLOCK` channels (one block per vector when the width is
  not a multiple of it); each block is stored as int8 with its own symmetric scale ``max |x| / 127`` (float16), the
  layout of GGUF's ``Q8_0``. Tensors ``hidden`` (int8, ``[n, layers, d]``) and ``hidden_scale`` (float16, ``[n, layers,
  d / block]``): 1.0625 bytes per value. One scale per whole vector was measured at 2.5 % mean relative error on
  SmolLM2's rows (a few "massive activation" channels set the scale), blocks of 32 at about 1 %.
* ``pca:K``: per stored layer, a mean and ``K`` principal directions are fitted once per pack on the hidden states of
  the first ``pca_fit_rows`` rows of the source file (:func:`fit_pca`: an SVD of the centred float32 vectors), stored
  in the pack as ``basis/<sha256>.safetensors`` (content-addressed; the manifest names it) and every token vector is
  stored as its ``K`` float32 coefficients (tensor ``hidden``, ``[n, layers, K]``). Lossy: the error says how much.

The reconstruction error of a vector ``x`` is ``||x - x_hat|| / ||x||`` (relative L2, against the float32 hidden state
of the forward pass); :func:`relative_errors` computes it; the builder prints its mean and max and keeps them in the
manifest.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

__all__ = ["COMPRESSIONS", "INT8_BLOCK", "parse_compression", "encode_hidden", "decode_hidden", "fit_pca",
           "relative_errors"]

#: The accepted spellings (``pca:K`` with K a positive integer).
COMPRESSIONS = ("none", "int8", "pca:K")
#: Channels per int8 block (GGUF's Q8_0 block); a width that is not a multiple of it gets one block per vector.
INT8_BLOCK = 32
_PCA = re.compile(r"^pca:([1-9][0-9]*)$")


def parse_compression(text: str) -> tuple[str, int]:
    """``"none"`` -> ("none", 0), ``"int8"`` -> ("int8", 0), ``"pca:64"`` -> ("pca", 64); a ValueError otherwise.

    >>> parse_compression("pca:64")
    ('pca', 64)
    """
    value = str(text).strip().lower()
    if value in ("none", "int8"):
        return value, 0
    match = _PCA.match(value)
    if match is None:
        raise ValueError(f"hidden compression must be one of {list(COMPRESSIONS)} (K a positive integer), got {text!r}")
    return "pca", int(match.group(1))


def _block(width: int) -> int:
    return INT8_BLOCK if width % INT8_BLOCK == 0 else width


def _encode_int8(hidden: np.ndarray) -> dict[str, np.ndarray]:
    n, layers, width = hidden.shape
    blocks = hidden.reshape(n, layers, -1, _block(width)).astype(np.float32)
    scale = (np.abs(blocks).max(axis=-1) / 127.0).astype(np.float16)  # stored precision: quantise with it
    divisor = scale.astype(np.float32)[..., None]
    safe = np.where(divisor > 0, divisor, 1.0)
    quantised = np.clip(np.rint(blocks / safe), -127, 127).astype(np.int8)
    return {"hidden": quantised.reshape(n, layers, width), "hidden_scale": scale}


def _decode_int8(quantised: np.ndarray, scale: np.ndarray) -> np.ndarray:
    n, layers, width = quantised.shape
    if scale.shape[:2] != (n, layers) or width % scale.shape[-1]:
        raise ValueError(f"int8 hidden of shape {quantised.shape} with scales of shape {scale.shape}")
    blocks = quantised.reshape(n, layers, scale.shape[-1], -1).astype(np.float32)
    return (blocks * scale.astype(np.float32)[..., None]).reshape(n, layers, width)


def fit_pca(hidden: np.ndarray, k: int) -> dict[str, np.ndarray]:
    """Per layer, the mean and the top ``k`` principal directions of ``hidden`` ([n_vectors, layers, d], float):
    ``{"mean": [layers, d], "components": [layers, k, d]}`` (float32, orthonormal rows). A ValueError when fewer
    than ``k`` vectors or channels are given."""
    x = np.asarray(hidden, dtype=np.float64)
    if x.ndim != 3:
        raise ValueError(f"PCA fit: hidden states of shape [n_vectors, layers, d] expected, got {x.shape}")
    n, layers, width = x.shape
    if k > min(n, width):
        raise ValueError(f"pca:{k} needs at least {k} fit vectors and channels; the fit set has {n} token vectors of "
                         f"width {width} (use a smaller K or more --pca-fit-rows)")
    mean = x.mean(axis=0)
    components = np.empty((layers, k, width))
    for layer in range(layers):
        _, _, vt = np.linalg.svd(x[:, layer] - mean[layer], full_matrices=False)
        top = vt[:k]
        # a deterministic sign per direction (largest-magnitude entry positive): refits give the same basis
        signs = np.sign(top[np.arange(k), np.abs(top).argmax(axis=1)])
        components[layer] = top * np.where(signs == 0, 1.0, signs)[:, None]
    return {"mean": mean.astype(np.float32), "components": components.astype(np.float32)}


def _check_basis(basis: Any, layers: int, width: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    if basis is None or "mean" not in basis or "components" not in basis:
        raise ValueError("pca compression needs the pack's basis ({'mean', 'components'})")
    mean, components = np.asarray(basis["mean"], np.float32), np.asarray(basis["components"], np.float32)
    if mean.ndim != 2 or components.ndim != 3 or mean.shape[0] != layers or components.shape[0] != layers or (
            width is not None and mean.shape[1] != width) or components.shape[2] != mean.shape[1]:
        raise ValueError(f"PCA basis of shapes {mean.shape} / {components.shape} does not fit {layers} layers"
                         + (f" of width {width}" if width is not None else ""))
    return mean, components


def encode_hidden(hidden: np.ndarray, compression: str, *, dtype: str = "float16", basis: Any = None
                  ) -> dict[str, np.ndarray]:
    """The tensors that store ``hidden`` (float32, ``[n, layers, d]``) under ``compression``.

    ``dtype``: the storage dtype when nothing is compressed (``float16``, ``float32``; ``bfloat16`` is written by the
    builder through torch). ``basis``: the pack's PCA basis (:func:`fit_pca`) for ``pca:K``.
    """
    kind, k = parse_compression(compression)
    x = np.asarray(hidden, dtype=np.float32)
    if kind == "none":
        return {"hidden": x.astype(dtype)}
    if kind == "int8":
        return _encode_int8(x)
    mean, components = _check_basis(basis, x.shape[1], x.shape[2])
    if components.shape[1] != k:
        raise ValueError(f"the PCA basis has {components.shape[1]} components, the pack asks pca:{k}")
    return {"hidden": np.einsum("nld,lkd->nlk", x - mean[None], components).astype(np.float32)}


def decode_hidden(arrays: dict[str, np.ndarray], compression: str, *, basis: Any = None) -> np.ndarray:
    """``hidden`` as float32 ``[n, layers, d]`` from the stored tensors (:func:`encode_hidden`'s output)."""
    kind, k = parse_compression(compression)
    stored = arrays["hidden"]
    if kind == "none":
        return np.asarray(stored, dtype=np.float32)
    if kind == "int8":
        return _decode_int8(np.asarray(stored), np.asarray(arrays["hidden_scale"]))
    mean, components = _check_basis(basis, stored.shape[1])
    if stored.shape[2] != k or components.shape[1] != k:
        raise ValueError(f"pca:{k}: {stored.shape[2]} stored coefficients, {components.shape[1]} basis components")
    return np.einsum("nlk,lkd->nld", np.asarray(stored, np.float32), components) + mean[None]


def relative_errors(original: np.ndarray, reconstructed: np.ndarray) -> np.ndarray:
    """``||x - x_hat|| / ||x||`` per token vector (last axis); 0 for a zero vector reconstructed exactly."""
    x = np.asarray(original, dtype=np.float64)
    difference = np.linalg.norm(x - np.asarray(reconstructed, dtype=np.float64), axis=-1)
    norm = np.linalg.norm(x, axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(norm > 0, difference / np.where(norm > 0, norm, 1.0), np.where(difference > 0, np.inf, 0.0))
