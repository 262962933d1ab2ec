"""A whole split's token-level arrays, concatenated: the input of every baseline.

A MUCH split holds, per sample, ``output_tokens`` (n_tokens,) and ``logits_token_ids`` / ``logits_values``
(n_tokens, 24). The baselines work on the concatenation over all samples -- ``(N_tokens,)`` and ``(N_tokens, 24)``
arrays -- and split their flat result back per sample with ``np.split`` on the sample offsets, so there is no
per-token Python loop. From a ``datasets.Dataset`` (or a pyarrow table) the arrays come straight out of the Arrow
buffers; lists of row dicts are accepted too (one ``np.asarray`` per row).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from much_dataset.schema import (
    GENERATION_ID,
    LOGITS_TOKEN_IDS,
    LOGITS_VALUES,
    OUTPUT_TOKENS,
    STOPWORD_MASK,
    TOKEN_CHUNKS,
    TOP_K,
)

__all__ = ["TokenArrays", "per_sample", "token_arrays"]

_COLUMNS = (GENERATION_ID, OUTPUT_TOKENS, LOGITS_TOKEN_IDS, LOGITS_VALUES)


@dataclass(frozen=True)
class TokenArrays:
    """Concatenated token arrays of a split (build with :func:`token_arrays`).

    Attributes
    ----------
    generation_ids : list of str, length n_samples
    offsets : ndarray of shape (n_samples + 1,)
        Sample ``s`` owns flat tokens ``offsets[s]:offsets[s + 1]``.
    output_tokens : ndarray of shape (N_tokens,), int64
        Generated token ids (EOS included).
    candidate_ids : ndarray of shape (N_tokens, K), int64
        ``logits_token_ids``: vocabulary ids of the stored candidates (K = 24 in MUCH), by decreasing probability.
    probabilities : ndarray of shape (N_tokens, K), float64
        ``logits_values``: their probabilities (temperature-scaled softmax over the full vocabulary, not
        renormalised, so rows sum to <= 1).
    token_chunks : list of list of list of int, length n_samples, or None
        Each sample's claims (``token_chunks``: sample-local token indices, EOS claim included) when the split has
        that column, for methods that score whole claims (the LM-Polygraph / UQLM adapters); None otherwise.
    stopword_mask : ndarray of shape (N_tokens,), bool, or None
        ``stopword_mask`` concatenated (True = stopword) when the split has that column; None otherwise.
    """

    generation_ids: list[str]
    offsets: np.ndarray
    output_tokens: np.ndarray
    candidate_ids: np.ndarray
    probabilities: np.ndarray
    token_chunks: list[list[list[int]]] | None = None
    stopword_mask: np.ndarray | None = None

    @property
    def n_samples(self) -> int:
        return len(self.generation_ids)

    @property
    def n_tokens(self) -> int:
        return int(self.offsets[-1])

    def split(self, flat: np.ndarray) -> list[np.ndarray]:
        """Per-sample views of a flat ``(N_tokens,)`` array."""
        return np.split(np.asarray(flat), self.offsets[1:-1])

    def sample_of(self, token: int) -> int:
        """Index of the sample owning flat token ``token``."""
        return int(np.searchsorted(self.offsets, token, side="right") - 1)

    def where(self, token: int) -> str:
        """``generation_id='...', token i`` for error messages."""
        sample = self.sample_of(token)
        return f"{GENERATION_ID}={self.generation_ids[sample]!r}, token {token - int(self.offsets[sample])}"

    def sorted_by_probability(self) -> TokenArrays:
        """Candidates sorted by decreasing probability in every row (MUCH rows already are: returned as is)."""
        p = self.probabilities
        if not p.shape[0] or np.all(p[:, :-1] >= p[:, 1:]):
            return self
        order = np.argsort(-p, axis=1, kind="stable")
        return TokenArrays(self.generation_ids, self.offsets, self.output_tokens,
                           np.take_along_axis(self.candidate_ids, order, axis=1), np.take_along_axis(p, order, axis=1),
                           self.token_chunks, self.stopword_mask)

    def token_index(self, samples: Sequence[int]) -> np.ndarray:
        """Flat positions of the tokens of ``samples`` (in the given order), without a per-token loop."""
        samples = np.asarray(samples, dtype=np.int64)
        starts = self.offsets[samples]
        lengths = self.offsets[samples + 1] - starts
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        return np.repeat(starts - offsets[:-1], lengths) + np.arange(offsets[-1])

    def select(self, samples: Sequence[int]) -> TokenArrays:
        """The arrays of a subset of samples (in the given order)."""
        samples = np.asarray(samples, dtype=np.int64)
        lengths = self.offsets[samples + 1] - self.offsets[samples]
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        index = self.token_index(samples)
        return TokenArrays(
            [self.generation_ids[s] for s in samples], offsets, self.output_tokens[index],
            self.candidate_ids[index], self.probabilities[index],
            None if self.token_chunks is None else [self.token_chunks[s] for s in samples],
            None if self.stopword_mask is None else self.stopword_mask[index],
        )


def _arrow_list(column: Any) -> tuple[np.ndarray, Any]:
    """(lengths, flattened child array) of an Arrow list column (extension types unwrapped)."""
    import pyarrow as pa

    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    if isinstance(column, pa.ExtensionArray):
        column = column.storage
    if column.null_count:
        raise ValueError("null list")
    lengths = np.asarray(column.value_lengths().to_numpy(zero_copy_only=False), dtype=np.int64)
    return lengths, column.flatten()


def _from_arrow(table: Any) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    ids = [str(v) for v in table.column(GENERATION_ID).to_pylist()]
    lengths, tokens = _arrow_list(table.column(OUTPUT_TOKENS))
    result = [ids, lengths, np.asarray(tokens.to_numpy(zero_copy_only=False), dtype=np.int64)]
    for name in (LOGITS_TOKEN_IDS, LOGITS_VALUES):
        rows, inner = _arrow_list(table.column(name))
        widths, values = _arrow_list(inner)
        result += [rows, widths, np.asarray(values.to_numpy(zero_copy_only=False))]
    ids, n_tokens, tokens, id_rows, id_widths, id_values, p_rows, p_widths, p_values = result
    return ids, n_tokens, tokens, (id_rows, id_widths, id_values), (p_rows, p_widths, p_values)


def _from_rows(rows: Sequence[Mapping[str, Any]]):
    from itertools import chain

    ids, lengths, tokens = [], [], []
    packed: dict[str, tuple[list[int], list[int], list[Any]]] = {name: ([], [], []) for name in _COLUMNS[2:]}
    for index, row in enumerate(rows):
        missing = [name for name in _COLUMNS if name not in row]
        if missing:
            raise ValueError(f"row {index} lacks field(s) {missing}")
        ids.append(str(row[GENERATION_ID]))
        tokens.append(np.asarray(row[OUTPUT_TOKENS], dtype=np.int64).reshape(-1))
        lengths.append(len(tokens[-1]))
        for name, (n_rows, widths, values) in packed.items():
            matrix = row[name]
            if isinstance(matrix, np.ndarray) and matrix.ndim == 2:
                n_rows.append(matrix.shape[0])
                widths.extend([matrix.shape[1]] * matrix.shape[0])
                values.append(matrix.reshape(-1))
                continue
            try:
                row_widths = [len(r) for r in matrix]
            except TypeError:
                raise ValueError(f"{GENERATION_ID}={ids[-1]!r}: field {name!r} must be a list of lists "
                                 f"(n_tokens, {TOP_K})") from None
            n_rows.append(len(row_widths))
            widths.extend(row_widths)
            values.append(np.fromiter(chain.from_iterable(matrix), dtype=np.float64, count=sum(row_widths)))

    def pack(name):
        n_rows, widths, values = packed[name]
        return (np.asarray(n_rows, dtype=np.int64), np.asarray(widths, dtype=np.int64),
                np.concatenate(values) if values else np.zeros(0))

    flat = np.concatenate(tokens) if tokens else np.zeros(0, np.int64)
    return ids, np.asarray(lengths, dtype=np.int64), flat, pack(LOGITS_TOKEN_IDS), pack(LOGITS_VALUES)


def _claim_columns(table: Any) -> tuple[list | None, tuple[np.ndarray, np.ndarray] | None]:
    """(token_chunks per sample, (stopword_mask lengths, flat mask)) of an Arrow table, None for an absent column."""
    if table is None:
        return None, None
    names = table.column_names
    chunks = table.column(TOKEN_CHUNKS).to_pylist() if TOKEN_CHUNKS in names else None
    mask = None
    if STOPWORD_MASK in names:
        mask_lengths, values = _arrow_list(table.column(STOPWORD_MASK))
        mask = (mask_lengths, np.asarray(values.to_numpy(zero_copy_only=False), dtype=bool))
    return chunks, mask


def _claim_rows(rows: Sequence[Mapping[str, Any]]) -> tuple[list | None, tuple[np.ndarray, np.ndarray] | None]:
    """As :func:`_claim_columns` for row mappings (a column counts when every row has it)."""
    chunks = [row[TOKEN_CHUNKS] for row in rows] if rows and all(TOKEN_CHUNKS in row for row in rows) else None
    mask = None
    if rows and all(STOPWORD_MASK in row for row in rows):
        parts = [np.asarray(row[STOPWORD_MASK], dtype=bool).reshape(-1) for row in rows]
        mask = (np.asarray([len(part) for part in parts], dtype=np.int64), np.concatenate(parts))
    return chunks, mask


def token_arrays(dataset: Any) -> TokenArrays:
    """Concatenate a split's ``output_tokens``, ``logits_token_ids`` and ``logits_values``.

    Parameters
    ----------
    dataset : datasets.Dataset, pyarrow.Table, sequence of row mappings, or TokenArrays
        A MUCH split (needs ``generation_id``, ``output_tokens``, ``logits_token_ids``, ``logits_values``;
        ``token_chunks`` and ``stopword_mask`` are kept when present). A ``TokenArrays`` is returned unchanged.

    Returns
    -------
    TokenArrays

    Raises
    ------
    ValueError
        Naming the ``generation_id`` and the field: a missing column, a sample without tokens, a probability row
        count that differs from the number of output tokens, a row without ``K`` candidates (all rows need the
        same K), or probabilities outside [0, 1] / not finite.
    """
    if isinstance(dataset, TokenArrays):
        return dataset
    if hasattr(dataset, "with_format") and hasattr(dataset, "column_names"):  # datasets.Dataset
        missing = [name for name in _COLUMNS if name not in dataset.column_names]
        if missing:
            raise ValueError(f"the dataset lacks column(s) {missing}")
        # The "arrow" format honours .select()/.filter() index mappings; the buffers are not copied otherwise.
        parts = _from_arrow(dataset.select_columns(list(_COLUMNS)).with_format("arrow")[:])
        claim_columns = [name for name in (TOKEN_CHUNKS, STOPWORD_MASK) if name in dataset.column_names]
        claims = _claim_columns(dataset.select_columns(claim_columns).with_format("arrow")[:] if claim_columns
                                else None)
    elif hasattr(dataset, "column_names") and hasattr(dataset, "column"):  # pyarrow.Table
        missing = [name for name in _COLUMNS if name not in dataset.column_names]
        if missing:
            raise ValueError(f"the table lacks column(s) {missing}")
        parts = _from_arrow(dataset)
        claims = _claim_columns(dataset)
    elif isinstance(dataset, Sequence) and not isinstance(dataset, str | bytes):
        parts = _from_rows(dataset)
        claims = _claim_rows(dataset)
    else:
        raise TypeError(f"expected a datasets.Dataset, a pyarrow.Table or a list of rows, got {type(dataset).__name__}")
    ids, lengths, tokens, (id_rows, id_widths, id_values), (p_rows, p_widths, p_values) = parts
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)

    def fail(sample: int, message: str):
        raise ValueError(f"{GENERATION_ID}={ids[sample]!r}: {message}")

    if (empty := np.flatnonzero(lengths == 0)).size:
        fail(int(empty[0]), f"field {OUTPUT_TOKENS!r} is empty (every output has at least its EOS token)")
    for name, rows in ((LOGITS_TOKEN_IDS, id_rows), (LOGITS_VALUES, p_rows)):
        if (bad := np.flatnonzero(rows != lengths)).size:
            sample = int(bad[0])
            fail(sample, f"field {name!r} has {rows[sample]} rows but {OUTPUT_TOKENS!r} has {lengths[sample]} tokens")
    width = int(id_widths[0]) if id_widths.size else TOP_K
    for name, widths in ((LOGITS_TOKEN_IDS, id_widths), (LOGITS_VALUES, p_widths)):
        if (bad := np.flatnonzero(widths != width)).size:
            token = int(bad[0])
            sample = int(np.searchsorted(offsets, token, side="right") - 1)
            fail(sample, f"field {name!r} row {token - offsets[sample]} has {widths[token]} candidates, expected "
                         f"{width} like the first row")
    probabilities = np.asarray(p_values, dtype=np.float64).reshape(-1, width)
    chunks, mask = claims
    if mask is not None:
        mask_lengths, mask = mask
        if (bad := np.flatnonzero(mask_lengths != lengths)).size:
            sample = int(bad[0])
            fail(sample, f"field {STOPWORD_MASK!r} has {mask_lengths[sample]} entries but {OUTPUT_TOKENS!r} has "
                         f"{lengths[sample]} tokens")
    arrays = TokenArrays(ids, offsets, tokens, np.asarray(id_values, dtype=np.int64).reshape(-1, width), probabilities,
                         chunks, mask)
    invalid = ~np.isfinite(probabilities) | (probabilities < 0) | (probabilities > 1)
    if invalid.any():
        token, column = np.argwhere(invalid)[0]
        raise ValueError(f"{arrays.where(int(token))}: field {LOGITS_VALUES!r} holds {probabilities[token, column]}, "
                         "not a probability in [0, 1] (MUCH stores probabilities, despite the name)")
    return arrays


def per_sample(compute: Callable[..., np.ndarray], data: Any, *args: Any, **params: Any) -> list[np.ndarray]:
    """What every method's public function does: ``compute(arrays, *args, **params)`` (flat scores over the split's
    concatenated tokens, shape (N_tokens,)) on ``token_arrays(data)``, split into one array per sample."""
    arrays = token_arrays(data)
    return arrays.split(compute(arrays, *args, **params))
