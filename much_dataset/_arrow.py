"""Flattening helpers shared by the loader and the validation: a list column -> per-row lengths (nulls count as 0)
and flat values."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["list_array", "list_lengths", "flat_numpy"]


def list_array(column: pa.ChunkedArray | pa.Array) -> pa.Array:
    """One contiguous list array (chunks combined; datasets' ``Array2D`` extension unwrapped to its storage)."""
    import pyarrow as pa

    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if isinstance(array, pa.ExtensionArray):  # datasets' Array2D: its storage is list<list<...>>
        array = array.storage
    return array


def list_lengths(array: pa.Array) -> np.ndarray:
    """int64 (n_rows,): the length of each row's list, 0 for a null row."""
    import pyarrow.compute as pc

    return pc.list_value_length(array).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)


def flat_numpy(array: pa.Array, dtype) -> np.ndarray:
    """The values of a flat arrow array as numpy ``dtype`` (nulls as 0)."""
    return array.fill_null(0).to_numpy(zero_copy_only=False).astype(dtype, copy=False)
