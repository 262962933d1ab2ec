"""Flattening ragged per-sample inputs (lists, numpy arrays, pyarrow / datasets list columns) into flat arrays.

Every function returns ``(flat, offsets)``: sample ``i`` owns ``flat[offsets[i]:offsets[i + 1]]``. Python lists go
through ``itertools.chain`` + ``np.fromiter`` (C-speed iteration, no per-token Python bytecode); pyarrow list
arrays are read from their offsets buffers without any Python loop at all.
"""

from __future__ import annotations

from itertools import chain
from typing import Any

import numpy as np

from much_metric._compat import tested_version

__all__ = ["flatten_1d", "flatten_2d", "n_samples_of"]


def _arrow_array(values: Any):
    """The pyarrow array behind ``values`` (pyarrow array, chunked array, datasets Column), or None."""
    module = type(values).__module__
    if module.startswith("pyarrow"):
        import pyarrow as pa

        if isinstance(values, pa.ChunkedArray):
            return values.combine_chunks()
        if isinstance(values, pa.Array):
            return values
        return None
    if module.startswith("datasets") and type(values).__name__ == "Column" and tested_version("datasets"):
        # datasets 4/5 Column: the dataset's arrow table and the column name; the indices mapping and format are
        # private attributes, so any other version takes the generic (list) path below.
        source, name = getattr(values, "source", None), getattr(values, "column_name", None)
        table = getattr(source, "data", None)
        if table is not None and name is not None and getattr(source, "_indices", None) is None:
            if getattr(source, "_format_type", None) in (None, "numpy", "arrow", "python"):
                return table.column(name).combine_chunks()
    return None


def n_samples_of(values: Any) -> int:
    return len(values)


def _offsets_of(array) -> np.ndarray:
    offsets = np.asarray(array.offsets, dtype=np.int64)
    return offsets - offsets[0]


def flatten_1d(values: Any, *, dtype, field: str, sample_ids) -> tuple[np.ndarray, np.ndarray]:
    """Flatten a sequence of 1-D sequences (one per sample) into ``(flat, offsets)``."""
    array = _arrow_array(values)
    if array is not None:
        if array.null_count:
            row = int(np.flatnonzero(np.asarray(array.is_null()))[0])
            raise ValueError(f"sample {sample_ids(row)}: field {field!r} is null")
        flat = array.flatten().to_numpy(zero_copy_only=False)
        return np.asarray(flat, dtype=dtype), _offsets_of(array)
    rows = values if isinstance(values, list) else list(values)
    try:
        lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
    except TypeError:
        raise ValueError(f"sample {sample_ids(_first_bad_row(rows, dtype))}: field {field!r} must be a 1-D "
                         "sequence") from None
    offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if rows and all(type(row) is np.ndarray for row in rows):
        if any(row.ndim != 1 for row in rows):
            raise ValueError(f"sample {sample_ids(_first_bad_row(rows, dtype))}: field {field!r} must be a 1-D "
                             "sequence")
        return np.concatenate(rows).astype(dtype, copy=False), offsets
    try:
        # C-speed iteration over every value; a nested or non-numeric row makes it raise, then we find which.
        flat = np.fromiter(chain.from_iterable(rows), dtype=dtype, count=int(offsets[-1]))
    except (TypeError, ValueError):
        bad = _first_bad_row(rows, dtype)
        raise ValueError(f"sample {sample_ids(bad)}: field {field!r} must be a 1-D sequence of numbers") from None
    return flat, offsets


def _first_bad_row(rows: list, dtype) -> int:
    """Index of the first row that is not a 1-D sequence of numbers (slow path, only after a failure)."""
    for index, row in enumerate(rows):
        try:
            if row is None or np.asarray(row, dtype=dtype).ndim != 1:
                return index
        except (TypeError, ValueError):
            return index
    return 0


def flatten_2d(values: Any, *, field: str, sample_ids) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Flatten per-sample lists of integer lists (``token_chunks``).

    Returns ``(flat_indices, chunk_offsets, sample_offsets)``: chunk ``c`` holds
    ``flat_indices[chunk_offsets[c]:chunk_offsets[c + 1]]`` and sample ``i`` owns chunks
    ``sample_offsets[i]:sample_offsets[i + 1]``.
    """
    array = _arrow_array(values)
    if array is not None:
        if array.null_count:
            row = int(np.flatnonzero(np.asarray(array.is_null()))[0])
            raise ValueError(f"sample {sample_ids(row)}: field {field!r} is null")
        inner = array.flatten()
        if inner.null_count:
            raise ValueError(f"field {field!r} holds a null chunk")
        flat = _integral(np.asarray(inner.flatten().to_numpy(zero_copy_only=False)), field, sample_ids,
                         _offsets_of(inner), _offsets_of(array))
        return flat, _offsets_of(inner), _offsets_of(array)
    samples = list(values)
    try:
        chunks_per_sample = np.fromiter(map(len, samples), dtype=np.int64, count=len(samples))
        chunks = list(chain.from_iterable(samples))
        chunk_lengths = np.fromiter(map(len, chunks), dtype=np.int64, count=len(chunks))
    except TypeError as error:
        bad = next(
            (i for i, s in enumerate(samples) if s is None or not all(hasattr(c, "__len__") for c in s)), 0
        )
        message = f"sample {sample_ids(bad)}: field {field!r} must be a list of lists of token indices"
        raise ValueError(message) from error
    sample_offsets = np.zeros(len(samples) + 1, dtype=np.int64)
    np.cumsum(chunks_per_sample, out=sample_offsets[1:])
    chunk_offsets = np.zeros(len(chunks) + 1, dtype=np.int64)
    np.cumsum(chunk_lengths, out=chunk_offsets[1:])
    try:
        # Read as float64 (exact for any token index) so that 2.9 is caught rather than truncated to 2.
        values = np.fromiter(chain.from_iterable(chunks), dtype=np.float64, count=int(chunk_offsets[-1]))
    except (TypeError, ValueError) as error:
        chunk = next(i for i, c in enumerate(chunks) if not all(_is_number(v) for v in c))
        bad = int(np.searchsorted(sample_offsets, chunk, side="right") - 1)
        raise ValueError(f"sample {sample_ids(bad)}: field {field!r} holds a non-numeric token index") from error
    flat = _integral(values, field, sample_ids, chunk_offsets, sample_offsets)
    return flat, chunk_offsets, sample_offsets


def _is_number(value: Any) -> bool:
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True


def _integral(values: np.ndarray, field: str, sample_ids, chunk_offsets: np.ndarray,
              sample_offsets: np.ndarray) -> np.ndarray:
    """``values`` as int64, or an error naming the sample of the first non-integral value (never truncated)."""
    if values.dtype.kind in "iu":
        return values.astype(np.int64, copy=False)
    if values.dtype.kind == "b":
        raise ValueError(f"field {field!r} holds booleans, not token indices")
    wrong = np.flatnonzero(~np.isfinite(values) | (values != np.floor(values)))
    if wrong.size:
        chunk = int(np.searchsorted(chunk_offsets, wrong[0], side="right") - 1)
        bad = int(np.searchsorted(sample_offsets, chunk, side="right") - 1)
        raise ValueError(f"sample {sample_ids(bad)}: field {field!r} holds the non-integral token index "
                         f"{float(values[wrong[0]])!r}")
    return values.astype(np.int64)
