"""Local parquet folders read straight with pyarrow: no persistent cache to go stale, and errors that name the file.

``datasets.load_dataset(folder)`` keys its Arrow cache on the folder's path and the files' metadata; a shard
rewritten in place (``builder export`` does that) was served from the previous build. The published MUCH is a few
hundred MB, so reading the shards into memory on each load costs about what the cache check did and can never be
stale. Each file is read on its own, so a truncated or foreign file is reported by path, and integer columns stored
as floats (``labels`` 1.5, ids 7.5) are refused with the file, the column and the row -- instead of being truncated by
a cast or surfacing as a generic ``DatasetGenerationError``.

The shards of one split must agree: a shard lacking a column the others have (``stopword_mask``) or a MUCH column is
refused with its path; a shard written with plain pyarrow types (``list<list<double>>`` instead of the schema's
``Array2D`` of float32, int64 ids) is converted to the schema's types when nothing is lost (integers in range,
floats within float32's range, rounded to the nearest float32 as the hub's own cast does) and refused with its path
and column otherwise; a split whose shards hold no row at all is an error, not an empty dataset.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from much_dataset import schema
from much_dataset._arrow import list_array, list_lengths
from much_dataset.card import ALL_CONFIG, data_files
from much_dataset.validation import InvalidFileError

if TYPE_CHECKING:  # pragma: no cover
    import datasets
    import pyarrow as pa

__all__ = ["INTEGER_COLUMNS", "read_parquet_folder", "integral_table"]

#: Split names a hub file name may start with (MUCH's, plus the usual ones of ``datasets``).
_SPLIT_NAMES = frozenset({*schema.SPLITS, "trash", "validation", "valid", "dev", "eval"})

#: Columns whose values are integers at every nesting level (token ids, chunk indices, labels).
INTEGER_COLUMNS: tuple[str, ...] = (
    schema.OUTPUT_TOKENS, schema.LOGITS_TOKEN_IDS, schema.TOKEN_CHUNKS,
    schema.LABELS, schema.HUMAN_LABELS_0, schema.HUMAN_LABELS_1,
)


def _split_files(folder: Path, config: str, published: bool) -> dict[str, list[Path]]:
    if published:
        found = {}
        for entry in data_files(config):
            paths = sorted(folder.glob(entry["path"]))
            if paths:
                found[entry["split"]] = paths
        return found
    from datasets.data_files import get_data_patterns, resolve_pattern

    try:
        patterns = get_data_patterns(str(folder))
    except ValueError:  # e.g. data/test-en-00000-of-00001.parquet: datasets reads the split name "test-en"
        return _split_files_by_name(folder)
    def resolved(pattern: str) -> list[str]:
        try:
            return resolve_pattern(pattern, base_path=str(folder))
        except FileNotFoundError:  # one of a split's patterns matching nothing is fine
            return []

    found = {}
    for split, split_patterns in patterns.items():
        paths = sorted({Path(p) for pattern in split_patterns for p in resolved(pattern)})
        paths = [p for p in paths if p.suffix == ".parquet"]
        if paths:
            found[str(split)] = paths
    return found


#: A hub file name's split: its first word (``test-en-00000-of-00001.parquet``, ``train-00000-of-00003.parquet``,
#: ``test.parquet``) or, failing that, its folder's name (``test/en.parquet``).
_SPLIT_WORD = re.compile(r"([A-Za-z]+)(?=$|[-._ 0-9])")


def _split_files_by_name(folder: Path) -> dict[str, list[Path]]:
    """The parquet files of ``folder`` grouped by the split their name or folder starts with (every layout
    ``push_to_hub`` and the hub write: ``data/<split>-NNNNN-of-NNNNN.parquet``, ``<config>/<split>-...``, and
    per-language names such as ``data/<split>-<lang>-NNNNN-of-NNNNN.parquet``, which ``datasets``' default patterns
    read as a split named ``<split>-<lang>``)."""
    found: dict[str, list[Path]] = {}
    for path in sorted(folder.rglob("*.parquet")):
        if any(part.startswith(".") for part in path.relative_to(folder).parts):
            continue
        split = next((match.group(1).lower() for name in (path.stem, path.parent.name)
                      if (match := _SPLIT_WORD.match(name)) and match.group(1).lower() in _SPLIT_NAMES), None)
        if split is None:
            raise FileNotFoundError(f"{path}: cannot tell which split this parquet file holds (its name or folder "
                                    f"should start with one of {sorted(_SPLIT_NAMES)}, as push_to_hub writes them)")
        found.setdefault(split, []).append(path)
    return found


def _integer_type(arrow_type: pa.DataType) -> pa.DataType:
    import pyarrow as pa

    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        return pa.list_(_integer_type(arrow_type.value_type))
    return pa.int64() if pa.types.is_floating(arrow_type) else arrow_type


def integral_table(table: pa.Table, path: str | Path) -> pa.Table:
    """``table`` with float-typed :data:`INTEGER_COLUMNS` cast to int64; a non-integral or non-finite value raises
    :class:`InvalidFileError` naming ``path``, the column and the first such row's ``generation_id``."""
    import pyarrow as pa

    for name in INTEGER_COLUMNS:
        if name not in table.column_names:
            continue
        array = list_array(table[name])
        owners = np.arange(len(array))
        while pa.types.is_list(array.type) or pa.types.is_large_list(array.type):
            owners = np.repeat(owners, list_lengths(array))
            array = array.flatten()
        if not pa.types.is_floating(array.type):
            continue
        values = array.to_numpy(zero_copy_only=False)
        valid = array.is_valid().to_numpy(zero_copy_only=False)
        bad = valid & ~(np.isfinite(values) & (values == np.floor(values)))
        if bad.any():
            first = int(np.flatnonzero(bad)[0])
            row = int(owners[first])
            ids = table[schema.GENERATION_ID] if schema.GENERATION_ID in table.column_names else None
            raise InvalidFileError(
                path, f"value {values[first]!r} is not an integer (row {row}; integer columns must not be "
                "stored as non-integral floats)",
                column=name, generation_id=None if ids is None else ids[row].as_py())
        table = table.set_column(table.schema.get_field_index(name), name,
                                 table[name].cast(_integer_type(table.schema.field(name).type)))
    return table


