"""What an internals pack's arrays must be: their dtypes and shapes from the manifest (for
:func:`much_dataset.packs.pack_damage`) and their values (checked by :func:`much_dataset.load_internals` as each row
is read).

Shapes, per row of ``n`` output tokens (the manifest's ``n_layers``, ``n_heads``, ``hidden_layers``,
``hidden_size``, ``attention_window``, ``compression`` and ``dtypes``):

* ``attention_to_previous``, ``attention_to_self``: ``(n, n_layers, n_heads)``;
* ``attention_window``: ``(n, n_layers, n_heads, attention_window)``;
* ``hidden``: ``(n, len(hidden_layers), hidden_size)`` (``pca:K``: ``K`` coefficients instead of ``hidden_size``),
  ``hidden_scale`` (``int8``): one scale per block of channels.

Values: attention weights are probabilities of one softmax row, so each is in [0, 1] and, for one (token, layer,
head), the weights to distinct positions (the previous one or the window, and the position itself) sum to at most 1
(+ :data:`ATTENTION_TOLERANCE`); hidden states (decoded) and scales are finite. A failure names the pack, the
``generation_id``, the array and the position (token, layer, head).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from much_dataset.packs import PackError

__all__ = ["ATTENTION_TOLERANCE", "SAFETENSORS_DTYPES", "expected_arrays", "check_row_values"]

#: Slack on "at most 1" and "in [0, 1]" for float32 softmax rounding.
ATTENTION_TOLERANCE = 1e-4
#: Manifest dtype -> the safetensors dtype its tensors are stored as (bfloat16: its raw 16 bits as int16).
SAFETENSORS_DTYPES = {"float32": "F32", "float16": "F16", "bfloat16": "I16", "int8": "I8", "float64": "F64"}
_ATTENTION = ("attention_to_previous", "attention_to_self", "attention_window")
_AXES = ("token", "layer", "head", "back")


def _number(manifest: Mapping[str, Any], key: str) -> int:
    value = manifest.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"manifest field {key!r} must be a non-negative integer, got {value!r}")
    return value


def expected_arrays(manifest: Mapping[str, Any]):
    """``expect(generation_id, entry)`` for :func:`much_dataset.packs.pack_damage`: every array the manifest's
    ``dtypes`` names, with its safetensors dtype and shape. ``ValueError`` for a manifest without the counts."""
    from much_dataset.internals_compression import INT8_BLOCK, parse_compression

    layers, heads, width = (_number(manifest, key) for key in ("n_layers", "n_heads", "hidden_size"))
    hidden_layers = manifest.get("hidden_layers")
    dtypes = manifest.get("dtypes")
    if not isinstance(hidden_layers, list) or not isinstance(dtypes, Mapping):
        raise ValueError("manifest fields 'hidden_layers' (a list) and 'dtypes' (an object) are required")
    window = int(manifest.get("attention_window") or 0)
    kind, k = parse_compression(str(manifest.get("compression") or "none"))
    tails = {"attention_to_previous": (layers, heads), "attention_to_self": (layers, heads),
             "attention_window": (layers, heads, window),
             "hidden": (len(hidden_layers), k if kind == "pca" else width),
             "hidden_scale": (len(hidden_layers), width // (INT8_BLOCK if width % INT8_BLOCK == 0 else width))}
    unknown = sorted(set(dtypes) - set(tails))
    if unknown or any(str(d) not in SAFETENSORS_DTYPES for d in dtypes.values()):
        raise ValueError(f"manifest field 'dtypes' names unknown arrays or dtypes: {dict(dtypes)}")
    stored = {name: (SAFETENSORS_DTYPES[str(dtype)], tails[name]) for name, dtype in dtypes.items()}

    def expect(generation_id: str, entry: Mapping[str, Any]) -> dict[str, tuple[str, tuple[int, ...]]]:
        n = int(entry.get("n_tokens", -1))
        return {name: (dtype, (n, *tail)) for name, (dtype, tail) in stored.items()}

    return expect


def _where(index: tuple[int, ...]) -> str:
    return ", ".join(f"{axis} {int(i)}" for axis, i in zip(_AXES, index, strict=False))


def _fail(pack: Path, generation_id: str, name: str, where: str, what: str) -> ValueError:
    return PackError(f"internals pack {pack}: generation_id={generation_id!r}, array {name!r}, position ({where}): "
                     f"{what}")


def _check_attention(pack: Path, generation_id: str, arrays: Mapping[str, np.ndarray]) -> None:
    total = None
    for name in _ATTENTION:
        if name not in arrays:
            continue
        values = np.asarray(arrays[name], dtype=np.float32)
        bad = ~np.isfinite(values) | (values < -ATTENTION_TOLERANCE) | (values > 1 + ATTENTION_TOLERANCE)
        if bad.any():
            index = tuple(np.argwhere(bad)[0])
            raise _fail(pack, generation_id, name, _where(index),
                        f"attention weight {float(values[index])!r} is not in [0, 1]")
        if name == "attention_to_previous" and "attention_window" in arrays:
            continue  # the window's first entry is the previous position: counted once
        part = values.sum(axis=-1) if name == "attention_window" else values
        total = part if total is None else total + part
    over = total > 1 + ATTENTION_TOLERANCE if total is not None else np.zeros(0, bool)
    if over.any():
        index = tuple(np.argwhere(over)[0])
        names = [n for n in _ATTENTION if n in arrays]
        raise _fail(pack, generation_id, "+".join(names), _where(index),
                    f"attention weights to distinct positions sum to {float(total[index]):.6g} > 1 (one softmax "
                    "row)")


def check_row_values(pack: Path, generation_id: str, arrays: Mapping[str, np.ndarray]) -> None:
    """Raise :class:`~much_dataset.packs.PackError` at the first impossible value of one row (module docstring):
    an attention weight outside [0, 1] or not finite, weights of one (token, layer, head) summing above 1, a hidden
    state or scale that is not finite (:func:`much_dataset.load_internals` raises it as an ``InternalsError``)."""
    _check_attention(pack, generation_id, arrays)
    for name in ("hidden", "hidden_scale"):
        values = np.asarray(arrays[name]) if name in arrays else None
        if values is None or not np.issubdtype(values.dtype, np.floating):
            continue
        bad = ~np.isfinite(values)
        if bad.any():
            index = tuple(np.argwhere(bad)[0])
            where = (f"token {int(index[0])}, hidden_layers[{int(index[1])}], "
                     f"{'scale block' if name == 'hidden_scale' else 'channel'} {int(index[2])}")
            raise _fail(pack, generation_id, name, where, f"value {float(values[index])!r} is not finite")
