"""Per-token inputs of the detectors that read an internals pack: the kinds ``probe`` and ``claim_head``.

An internals pack (``python -m builder internals``, :func:`much_dataset.load_internals`) holds, per output token,
the observer model's previous-token attention of every layer and head, optionally its attention to the last ``K``
positions, and its hidden states at a few ``hidden_states`` indices. A detector trained on a pack records the
pack's **observer** (its ``internals`` config record: model name, weights sha256, layers, heads, hidden size, and
the hidden layer or attention window it reads); scoring it on a pack of another model, or on one that lacks that
hidden layer or window, is refused with :class:`PackMismatchError`, naming the pack's ``manifest.json`` and the
field.

* :func:`hidden_inputs` -- the probe's inputs: ``hidden[:, column of layer]`` (float32), one column per unit;
* :func:`head_inputs` -- the claim head's inputs: ``attention_to_previous`` over all layers and heads, the
  ``attention_window`` columns beyond the previous position when the detector reads a window, the top-24
  log-probabilities of :func:`~much_metric.learned.sequence_inputs`, and the claim features of
  :func:`claim_inputs` (claim mask, position in the claim, claim length, stopword flag);
* :func:`claim_segments` -- each token's claim within its sample (the claim head attends within a claim only).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["CLAIM_INPUTS", "Observed", "PackMismatchError", "check_pack", "claim_inputs", "claim_segments",
           "head_inputs", "head_names", "hidden_inputs", "hidden_names", "observer_record", "open_pack"]

#: Columns of :func:`claim_inputs`.
CLAIM_INPUTS = ("in_claim", "claim_position", "log_claim_position", "log_claim_length", "stopword")
_IDENTITY = ("weights_sha256", "n_layers", "n_heads", "hidden_size")


class PackMismatchError(ValueError):
    """An internals pack that is not of the model, hidden layer or attention window a detector reads."""


@dataclass(frozen=True)
class Observed:
    """An opened pack and the observer record (``config["internals"]``) a detector reads it with."""

    pack: Any
    observer: Mapping[str, Any]


def open_pack(internals: Any) -> Any:
    """``internals`` as an :class:`~much_dataset.internals.InternalsPack` (a path is opened)."""
    if isinstance(internals, str | Path):
        from much_dataset.internals import load_internals

        return load_internals(internals)
    return internals


def _manifest_file(pack: Any) -> str:
    from much_dataset.internals import MANIFEST

    path = getattr(pack, "path", None)
    return str(Path(path) / MANIFEST) if path is not None else "the internals pack's manifest"


def observer_record(pack: Any, *, layer: int | None = None, attention_window: int | None = None,
                    reads: str) -> dict[str, Any]:
    """The observer record of a detector that ``reads`` ``"hidden"`` (hidden_states index ``layer``; None: the
    middle one of the pack's ``hidden_layers``) or ``"attention"`` (``attention_window`` columns; None: all the pack
    has), checked against the pack."""
    manifest = pack.manifest
    record = {"model": str(manifest.get("model")), **{key: manifest.get(key) for key in _IDENTITY}}
    if reads == "hidden":
        layers = list(manifest.get("hidden_layers") or [])
        if not layers:
            raise PackMismatchError(f"{_manifest_file(pack)}: field 'hidden_layers' is empty: the pack holds no "
                                    "hidden states for a probe")
        record["hidden_layer"] = int(layers[len(layers) // 2] if layer is None else layer)
    else:
        has = int(manifest.get("attention_window") or 0)
        record["attention_window"] = has if attention_window is None else int(attention_window)
    check_pack(record, pack)
    return record


def check_pack(observer: Mapping[str, Any], pack: Any, *, folder: Any = None) -> None:
    """Raise :class:`PackMismatchError` unless ``pack`` is of the observer's model and holds what it reads."""
    manifest, where = pack.manifest, _manifest_file(pack)
    detector = f"the detector {folder}" if folder is not None else "the detector"
    for key in _IDENTITY:
        if manifest.get(key) != observer.get(key):
            raise PackMismatchError(
                f"{where}: field {key!r} is {str(manifest.get(key))[:16]!r}, but {detector} was trained on the "
                f"internals of model {observer.get('model')!r} ({key} {str(observer.get(key))[:16]!r}): a pack of "
                "another model (build one with that model: python -m builder internals --model ...)")
    if "hidden_layer" in observer:
        layers = list(manifest.get("hidden_layers") or [])
        if observer["hidden_layer"] not in layers:
            raise PackMismatchError(
                f"{where}: field 'hidden_layers' is {layers}; {detector} reads "
                f"hidden_states[{observer['hidden_layer']}] (rebuild the pack with --hidden-layers including "
                f"{observer['hidden_layer']})")
    if int(observer.get("attention_window") or 0) > int(manifest.get("attention_window") or 0):
        raise PackMismatchError(
            f"{where}: field 'attention_window' is {int(manifest.get('attention_window') or 0)}; {detector} reads "
            f"{observer['attention_window']} attention-window columns (rebuild the pack with --attention-window "
            f"{observer['attention_window']})")