def _read_file(path: Path) -> pa.Table:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except (pa.ArrowException, OSError) as error:
        raise InvalidFileError(path, f"not a readable parquet file ({error})") from error
    return integral_table(table, path)


def _concat(tables: list[pa.Table]) -> pa.Table:
    import pyarrow as pa

    if len(tables) == 1:
        return tables[0]
    # Shards written by different tools may differ in integer width or metadata; unify like datasets does.
    return pa.concat_tables([t.replace_schema_metadata(None) for t in tables], promote_options="permissive")


def _schema_types() -> dict[str, pa.DataType]:
    """The schema's Arrow storage type of every MUCH column (``Array2D`` -> its ``list<list<...>>`` storage)."""
    import pyarrow as pa

    types = {}
    for field in schema.features().arrow_schema:
        kind = field.type
        types[field.name] = kind.storage_type if isinstance(kind, pa.ExtensionType) else kind
    return types


def _leaves(column: pa.ChunkedArray) -> pa.Array:
    import pyarrow as pa

    array = list_array(column)
    while pa.types.is_list(array.type) or pa.types.is_large_list(array.type):
        array = array.flatten()
    return array


def _to_schema_types(table: pa.Table, path: Path, targets: dict[str, pa.DataType]) -> tuple[pa.Table, bool]:
    """``table`` with its MUCH columns in the schema's storage types; True when a value had to be cast."""
    import pyarrow as pa
    import pyarrow.compute as pc

    cast_any = False
    for index, name in enumerate(table.column_names):
        target = targets.get(name)
        if target is None:
            continue
        column = table[name]
        if isinstance(column.type, pa.ExtensionType):
            column = pa.chunked_array([chunk.storage for chunk in column.chunks], type=column.type.storage_type)
        if column.type != target:
            try:
                converted = column.cast(target, safe=True)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as error:
                raise InvalidFileError(path, f"type {column.type} does not convert to the schema's {target} without "
                                       f"loss ({error}); rewrite the shard with the schema's types",
                                       column=name) from None
            before, after = _leaves(column), _leaves(converted)
            if pa.types.is_floating(after.type) and pc.sum(pc.is_inf(after)).as_py() != pc.sum(
                    pc.is_inf(before)).as_py():
                leaf = np.dtype(after.type.to_pandas_dtype()).name
                raise InvalidFileError(path, f"a value of type {column.type} overflows {leaf} (the schema's "
                                       f"{target}); rewrite the shard with the schema's types", column=name)
            column, cast_any = converted, True
        table = table.set_column(index, pa.field(name, column.type), column)
    return table, cast_any


