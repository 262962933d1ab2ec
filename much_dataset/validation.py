"""Structural validation of MUCH rows, run on load and on build.

:func:`validate_table` checks a ``pyarrow.Table`` of MUCH rows (hub list-of-lists layout or the typed ``Array2D``
view) with whole-column numpy operations: the nested lists are flattened once and every per-token / per-candidate
check is a vectorised comparison, so a full-size split (4,873 rows, ~100k tokens, ~2.4M probabilities) takes well
under a second. :func:`validate_rows` does the same for a list of row dicts.

What is checked, per row (the ``field`` of the error in brackets):

* ``generation_id`` present and unique [generation_id]; ``lang`` one of ``en/fr/es/de`` [lang];
* every list column present (not null) [that column] -- except ``stopword_mask``, where null means "not computed";
* ``logits_token_ids``, ``logits_values`` and ``stopword_mask`` have one entry per output token [that column];
* every candidate row has exactly ``top_k`` (24) ids and 24 values [logits_token_ids / logits_values]. Rows with
  more candidates exist only before the builder's filter step (``generations.jsonl``); pass ``top_k=None`` there to
  only require ids and values rows of equal, non-zero length;
* probabilities finite, in [0, 1] and sorted in decreasing order within each row (ties allowed) [logits_values];
* each row's stored probabilities sum to at most ``1 + PROBABILITY_SUM_TOLERANCE`` (1e-4): they are the top-k of
  one distribution over the vocabulary, so their sum cannot exceed 1 except by rounding (float32 storage and a
  float32 softmax give at most about 1e-6; the embedded sample's largest excess is 1.7e-7) [logits_values];
* the sampled token ``output_tokens[i]`` is among ``logits_token_ids[i]`` [output_tokens]. MUCH guarantees it (rows
  where it was not are filtered out, docs/reference-behaviour.md#captured-distribution), so by default it is an error;
  ``check_sampled_token=False`` skips it;
* ``token_chunks`` non-empty chunks whose concatenation is exactly ``0, 1, ..., n_tokens - 1`` (contiguous,
  exhaustive, in range, in order) [token_chunks];
* ``labels``: one per chunk, each -1 or +1 [labels]; ``human_labels_0/1``: the sentinel ``[0]`` or one -1/+1 per
  chunk [human_labels_0 / human_labels_1]. A split whose labels are withheld has none of the three columns
  (:data:`much_dataset.schema.LABEL_COLUMNS`) and is valid; a table with some of them but not all is not.

``on_error="raise"`` raises :class:`InvalidSampleError` for the first bad row (naming its ``generation_id`` and the
field); ``on_error="drop"`` returns the good rows and a report: one :class:`Problem` per defect found.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from much_dataset import schema
from much_dataset._arrow import flat_numpy as _numpy
from much_dataset._arrow import list_array as _list_array
from much_dataset._arrow import list_lengths as _lengths

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

__all__ = ["InvalidFileError", "InvalidSampleError", "Problem", "validate_table", "validate_rows", "invalid_rows",
           "rows_to_table", "check_columns", "token_problems", "LabelsWithheldError", "PROBABILITY_SUM_TOLERANCE"]

_ON_ERROR = ("raise", "drop")
_LIST_COLUMNS = (
    schema.OUTPUT_TOKENS, schema.LOGITS_TOKEN_IDS, schema.LOGITS_VALUES, schema.TOKEN_CHUNKS,
    schema.LABELS, schema.HUMAN_LABELS_0, schema.HUMAN_LABELS_1,
)


class InvalidSampleError(ValueError):
    """A MUCH row breaks a structural rule. ``generation_id`` and ``field`` name the row and the column."""

    def __init__(self, generation_id: str | None, field: str, reason: str, *, more: str = "") -> None:
        self.generation_id = generation_id
        self.field = field
        self.reason = reason
        super().__init__(f"invalid MUCH sample generation_id={generation_id!r}, field {field!r}: {reason}{more}")


class InvalidFileError(ValueError):
    """A MUCH data file cannot be read as MUCH rows. ``path`` names the file; ``column`` and ``generation_id`` the
    column and the first bad row when the defect is in one (``None`` when the file itself is unreadable)."""

    def __init__(self, path, reason: str, *, column: str | None = None, generation_id: str | None = None) -> None:
        self.path = path
        self.column = column
        self.generation_id = generation_id
        where = "" if column is None else f", column {column!r}"
        row = "" if generation_id is None else f", generation_id={generation_id!r}"
        super().__init__(f"{path}{where}{row}: {reason}")


class LabelsWithheldError(ValueError):
    """Labels were needed (to compute a metric, to train) but the rows have none: a split whose labels are withheld
    (``python -m builder export --withhold-labels``), scored only by the leaderboard server that holds them.
    ``missing`` names the label columns the rows lack."""

    def __init__(self, where: str, missing: Sequence[str]) -> None:
        self.missing = list(missing)
        super().__init__(
            f"{where}: the rows have no labels (they lack the column(s) {self.missing}): a split whose labels are "
            "withheld is scored only by the leaderboard that holds its label file (much-leaderboard serve "
            "--private-labels FILE); compute its signals with `much run --out DIR` and submit DIR as a zip")


@dataclass(frozen=True)
class Problem:
    """One defect of one row, as reported by ``on_error="drop"``."""

    generation_id: str | None
    field: str
    reason: str


# ---------------------------------------------------------------------------------------------------------------
# Flattening helpers: a list column -> per-row lengths (nulls count as 0) + flat values.


def _flatten(array: pa.Array) -> pa.Array:
    # ListArray.flatten honours slicing offsets and skips null slots (whose length we count as 0).
    return array.flatten()


def _starts(lengths: np.ndarray) -> np.ndarray:
    return np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64) if len(lengths) else lengths


def _first_bad(bad: np.ndarray, owner: np.ndarray, owner_start: np.ndarray) -> dict[int, int]:
    """For flat items flagged ``bad``, ``{owner: local index of its first bad item}`` (vectorised)."""
    positions = np.flatnonzero(bad)
    if not len(positions):
        return {}
    owners, first = np.unique(owner[positions], return_index=True)
    local = positions[first] - owner_start[owners]
    return dict(zip(owners.tolist(), local.tolist(), strict=True))


class _Collector:
    """Accumulates (row, field, reason) problems; reasons are formatted only for bad rows."""

    def __init__(self, n_rows: int) -> None:
        self.bad = np.zeros(n_rows, dtype=bool)
        self.items: list[tuple[int, int, str, str]] = []

    def add(self, row: int, field: str, reason: str) -> None:
        self.bad[row] = True
        self.items.append((row, len(self.items), field, reason))

    def add_mask(self, mask: np.ndarray, field: str, reason) -> None:
        for row in np.flatnonzero(mask).tolist():
            self.add(row, field, reason(row))


# ---------------------------------------------------------------------------------------------------------------


def validate_table(
    table: pa.Table,
    *,
    on_error: str = "raise",
    top_k: int | None = schema.TOP_K,
    check_sampled_token: bool = True,
) -> tuple[pa.Table, list[Problem]]:
    """Validate MUCH rows (see the module docstring for the rules).

    Parameters
    ----------
    table : pyarrow.Table, n_rows rows with at least the hub columns of :mod:`much_dataset.schema`.
    on_error : ``"raise"`` (default) or ``"drop"``.
    top_k : required number of candidates per token (24), or None to accept any equal, non-zero count.
    check_sampled_token : whether ``output_tokens[i]`` must be among ``logits_token_ids[i]``.

    Returns
    -------
    (kept, problems) : the table without the bad rows (all rows when none is bad) and the list of problems, in row
    order (empty with ``on_error="raise"``, which raises on the first bad row instead).
    """
    if on_error not in _ON_ERROR:
        raise ValueError(f"on_error must be one of {_ON_ERROR}, got {on_error!r}")
    bad, problems = invalid_rows(table, top_k=top_k, check_sampled_token=check_sampled_token)
    if not problems:
        return table, []
    if on_error == "raise":
        first = problems[0]
        more = ""
        if len(problems) > 1:
            more = (f" ({len(problems) - 1} more problem(s) in {int(bad.sum())} bad row(s) of {len(table)}; "
                    "on_error='drop' drops them and reports each)")
        raise InvalidSampleError(first.generation_id, first.field, first.reason, more=more)
    return table.filter(~bad), problems


def invalid_rows(
    table: pa.Table,
    *,
    top_k: int | None = schema.TOP_K,
    check_sampled_token: bool = True,
) -> tuple[np.ndarray, list[Problem]]:
    """The checks of :func:`validate_table` without acting on them.

    Returns ``(bad, problems)``: ``bad`` is a bool array of shape (n_rows,), True for rows with at least one
    defect; ``problems`` lists every defect in row order. A duplicated ``generation_id`` marks the later copies only.
    """
    if top_k is not None and (not isinstance(top_k, int) or top_k < 1):
        raise ValueError(f"top_k must be a positive int or None, got {top_k!r}")
    check_columns(table.column_names)
    ids = table[schema.GENERATION_ID].to_pylist()
    found = _Collector(len(table))
    _check_scalars(table, ids, found)
    _check_nulls(table, found)
    _check_tokens(table, found, top_k=top_k, check_sampled_token=check_sampled_token)
    _check_chunks_and_labels(table, found)
    found.items.sort()
    return found.bad, [Problem(ids[row], field, reason) for row, _, field, reason in found.items]


def token_problems(table: pa.Table, *, top_k: int | None = None,
                   check_sampled_token: bool = True) -> list[tuple[int, str, str]]:
    """The per-token rules of :func:`validate_table` alone (candidate rows as long as the tokens, probabilities
    finite, in [0, 1], sorted, summing to at most 1, the sampled token among its candidates), for any table with the
    token columns (a samples pack's shards): ``(row, field, reason)`` per defect, in row order."""
    found = _Collector(len(table))
    _check_tokens(table, found, top_k=top_k, check_sampled_token=check_sampled_token)
    return [(row, field, reason) for row, _, field, reason in sorted(found.items)]


def check_columns(column_names: Sequence[str], *, what: str = "MUCH rows") -> None:
    """Raise ``ValueError`` naming the hub columns ``column_names`` lacks. The label columns may all be absent (a
    split whose labels are withheld), but not only some of them."""
    names = set(column_names)
    missing = [name for name in schema.HUB_COLUMNS if name not in names]
    absent_labels = schema.missing_label_columns(names)
    if len(absent_labels) == len(schema.LABEL_COLUMNS):  # withheld labels: the rest must be there
        missing = [name for name in missing if name not in schema.LABEL_COLUMNS]
    if missing:
        raise ValueError(f"{what} lack the column(s) {missing}; expected {list(schema.HUB_COLUMNS)} (or every "
                         f"one but the label columns {list(schema.LABEL_COLUMNS)}, for a split whose labels are "
                         "withheld)")


def _check_scalars(table: pa.Table, ids: list, found: _Collector) -> None:
    seen: dict[str, int] = {}
    for row, generation_id in enumerate(ids):
        if not generation_id:
            found.add(row, schema.GENERATION_ID, "missing or empty generation_id")
        elif generation_id in seen:
            found.add(row, schema.GENERATION_ID, f"duplicate generation_id (also row {seen[generation_id]})")
        else:
            seen[generation_id] = row
    for row, lang in enumerate(table[schema.LANG].to_pylist()):
        if lang not in schema.LANGUAGES:
            found.add(row, schema.LANG, f"lang {lang!r} is not one of {schema.LANGUAGES}")


def _check_nulls(table: pa.Table, found: _Collector) -> None:
    for name in _LIST_COLUMNS:
        if name not in table.column_names:  # a label column of a split whose labels are withheld
            continue
        nulls = table[name].is_null().to_numpy(zero_copy_only=False)
        found.add_mask(nulls, name, lambda _row: "missing (null)")


#: How far above 1 the stored top-k probabilities of one token may sum (rounding of float32 values).
PROBABILITY_SUM_TOLERANCE = 1e-4


def _check_tokens(table: pa.Table, found: _Collector, *, top_k: int | None, check_sampled_token: bool) -> None:
    tokens = _list_array(table[schema.OUTPUT_TOKENS])
    n_tokens = _lengths(tokens)
    aligned = np.ones(len(table), dtype=bool)
    token_aligned = [schema.LOGITS_TOKEN_IDS, schema.LOGITS_VALUES]
    if schema.STOPWORD_MASK in table.column_names:
        token_aligned.append(schema.STOPWORD_MASK)
    outer: dict[str, pa.Array] = {}
    for name in token_aligned:
        outer[name] = _list_array(table[name])
        lengths = _lengths(outer[name])
        # A null stopword_mask means "not computed", which is allowed.
        wrong = lengths != n_tokens
        if name == schema.STOPWORD_MASK:
            wrong &= ~table[name].is_null().to_numpy(zero_copy_only=False)
        found.add_mask(wrong, name, lambda row, n=lengths: f"{n[row]} entries for {n_tokens[row]} output tokens")
        if name != schema.STOPWORD_MASK:
            aligned &= ~wrong

    # Candidate rows: restrict to rows whose outer lengths agree so that token positions line up across columns.
    rows = np.flatnonzero(aligned)
    if not len(rows):
        return
    subset = table.take(rows) if len(rows) < len(table) else table
    n_tok = n_tokens[rows]
    token_row = np.repeat(np.arange(len(rows)), n_tok)
    token_start = _starts(n_tok)
    id_rows = _flatten(_list_array(subset[schema.LOGITS_TOKEN_IDS]))
    value_rows = _flatten(_list_array(subset[schema.LOGITS_VALUES]))
    n_ids = _lengths(id_rows)
    n_values = _lengths(value_rows)

    def report(bad_token: np.ndarray, field: str, what) -> None:
        for local_row, token in _first_bad(bad_token, token_row, token_start).items():
            found.add(int(rows[local_row]), field, f"token {token}: {what(token_start[local_row] + token)}")

    if top_k is not None:
        report(n_ids != top_k, schema.LOGITS_TOKEN_IDS, lambda t: f"{n_ids[t]} candidate ids, expected {top_k}")
        report(n_values != top_k, schema.LOGITS_VALUES, lambda t: f"{n_values[t]} probabilities, expected {top_k}")
    else:
        report(n_ids == 0, schema.LOGITS_TOKEN_IDS, lambda t: "no candidate ids")
        report(n_values != n_ids, schema.LOGITS_VALUES,
               lambda t: f"{n_values[t]} probabilities for {n_ids[t]} candidate ids")

    values = _numpy(_flatten(value_rows), np.float64)
    value_token = np.repeat(np.arange(len(n_values)), n_values)
    bad_value = ~np.isfinite(values) | (values < 0) | (values > 1)
    # Sorted descending within each candidate row: compare neighbours, ignoring pairs that straddle two rows.
    rising = np.zeros(len(values), dtype=bool)
    if len(values) > 1:
        same_row = value_token[1:] == value_token[:-1]
        rising[1:] = same_row & (values[1:] > values[:-1])
    token_has_bad = np.bincount(value_token[bad_value], minlength=len(n_values)) > 0
    token_rising = np.bincount(value_token[rising], minlength=len(n_values)) > 0
    report(token_has_bad, schema.LOGITS_VALUES, lambda t: "probability NaN, infinite, negative or > 1")
    report(token_rising & ~token_has_bad, schema.LOGITS_VALUES,
           lambda t: "probabilities not sorted in decreasing order")
    sums = np.bincount(value_token, weights=np.where(bad_value, 0.0, values), minlength=len(n_values))
    report((sums > 1.0 + PROBABILITY_SUM_TOLERANCE) & ~token_has_bad, schema.LOGITS_VALUES,
           lambda t: f"probabilities sum to {sums[t]:.6g} > 1 + {PROBABILITY_SUM_TOLERANCE:g} (the stored top "
           "candidates of one distribution: not probabilities?)")

    if check_sampled_token:
        sampled = _numpy(_flatten(_list_array(subset[schema.OUTPUT_TOKENS])), np.int64)
        candidates = _numpy(_flatten(id_rows), np.int64)
        id_token = np.repeat(np.arange(len(n_ids)), n_ids)
        hit = candidates == sampled[id_token]
        present = np.bincount(id_token[hit], minlength=len(n_ids)) > 0
        report(~present & (n_ids > 0), schema.OUTPUT_TOKENS,
               lambda t: f"sampled token id {sampled[t]} is not among its logits_token_ids")


def _check_chunks_and_labels(table: pa.Table, found: _Collector) -> None:
    n_rows = len(table)
    n_tokens = _lengths(_list_array(table[schema.OUTPUT_TOKENS]))
    chunks = _list_array(table[schema.TOKEN_CHUNKS])
    n_chunks = _lengths(chunks)
    chunk_lists = _flatten(chunks)
    chunk_sizes = _lengths(chunk_lists)
    chunk_row = np.repeat(np.arange(n_rows), n_chunks)
    chunk_start = _starts(n_chunks)

    empty = _first_bad(chunk_sizes == 0, chunk_row, chunk_start)
    for row, chunk in empty.items():
        found.add(row, schema.TOKEN_CHUNKS, f"chunk {chunk} is empty")

    # Exhaustive + contiguous + in order <=> the concatenated chunks of a row are exactly 0..n_tokens-1.
    indices = _numpy(_flatten(chunk_lists), np.int64)
    covered = np.bincount(chunk_row, weights=chunk_sizes, minlength=n_rows).astype(np.int64)
    index_row = np.repeat(chunk_row, chunk_sizes)
    expected = np.arange(len(indices)) - _starts(covered)[index_row]
    mismatch_rows = np.bincount(index_row[indices != expected], minlength=n_rows) > 0
    broken = (mismatch_rows | (covered != n_tokens)) & (n_chunks > 0)
    broken[list(empty)] = False
    found.add_mask(n_chunks == 0, schema.TOKEN_CHUNKS, lambda _row: "no chunks")
    found.add_mask(broken, schema.TOKEN_CHUNKS, lambda row: (
        f"chunks cover {covered[row]} token index(es) that are not exactly 0..{n_tokens[row] - 1} in order "
        "(they must be contiguous, exhaustive and in range)"))

    for name in (schema.LABELS, schema.HUMAN_LABELS_0, schema.HUMAN_LABELS_1):
        if name not in table.column_names:  # withheld labels
            continue
        labels = _list_array(table[name])
        n_labels = _lengths(labels)
        values = _numpy(_flatten(labels), np.int64)
        label_row = np.repeat(np.arange(n_rows), n_labels)
        invalid = np.bincount(label_row[(values != schema.HALLUCINATED) & (values != schema.CORRECT)],
                              minlength=n_rows) > 0
        if name != schema.LABELS:
            # The sentinel [0] = "this annotator did not label the sample".
            sentinel = (n_labels == len(schema.NO_HUMAN_LABEL)) & invalid
            sentinel[sentinel] = values[_starts(n_labels)[sentinel]] == schema.NO_HUMAN_LABEL[0]
            invalid &= ~sentinel
            n_labels = np.where(sentinel, n_chunks, n_labels)
        present = ~table[name].is_null().to_numpy(zero_copy_only=False)
        found.add_mask((n_labels != n_chunks) & present, name,
                       lambda row, n=n_labels: f"{n[row]} labels for {n_chunks[row]} chunks")
        allowed = f"labels must be {schema.HALLUCINATED} or {schema.CORRECT}"
        if name != schema.LABELS:
            allowed += " (or the sentinel [0])"
        found.add_mask(invalid & present, name, lambda _row, message=allowed: message)


def validate_rows(
    rows: Sequence[Mapping],
    *,
    on_error: str = "raise",
    top_k: int | None = schema.TOP_K,
    check_sampled_token: bool = True,
) -> tuple[list[dict], list[Problem]]:
    """:func:`validate_table` for a list of row dicts (hub layout). Returns (kept rows, problems)."""
    if on_error not in _ON_ERROR:
        raise ValueError(f"on_error must be one of {_ON_ERROR}, got {on_error!r}")
    table = rows_to_table(rows)
    if on_error == "raise":
        validate_table(table, top_k=top_k, check_sampled_token=check_sampled_token)
        return [dict(row) for row in rows], []
    bad, problems = invalid_rows(table, top_k=top_k, check_sampled_token=check_sampled_token)
    return [dict(row) for row, is_bad in zip(rows, bad.tolist(), strict=True) if not is_bad], problems


def rows_to_table(rows: Sequence[Mapping]) -> pa.Table:
    """Row dicts -> ``pyarrow.Table``; a value of the wrong type raises :class:`InvalidSampleError` naming it."""
    import pyarrow as pa

    try:
        return pa.Table.from_pylist(list(rows))
    except (pa.ArrowInvalid, pa.ArrowTypeError) as error:
        # Slow path, only on failure: find which row and column pyarrow could not convert.
        types: dict[str, pa.DataType] = {}
        for row in rows:
            for name, value in row.items():
                try:
                    array = pa.array([value], type=types.get(name))
                except (pa.ArrowInvalid, pa.ArrowTypeError) as cell_error:
                    raise InvalidSampleError(row.get(schema.GENERATION_ID), name,
                                             f"value of the wrong type ({cell_error})") from error
                if name not in types and value is not None:
                    types[name] = array.type
        raise