def hidden_names(observer: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(f"h{observer['hidden_layer']}_{i}" for i in range(int(observer["hidden_size"])))


def head_names(observer: Mapping[str, Any]) -> tuple[str, ...]:
    from much_metric.learned.features import SEQUENCE_INPUTS

    layers, heads, window = int(observer["n_layers"]), int(observer["n_heads"]), int(observer["attention_window"])
    previous = tuple(f"attention_previous_l{l}_h{h}" for l in range(layers) for h in range(heads))  # noqa: E741
    farther = tuple(f"attention_window_l{l}_h{h}_k{k}" for l in range(layers) for h in range(heads)  # noqa: E741
                    for k in range(1, window))
    return (*previous, *farther, *SEQUENCE_INPUTS, *CLAIM_INPUTS)


def _rows(arrays: Any, context: Observed, name: str) -> list[np.ndarray]:
    """The pack's ``name`` array of every sample, checked against its token count."""
    pack = context.pack
    lengths = np.diff(arrays.offsets)
    pack.check(arrays.generation_ids, lengths.tolist())
    blocks = []
    for gid, n in zip(arrays.generation_ids, lengths, strict=True):
        row = pack[gid]
        if name not in row:
            raise PackMismatchError(f"generation_id={gid!r}: field {name!r} is missing from {_manifest_file(pack)}'s "
                                    f"shard (the pack holds {sorted(row)})")
        block = np.asarray(row[name])
        if block.shape[0] != n:
            raise PackMismatchError(f"generation_id={gid!r}: field {name!r} of {_manifest_file(pack)} has "
                                    f"{block.shape[0]} rows for {n} output tokens")
        blocks.append(block)
    return blocks


def hidden_inputs(arrays: Any, context: Observed) -> np.ndarray:
    """``(N_tokens, hidden_size)`` float32: the observer's hidden state at ``hidden_layer`` for every token."""
    column = list(context.pack.manifest["hidden_layers"]).index(context.observer["hidden_layer"])
    blocks = [np.asarray(block[:, column], dtype=np.float32) for block in _rows(arrays, context, "hidden")]
    return np.concatenate(blocks) if blocks else np.zeros((0, int(context.observer["hidden_size"])), np.float32)


def claim_segments(arrays: Any) -> np.ndarray:
    """``(N_tokens,)`` int64: the index of the first chunk (``token_chunks``) holding each token, within its sample;
    a token of no chunk gets an index of its own (``n_chunks + token``)."""
    if arrays.token_chunks is None:
        raise ValueError("the claim head reads the claims (column token_chunks), which these data lack")
    out = np.empty(arrays.n_tokens, dtype=np.int64)
    for sample, chunks in enumerate(arrays.token_chunks):
        start, end = int(arrays.offsets[sample]), int(arrays.offsets[sample + 1])
        segment = np.full(end - start, -1, dtype=np.int64)
        for index in range(len(chunks) - 1, -1, -1):  # the first chunk holding a token wins
            chunk = np.asarray(chunks[index], dtype=np.int64)
            segment[chunk[(chunk >= 0) & (chunk < end - start)]] = index
        alone = segment < 0
        segment[alone] = len(chunks) + np.flatnonzero(alone)
        out[start:end] = segment
    return out


def claim_inputs(arrays: Any) -> np.ndarray:
    """``(N_tokens, 5)`` float32, :data:`CLAIM_INPUTS`: 1 for a token of a claim the metric scores (every chunk but
    the last, EOS), its position in its claim divided by (length - 1), log(1 + position), log(claim length), and the
    stopword flag (0 when the data have no ``stopword_mask``)."""
    segments = claim_segments(arrays)
    sample = np.repeat(np.arange(arrays.n_samples), np.diff(arrays.offsets))
    n_chunks = np.asarray([len(chunks) for chunks in arrays.token_chunks], dtype=np.int64)
    in_claim = segments < n_chunks[sample] - 1
    key = sample * (int(segments.max(initial=0)) + 1) + segments  # one key per (sample, segment), tokens in order
    _, inverse, counts = np.unique(key, return_inverse=True, return_counts=True)
    inverse = inverse.reshape(-1)
    order = np.argsort(inverse, kind="stable")
    first = np.concatenate([[0], np.cumsum(counts)[:-1]])
    position = np.empty(arrays.n_tokens, dtype=np.int64)
    position[order] = np.arange(arrays.n_tokens) - np.repeat(first, counts)
    length = counts[inverse]
    relative = np.where(length > 1, position / np.maximum(length - 1, 1), 0.0)
    stopword = np.zeros(arrays.n_tokens) if arrays.stopword_mask is None else np.asarray(arrays.stopword_mask, float)
    return np.stack([in_claim.astype(np.float64), relative, np.log1p(position), np.log(length), stopword],
                    axis=1).astype(np.float32)


def head_inputs(arrays: Any, context: Observed) -> np.ndarray:
    """The claim head's per-token inputs (:func:`head_names` columns), float32 ``(N_tokens, D)``."""
    from much_metric.learned.features import sequence_inputs

    observer = context.observer
    layers, heads, window = int(observer["n_layers"]), int(observer["n_heads"]), int(observer["attention_window"])
    previous = [np.asarray(block, dtype=np.float32).reshape(len(block), layers * heads)
                for block in _rows(arrays, context, "attention_to_previous")]
    columns = [np.concatenate(previous) if previous else np.zeros((0, layers * heads), np.float32)]
    if window > 1:
        farther = [np.asarray(block[..., 1:window], dtype=np.float32).reshape(len(block), -1)
                   for block in _rows(arrays, context, "attention_window")]
        columns.append(np.concatenate(farther) if farther else np.zeros((0, layers * heads * (window - 1))))
    columns += [sequence_inputs(arrays), claim_inputs(arrays)]
    return np.concatenate(columns, axis=1).astype(np.float32)
