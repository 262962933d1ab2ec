"""``MuchBuilder``: the typed MUCH dataset built from the export step's JSONL rows.

``datasets`` >= 4 no longer runs loading scripts, so the builder is an importable class::

    from much_dataset.builder import MuchBuilder

    builder = MuchBuilder(config_name="fr", data_dir="<out>", cache_dir="<cache>")
    builder.download_and_prepare()
    ds = builder.as_dataset()            # DatasetDict with "train" and "test"

Input contract (``builder/README.md``): ``data_dir`` holds ``rows/{train,test}.jsonl`` (or is that ``rows/``
folder itself), one row per line with exactly the hub columns of :mod:`much_dataset.schema` in the list-of-lists
layout, plus an optional ``stopword_mask``. Configs: ``all`` (default) and one per language, which keeps the rows of
that ``lang``. Every row is validated while building (:func:`much_dataset.validation.validate_table`): by default
the first bad row raises :class:`~much_dataset.validation.InvalidSampleError`; with ``on_error="drop"`` bad rows are
left out, logged, and listed in ``builder.problems``.

Why an ``ArrowBasedBuilder`` (whole Arrow tables) rather than the ``GeneratorBasedBuilder`` (one dict per row) the
issue names: the rows are validated as a whole table anyway (vectorised), and a per-row generator spends its time in
``json.loads`` and ``datasets``' per-example encoding -- measured on a full-size synthetic split (4,873 rows), the
generator version built in ~4.6 s, this one in ~1 s, about as fast as ``datasets``' own untyped ``json`` builder
(``benchmarks/bench_dataset.py`` prints both). A split
file is read as one table (MUCH's largest split is ~60 MB of JSON), which also lets one validation call catch
duplicates anywhere in the file.

The cache key is a hash of the JSONL files' content, so a re-export is rebuilt, not served
stale from the cache. The published form (parquet shards + card) is written by :mod:`much_dataset.card`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import datasets
import pyarrow as pa
import pyarrow.compute as pc
from datasets.table import table_cast

try:  # datasets >= 4.5 types the keys of _generate_tables; 4.0 (the lowest supported) takes any key
    from datasets.builder import Key as _TableKey
except ImportError:  # pragma: no cover -- exercised by scripts/tools/check_lower_bounds.sh

    def _TableKey(original_shard_id: int, item_or_batch_id: int) -> tuple[int, int]:
        return original_shard_id, item_or_batch_id

from much_dataset import schema
from much_dataset.card import ALL_CONFIG
from much_dataset.validation import InvalidSampleError, Problem, invalid_rows, rows_to_table, validate_table

__all__ = ["MuchConfig", "MuchBuilder", "ROWS_DIR", "read_rows_jsonl"]

logger = logging.getLogger(__name__)

#: Sub-folder of the export output holding ``{train,test,trash}.jsonl``.
ROWS_DIR = "rows"


@dataclass
class MuchConfig(datasets.BuilderConfig):
    """Config of :class:`MuchBuilder`.

    lang : the language kept (``None`` = every language, config ``all``).
    on_error : ``"raise"`` or ``"drop"`` (see :func:`much_dataset.validation.validate_table`).
    with_stopword_mask : whether the features include ``stopword_mask``; ``None`` = whether the first row of the
        first split file has it.
    splits : the splits to build; each needs ``<split>.jsonl``.
    """

    lang: str | None = None
    on_error: str = "raise"
    with_stopword_mask: bool | None = None
    splits: tuple[str, ...] = schema.SPLITS


def _rows_folder(data_dir: str | Path | None) -> Path:
    if data_dir is None:
        raise ValueError("MuchBuilder needs data_dir=<export folder holding rows/{train,test}.jsonl>")
    folder = Path(data_dir)
    if (folder / ROWS_DIR).is_dir():
        folder = folder / ROWS_DIR
    return folder


def _files_fingerprint(folder: Path, splits: tuple[str, ...]) -> str:
    import hashlib

    # The content, not size + mtime: a rewrite that keeps both (a copy preserving times, a coarse-mtime file
    # system) must not be served stale. Hashing ~60 MB costs ~0.1 s next to a ~1 s build.
    digest = hashlib.blake2b(digest_size=16)
    for split in splits:
        path = folder / f"{split}.jsonl"
        if path.is_file():
            digest.update(split.encode() + b"\0")
            with path.open("rb") as handle:
                digest.update(hashlib.file_digest(handle, "blake2b").digest())
    return digest.hexdigest()


class MuchBuilder(datasets.ArrowBasedBuilder):
    """Typed MUCH dataset from ``<data_dir>/rows/{train,test}.jsonl`` (see the module docstring)."""

    BUILDER_CONFIG_CLASS = MuchConfig
    BUILDER_CONFIGS = [MuchConfig(name=ALL_CONFIG, description="all languages")] + [
        MuchConfig(name=lang, lang=lang, description=f"{lang} rows only") for lang in schema.LANGUAGES
    ]
    DEFAULT_CONFIG_NAME = ALL_CONFIG

    def __init__(self, *args, **kwargs) -> None:
        data_dir = kwargs.get("data_dir")
        if data_dir is not None and kwargs.get("hash") is None:
            # Tie the cache to the content of the input files (a hash of their bytes), not only to the folder name.
            splits = tuple(kwargs.get("splits", schema.SPLITS))
            kwargs["hash"] = _files_fingerprint(_rows_folder(data_dir), splits)
        self.problems: list[Problem] = []
        super().__init__(*args, **kwargs)
        if self.config.on_error not in ("raise", "drop"):
            raise ValueError(f"on_error must be 'raise' or 'drop', got {self.config.on_error!r}")
        unknown = set(self.config.splits) - {*schema.SPLITS, "trash"}
        if unknown or "trash" in self.config.splits:
            # trash rows carry gpt-4o / gpt-4.1 instead of labels (docs/reference-behaviour.md#trash-dataset): a
            # different schema, not built here.
            raise ValueError(f"MuchBuilder builds the splits {schema.SPLITS}, got {tuple(self.config.splits)}")

    def _with_stopword_mask(self) -> bool:
        if self.config.with_stopword_mask is not None:
            return self.config.with_stopword_mask
        if self.config.data_dir is None:
            return True
        folder = _rows_folder(self.config.data_dir)
        for split in self.config.splits:
            path = folder / f"{split}.jsonl"
            if path.is_file():
                with path.open(encoding="utf-8") as handle:
                    for line in handle:
                        if line.strip():
                            return schema.STOPWORD_MASK in json.loads(line)
        return False

    def _info(self) -> datasets.DatasetInfo:
        return datasets.DatasetInfo(
            description="MUCH: Multilingual Claim Hallucination Benchmark (built from the export's JSONL rows)",
            features=schema.features(with_stopword_mask=self._with_stopword_mask()),
        )

    def _split_generators(self, dl_manager) -> list[datasets.SplitGenerator]:
        folder = _rows_folder(self.config.data_dir)
        generators = []
        for split in self.config.splits:
            path = folder / f"{split}.jsonl"
            if not path.is_file():
                raise FileNotFoundError(f"MuchBuilder: missing {path} (the export step writes rows/<split>.jsonl)")
            generators.append(datasets.SplitGenerator(name=split, gen_kwargs={"path": str(path)}))
        return generators

    def _generate_tables(self, path: str) -> Iterator[tuple[object, pa.Table]]:
        from much_dataset._local import integral_table

        table = integral_table(read_rows_jsonl(Path(path)), path)
        columns = list(self.info.features)
        if schema.STOPWORD_MASK in columns and schema.STOPWORD_MASK not in table.column_names:
            first = table[schema.GENERATION_ID][0].as_py() if len(table) else None
            raise InvalidSampleError(first, schema.STOPWORD_MASK, f"missing in {path} while the features include it")
        if len(table) == 0:
            return
        # One table per split file: duplicates anywhere in the file are caught by the same validation call.
        if self.config.on_error == "raise":
            validate_table(table)
        else:
            bad, problems = invalid_rows(table)
            for problem in problems:
                logger.warning("%s: dropped generation_id=%r (%s: %s)", path, problem.generation_id,
                               problem.field, problem.reason)
            self.problems.extend(problems)
            table = table.filter(~bad)
        if self.config.lang is not None:
            table = table.filter(pc.equal(table[schema.LANG], self.config.lang))
        yield _TableKey(0, 0), table_cast(table.select(columns), self.info.features.arrow_schema)


def _hub_arrow_schema(with_stopword_mask: bool) -> pa.Schema:
    """The list-of-lists JSONL layout, typed as JSON numbers parse (int64 ids, float64 probabilities)."""
    ints = pa.list_(pa.int64())
    fields = [(name, pa.string()) for name in schema.HUB_COLUMNS[:6]] + [
        (schema.OUTPUT_TOKENS, ints),
        (schema.LOGITS_TOKEN_IDS, pa.list_(ints)),
        (schema.LOGITS_VALUES, pa.list_(pa.list_(pa.float64()))),
        (schema.TOKEN_CHUNKS, pa.list_(ints)),
        (schema.LABELS, ints),
        (schema.HUMAN_LABELS_0, ints),
        (schema.HUMAN_LABELS_1, ints),
    ]
    if with_stopword_mask:
        fields.append((schema.STOPWORD_MASK, pa.list_(pa.bool_())))
    return pa.schema(fields)


def read_rows_jsonl(path: Path) -> pa.Table:
    """One ``rows/<split>.jsonl`` file as a ``pyarrow.Table`` (hub layout).

    Parsed by Arrow's C++ JSON reader with the hub schema (the fast path, ~10x faster than ``json.loads`` per line).
    When Arrow cannot parse the file -- invalid JSON, ``NaN`` (which Python's ``json`` writes but JSON lacks), a
    value of the wrong type -- it is re-read line by line with Python's ``json`` so that the error names the line,
    or the ``generation_id`` and field (:func:`much_dataset.validation.rows_to_table`), or the row reaches
    validation (a NaN probability is then reported like any other bad probability).
    """
    import pyarrow.json as pajson

    with path.open(encoding="utf-8") as handle:
        first = next((line for line in handle if line.strip()), None)
    if first is None:
        return _hub_arrow_schema(False).empty_table()
    try:
        with_mask = schema.STOPWORD_MASK in json.loads(first)
    except json.JSONDecodeError:
        with_mask = False  # the slow path below reports the bad line
    try:
        return pajson.read_json(
            path,
            parse_options=pajson.ParseOptions(explicit_schema=_hub_arrow_schema(with_mask),
                                              unexpected_field_behavior="ignore"),
        )
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        return rows_to_table(_read_python(path))


def _read_python(path: Path) -> list[dict]:
    from much_dataset.jsonl import read_jsonl

    return [row for _, row in read_jsonl(path, objects=True)]
