"""Reading and writing MUCH-signals files (the format of ``orailix/MUCH-signals``,
docs/reference-behaviour.md#signal-files).

A signal file holds one record per (generation, signal): ``generation_id`` (str), ``signal_name`` (str) and
``values`` (one float per generated token, EOS position included; **higher = more uncertain**). Two encodings are
supported, chosen by the file suffix:

* ``.jsonl``: one compact JSON object per line, as the reference's ``output/signals/<name>.jsonl``;
* ``.parquet``: a table with the three columns, as the shards of ``orailix/MUCH-signals``.

Precision: the published signal files (docs/reference-behaviour.md#signal-files) hold ``values`` as ``list[float]``: the
reference writes Python floats (float64) to
``output/signals/<name>.jsonl``, and the dtype of the hub's parquet shards is not recorded in the reference code
(the upload was done outside it). So both encodings here store **float64**, and every number a method computed is
read back bit for bit: ``much run --out`` evaluates the same numbers as ``much run`` without it. Parquet files
whose values are float32 (or any other float type) are read unchanged and widened exactly to float64.

:func:`write_signals` is idempotent: re-writing a ``(generation_id, signal_name)`` pair replaces the stored values,
it never duplicates them (the reference's writer appends duplicates, docs/reference-behaviour.md#duplicate-signal-rows).
The file is rewritten atomically
(temporary file + ``os.replace``), so a reader never sees half a file and a killed writer leaves the old file intact.

:func:`read_signals` also accepts a folder (every ``*.jsonl`` / ``*.parquet`` in it, e.g. ``output/signals/``).
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from much_dataset.jsonl import parse_jsonl_lines
from much_dataset.params import UnknownNameError, unknown_name
from much_dataset.schema import GENERATION_ID, SIGNAL_COLUMNS
from much_metric.fileio import atomic_write_bytes

__all__ = ["CLAIM_SUFFIX", "write_signals", "read_signals", "signal_files_in", "SignalsFormatError"]

#: Signal names ending with this hold one value per chunk (claim-level methods: P(True), judges, sampling).
CLAIM_SUFFIX = "@claim"

_SIGNAL_NAME, _VALUES = SIGNAL_COLUMNS[1], SIGNAL_COLUMNS[2]
_SUFFIXES = (".jsonl", ".parquet")

Signals = dict[str, dict[str, np.ndarray]]


class SignalsFormatError(ValueError):
    """A signal record or file does not follow the MUCH-signals format."""


def _format(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix not in _SUFFIXES:
        got = suffix or "no suffix"
        raise SignalsFormatError(f"{path}: signal files must end with .jsonl or .parquet, got {got!r}")
    return suffix[1:]


def _check_record(record: Any, where: str) -> tuple[str, str, np.ndarray]:
    if not isinstance(record, Mapping):
        raise SignalsFormatError(f"{where}: a signal record must be a mapping with keys {SIGNAL_COLUMNS}")
    missing = [key for key in SIGNAL_COLUMNS if key not in record]
    if missing:
        raise SignalsFormatError(f"{where}: signal record lacks field(s) {missing}")
    generation_id, signal_name = record[GENERATION_ID], record[_SIGNAL_NAME]
    if not isinstance(generation_id, str) or not generation_id:
        raise SignalsFormatError(f"{where}: field {GENERATION_ID!r} must be a non-empty string, got {generation_id!r}")
    if not isinstance(signal_name, str) or not signal_name:
        raise SignalsFormatError(
            f"{where} ({GENERATION_ID}={generation_id!r}): field {_SIGNAL_NAME!r} must be a non-empty string"
        )
    label = f"{where} ({GENERATION_ID}={generation_id!r}, signal {signal_name!r})"
    values = _numbers(record[_VALUES], label)
    if values.ndim != 1 or values.size == 0:
        raise SignalsFormatError(
            f"{label}: field {_VALUES!r} must be a non-empty 1-D list (one value per output token), got shape "
            f"{values.shape}"
        )
    if not np.isfinite(values).all():
        position = int(np.flatnonzero(~np.isfinite(values))[0])
        raise SignalsFormatError(
            f"{label}: field {_VALUES!r} has a non-finite value ({values[position]}) at token {position}"
        )
    return generation_id, signal_name, values


_FLOAT64_MAX = int(np.finfo(np.float64).max)
_NEED = "need a list of real numbers (JSON ints or floats), one per output token"


def _numbers(raw: Any, label: str) -> np.ndarray:
    """``raw`` as a float64 array when it holds only real numbers (ints, floats; never bools, strings, dates)."""
    if not isinstance(raw, list | tuple | np.ndarray):
        if isinstance(raw, str | bytes | Mapping) or np.ndim(raw) == 0:
            raise SignalsFormatError(f"{label}: field {_VALUES!r} is a {type(raw).__name__} ({_short(raw)}); {_NEED}")
        raw = np.asarray(raw)
    if isinstance(raw, np.ndarray):
        if raw.dtype == object:
            raw = raw.tolist()
        elif raw.dtype.kind not in "iuf":
            raise SignalsFormatError(f"{label}: field {_VALUES!r} holds {raw.dtype} values; {_NEED}")
        else:
            return raw.astype(np.float64, copy=False)
    # Types are checked on the set of element types (one C-level pass), not element by element.
    wrong = {kind for kind in set(map(type, raw))
             if not issubclass(kind, int | float | np.integer | np.floating) or issubclass(kind, bool | np.bool_)}
    if wrong:
        position = next(i for i, value in enumerate(raw) if type(value) in wrong)
        raise SignalsFormatError(f"{label}: field {_VALUES!r} has a {type(raw[position]).__name__} at token "
                                 f"{position} ({_short(raw[position])}); {_NEED}")
    try:
        return np.asarray(raw, dtype=np.float64)
    except OverflowError:
        position = next(i for i, value in enumerate(raw) if isinstance(value, int) and abs(value) > _FLOAT64_MAX)
        raise SignalsFormatError(f"{label}: field {_VALUES!r} has an integer too large for a float64 at token "
                                 f"{position} ({len(str(raw[position]))} digits)") from None


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _decode(path: Path) -> str:
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        column = error.start - (data.rfind(b"\n", 0, error.start) + 1) + 1
        raise SignalsFormatError(f"{path}:{line}: not UTF-8 text (byte {data[error.start]:#04x} at column "
                                 f"{column}: {error.reason})") from None


def _read_jsonl(path: Path) -> list[tuple[str, str, np.ndarray]]:
    records = []
    # One decode of the whole file (no per-line cost); an error names the line. split("\n") as text-mode reading
    # does; a trailing "\r" is JSON whitespace.
    for number, record in parse_jsonl_lines(_decode(path).split("\n"), path, error=SignalsFormatError,
                                            what="not a JSON object"):
        if isinstance(record, dict) and _SIGNAL_NAME not in record:
            record[_SIGNAL_NAME] = path.stem  # a user's own scores: the file names the method
        records.append(_check_record(record, f"{path}:{number}"))
    return records


def _read_parquet(path: Path) -> list[tuple[str, str, np.ndarray]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except (pa.ArrowException, OSError) as error:
        raise SignalsFormatError(f"{path}: not a readable parquet file ({error})") from error
    missing = [key for key in (GENERATION_ID, _VALUES) if key not in table.column_names]
    if missing:
        raise SignalsFormatError(f"{path}: parquet signal file lacks column(s) {missing}")
    ids = table.column(GENERATION_ID).to_pylist()
    _check_values_type(path, table.schema.field(_VALUES).type, ids)
    if _SIGNAL_NAME in table.column_names:
        names = table.column(_SIGNAL_NAME).to_pylist()
    else:
        names = [path.stem] * len(ids)  # a user's own scores: the file names the method
    column = table.column(_VALUES).combine_chunks()
    if pa.types.is_fixed_size_list(column.type):
        column = column.cast(pa.list_(column.type.value_type))
    # One flat buffer + offsets instead of a Python list per row: 10x faster on hub-sized files.
    offsets = np.asarray(column.offsets)
    flat = np.asarray(column.flatten().to_numpy(zero_copy_only=False), dtype=np.float64)
    nulls = np.asarray(column.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    if nulls.any():
        row = int(np.flatnonzero(nulls)[0])
        raise SignalsFormatError(f"{path}: row {row} ({GENERATION_ID}={ids[row]!r}) has null {_VALUES!r}")
    records = []
    for row, (generation_id, name) in enumerate(zip(ids, names, strict=True)):
        values = flat[offsets[row] : offsets[row + 1]]
        records.append(_check_record({GENERATION_ID: generation_id, _SIGNAL_NAME: name, _VALUES: values},
                                     f"{path}: row {row}"))
    return records


def _check_values_type(path: Path, kind: Any, ids: list[Any]) -> None:
    """Refuse a parquet ``values`` column that is not a list of ints or floats per row (strings, timestamps, bools,
    nested lists, a scalar column)."""
    import pyarrow as pa

    is_list = pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind)
    if is_list and (pa.types.is_integer(kind.value_type) or pa.types.is_floating(kind.value_type)):
        return
    first = f"row 0 ({GENERATION_ID}={ids[0]!r})" if ids else "every row"
    raise SignalsFormatError(f"{path}: {first}: column {_VALUES!r} has type {kind}; need a list of real numbers per "
                             "row (list<double>, list<float> or list<int...>), one per output token")


def _read_records(path: Path) -> list[tuple[str, str, np.ndarray]]:
    return _read_jsonl(path) if _format(path) == "jsonl" else _read_parquet(path)


def read_records(path: Path) -> list[tuple[str, str, np.ndarray]]:
    """``(generation_id, signal_name, values)`` of every record of one signal file, in file order (duplicates kept:
    the submission archive reader refuses them, :func:`read_signals` keeps the last)."""
    records = _read_records(path)
    if not records:
        # An empty file evaluates to an empty table; a truncated download or a failed run must not pass for that.
        raise SignalsFormatError(f"{path}: the signal file holds no record (empty or blank)")
    return records


def signal_files_in(folder: Path) -> list[Path]:
    """The signal files of a folder (``.jsonl``/``.parquet``, hidden files left out), sorted by name."""
    return sorted(p for p in folder.iterdir() if p.suffix.lower() in _SUFFIXES and not p.name.startswith("."))


def _files(path: Path) -> list[Path]:
    if path.is_dir():
        files = signal_files_in(path)
        if not files:
            raise FileNotFoundError(f"{path}: folder holds no .jsonl or .parquet signal file")
        return files
    if not path.exists():
        raise FileNotFoundError(f"signal file not found: {path}")
    return [path]


def read_signals(path: str | os.PathLike, *, signal_names: Iterable[str] | None = None) -> Signals:
    """Read a MUCH-signals file (or a folder of them).

    Parameters
    ----------
    path : str or path-like
        A ``.jsonl`` or ``.parquet`` signal file, or a folder whose ``*.jsonl`` / ``*.parquet`` files are all read.
        Records (or a parquet file) without ``signal_name`` take the file's stem as their signal name, so a file
        ``my_method.jsonl`` of ``{"generation_id", "values"}`` records can be evaluated directly.
    signal_names : iterable of str, optional
        Keep only these signals (all by default). Asking for a signal the file lacks is an error.

    Returns
    -------
    dict
        ``{signal_name: {generation_id: values}}`` where ``values`` is a float64 array of shape ``(n_tokens,)``,
        higher = more uncertain. If a pair occurs twice (files written by the reference's appending writer),
        the last occurrence wins and a warning says how many duplicates were dropped.
    """
    wanted = None if signal_names is None else set(signal_names)
    result: Signals = {}
    duplicates = 0
    seen: dict[str, None] = {}  # every signal the files hold, for the message naming an absent one
    for file in _files(Path(path)):
        for generation_id, name, values in read_records(file):
            seen[name] = None
            if wanted is not None and name not in wanted:
                continue
            per_signal = result.setdefault(name, {})
            duplicates += generation_id in per_signal
            per_signal[generation_id] = values
    if duplicates:
        warnings.warn(
            f"{path}: {duplicates} duplicate (generation_id, signal_name) record(s); kept the last of each",
            stacklevel=2,
        )
    if wanted is not None and (absent := sorted(wanted - set(result))):
        error = unknown_name("signal", absent[0], sorted(seen), hint=f" in {path}")
        raise UnknownNameError(f"{path}: signal(s) {absent} not found: {error}") from None
    return result


def _normalise_rows(rows: Any) -> list[tuple[str, str, np.ndarray]]:
    # Accept the nested mapping read_signals returns, so read -> filter -> write round-trips directly.
    if isinstance(rows, Mapping):
        rows = [
            {GENERATION_ID: gid, _SIGNAL_NAME: name, _VALUES: values}
            for name, per_signal in rows.items()
            for gid, values in per_signal.items()
        ]
    return [_check_record(record, f"signal row {index}") for index, record in enumerate(rows)]


def _write_jsonl(path: Path, records: list[tuple[str, str, np.ndarray]]) -> bytes:
    lines = []
    for generation_id, name, values in records:
        # float(repr) round-trips float64 exactly; json rejects nan/inf, which _check_record already refused.
        payload = {GENERATION_ID: generation_id, _SIGNAL_NAME: name, _VALUES: [float(v) for v in values]}
        lines.append(json.dumps(payload, ensure_ascii=False, separators=(",", ":")))
    return ("\n".join(lines) + "\n").encode("utf-8") if lines else b""


def _write_parquet(path: Path, records: list[tuple[str, str, np.ndarray]]) -> bytes:
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    lengths = np.array([len(r[2]) for r in records], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    flat = np.concatenate([r[2] for r in records]).astype(np.float64) if records else np.zeros(0, np.float64)
    values = pa.ListArray.from_arrays(pa.array(offsets), pa.array(flat, type=pa.float64()))
    table = pa.table(
        {
            GENERATION_ID: pa.array([r[0] for r in records], type=pa.string()),
            _SIGNAL_NAME: pa.array([r[1] for r in records], type=pa.string()),
            _VALUES: values,
        }
    )
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    return buffer.getvalue()


def write_signals(path: str | os.PathLike, rows: Iterable[Mapping[str, Any]] | Mapping[str, Mapping]) -> int:
    """Write signal rows into ``path`` (``.jsonl`` or ``.parquet``), merging with what the file already holds.

    Parameters
    ----------
    path : str or path-like
        Target file; created (with its parent folders) if absent.
    rows : iterable of mappings, or nested mapping
        Records ``{"generation_id": str, "signal_name": str, "values": sequence of float}``, one value per output
        token (EOS included), higher = more uncertain; or the ``{signal_name: {generation_id: values}}`` mapping
        that :func:`read_signals` returns. Values must be finite.

    Returns
    -------
    int
        The number of records the file holds afterwards.

    Notes
    -----
    Idempotent: a ``(generation_id, signal_name)`` pair already in the file is replaced by the new values (and a pair
    given twice in ``rows`` keeps the last), never duplicated. Records keep their first-seen order. All rows are
    validated before anything is written; the file is replaced atomically. Both encodings keep float64 values
    exactly (see the module docstring).
    """
    path = Path(path)
    kind = _format(path)
    new = _normalise_rows(rows)
    merged: dict[tuple[str, str], np.ndarray] = {}
    if path.exists() and path.stat().st_size > 0:
        for generation_id, name, values in _read_records(path):  # an empty file is fine to write into
            merged[(generation_id, name)] = values
    for generation_id, name, values in new:
        merged[(generation_id, name)] = values
    records = [(gid, name, values) for (gid, name), values in merged.items()]
    data = _write_jsonl(path, records) if kind == "jsonl" else _write_parquet(path, records)
    atomic_write_bytes(path, data)
    return len(records)