def _merge_shards(shards: list[tuple[Path, pa.Table]], split: str) -> pa.Table:
    """One table of a split's shards, each defect named with its shard's path (see the module docstring)."""
    targets = _schema_types()
    union = set().union(*(table.column_names for _, table in shards))
    for path, table in shards:
        missing = [name for name in schema.HUB_COLUMNS if name not in table.column_names]
        if len(schema.missing_label_columns(table.column_names)) == len(schema.LABEL_COLUMNS):
            missing = [name for name in missing if name not in schema.LABEL_COLUMNS]  # withheld labels
        if missing:
            raise InvalidFileError(path, f"the shard lacks the MUCH column(s) {missing}", column=missing[0])
        lacking = sorted(name for name in union - set(table.column_names) if name in targets)
        if lacking:
            other = next(p for p, t in shards if lacking[0] in t.column_names)
            raise InvalidFileError(path, f"the shard lacks column(s) {lacking} that other shards of split {split!r} "
                                   f"have (e.g. {other}): every shard of a split needs the same columns (rewrite "
                                   "it, e.g. with `python -m builder export`)", column=lacking[0])
    if not any(table.num_rows for _, table in shards):
        raise InvalidFileError(shards[0][0], f"no row in any of the {len(shards)} shard(s) of split {split!r} "
                               "(empty files: a failed export or download?)")
    converted = [_to_schema_types(table, path, targets) for path, table in shards]
    first = shards[0][1].schema
    if not any(cast for _, cast in converted) and all(table.schema.equals(first) for _, table in shards):
        return _concat([table for _, table in shards])  # the usual case: shards written alike, metadata kept
    return _concat([table for table, _ in converted])


def read_parquet_folder(
    folder: str | Path, config: str, split: str | None, *, published: bool,
) -> datasets.Dataset | datasets.DatasetDict:
    """The splits of a local parquet folder as in-memory ``datasets`` objects (no cache).

    ``published`` -- the layout of :mod:`much_dataset.card` (``data/<lang>/<split>-*.parquet``, the config picks the
    language folders); otherwise ``datasets``' default split patterns (a snapshot of the hub repository) and, for a
    language config, the rows of that ``lang``.
    """
    import datasets
    import pyarrow.compute as pc

    folder = Path(folder)
    files = _split_files(folder, config, published)
    wanted = list(files) if split is None else [split]
    if split is not None and split not in files:
        raise FileNotFoundError(f"{folder}: no parquet file for split {split!r} of config {config!r} "
                                f"(splits found: {sorted(files)})")
    parts = {}
    for name in wanted:
        table = _merge_shards([(path, _read_file(path)) for path in files[name]], name)
        if not published and config != ALL_CONFIG and schema.LANG in table.column_names:
            table = table.filter(pc.equal(table[schema.LANG], config))
        parts[name] = datasets.Dataset(table, split=datasets.NamedSplit(name))
    return parts[split] if split is not None else datasets.DatasetDict(parts)
