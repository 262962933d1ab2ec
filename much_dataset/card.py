"""The published folder layout of a MUCH dataset and its dataset card YAML.

A published MUCH folder (the export step's ``<out>/much/``, the embedded sample ``much_dataset/sample/``, or a hub
repository) looks like this::

    README.md                                   # dataset card: YAML header (configs + dataset_info) + body
    data/<lang>/<split>-00000-of-00001.parquet  # one shard per (language, split); lang in en/fr/es/de

Each language is stored once; the configs only differ by which shards they read (:func:`data_files`):

* ``all`` (the default config) reads ``data/*/<split>-*.parquet``,
* ``en``, ``fr``, ``es``, ``de`` read ``data/<lang>/<split>-*.parquet``.

(So ``all`` lists the rows language by language -- shards in path order -- not in export order.)

Every shard has the typed columns of :func:`much_dataset.schema.features` (``logits_*`` as ``Array2D((None, 24))``),
and the card declares the same features in ``dataset_info`` for every config, so plain
``datasets.load_dataset(folder, "fr")`` returns the typed French rows without any code of ours. A (language, split)
with no rows gets no shard (``datasets`` cannot read an empty parquet file): the card then leaves that split out of
that language's config, and a language with no rows at all has no config. The full MUCH has every
(language, split); this only matters for small samples.

The YAML also carries the hub's descriptive metadata (:func:`card_metadata`: ``license``, ``language``,
``pretty_name``, ``task_categories``, ``size_categories``, ``tags``) and real sizes (each split's ``num_bytes`` is the
Arrow size of its rows, ``download_size`` the parquet bytes, as ``datasets`` records them).

The YAML is produced by the ``datasets`` library's own serialisers (``MetadataConfigs``, ``DatasetInfosDict`` into a
``huggingface_hub.DatasetCardData``), so it is exactly what the hub and ``load_dataset`` expect.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from much_dataset import schema

if TYPE_CHECKING:  # pragma: no cover
    import datasets
    import pyarrow as pa

__all__ = [
    "ALL_CONFIG",
    "CONFIG_NAMES",
    "CARD_FILENAME",
    "DATA_DIR",
    "DEFAULT_CARD_BODY",
    "shard_path",
    "data_files",
    "card_yaml",
    "card_metadata",
    "render_card",
    "is_parquet_folder",
    "write_parquet_folder",
]

#: The config holding every language (the default config).
ALL_CONFIG = "all"
#: Every config of a MUCH folder: ``all`` first, then one per language.
CONFIG_NAMES: tuple[str, ...] = (ALL_CONFIG, *schema.LANGUAGES)
CARD_FILENAME = "README.md"
DATA_DIR = "data"

DEFAULT_CARD_BODY = """# MUCH: Multilingual Claim Hallucination Benchmark

One row per LLM generation, with the top-24 next-token probabilities of every generated token, the claims
(`token_chunks`) and one label per claim (-1 = hallucinated, +1 = correct). Configs: `all` and one per language
(`en`, `fr`, `es`, `de`); splits `train` and `test`.

```python
import datasets
ds = datasets.load_dataset("<this folder or repo>", "fr", split="test")
```
"""


def shard_path(lang: str, split: str) -> str:
    """Relative path (POSIX) of the single parquet shard of ``lang`` / ``split``."""
    return f"{DATA_DIR}/{lang}/{split}-00000-of-00001.parquet"


def data_files(config: str, splits: Sequence[str] = schema.SPLITS) -> list[dict[str, str]]:
    """The ``data_files`` entry of ``config`` in the card: one ``{"split", "path"}`` glob per split."""
    if config == ALL_CONFIG:
        lang_part = "*"
    elif config in schema.LANGUAGES:
        lang_part = config
    else:
        raise ValueError(f"unknown MUCH config {config!r}; expected one of {CONFIG_NAMES}")
    return [{"split": split, "path": f"{DATA_DIR}/{lang_part}/{split}-*.parquet"} for split in splits]


def _size_category(n_rows: int) -> str:
    """The hub's ``size_categories`` bucket of ``n_rows``."""
    for limit, name in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M")):
        if n_rows < limit:
            return name
    return "1M<n<10M"


def card_metadata(
    *,
    languages: Sequence[str] = schema.LANGUAGES,
    n_rows: int | None = None,
    license: str | None = None,  # the hub's key
    pretty_name: str = "MUCH: Multilingual Claim Hallucination Benchmark",
) -> dict:
    """The hub's descriptive card metadata (``license`` is left out when None: the builder names it per source)."""
    metadata: dict = {
        "pretty_name": pretty_name,
        "language": list(languages),
        "task_categories": ["token-classification", "text-classification"],
        "tags": ["hallucination-detection", "uncertainty-quantification", "claim-level", "multilingual"],
    }
    if n_rows is not None:
        metadata["size_categories"] = [_size_category(n_rows)]
    if license is not None:
        metadata["license"] = license
    return metadata


def card_yaml(
    *,
    split_sizes: Mapping[str, Mapping[str, int]] | None = None,
    splits: Sequence[str] = schema.SPLITS,
    with_stopword_mask: bool = True,
    features: datasets.Features | None = None,
    metadata: Mapping | None = None,
    split_bytes: Mapping[str, Mapping[str, int]] | None = None,
    download_bytes: Mapping[str, Mapping[str, int]] | None = None,
) -> str:
    """The YAML header (without the ``---`` fences) of a MUCH dataset card.

    ``split_sizes[lang][split]`` = number of rows; when given, each config's ``dataset_info.splits`` lists
    ``num_examples`` (``all`` sums the languages) and splits / configs without rows are left out (they have no
    shard). ``split_bytes[lang][split]`` (Arrow bytes) and ``download_bytes[lang][split]`` (parquet bytes) fill
    ``num_bytes``, ``dataset_size`` and ``download_size`` the same way. ``metadata`` (:func:`card_metadata`) goes
    first in the header. ``features`` defaults to :func:`much_dataset.schema.features`.
    """
    import datasets
    from datasets.info import DatasetInfo, DatasetInfosDict
    from datasets.utils.metadata import MetadataConfigs
    from huggingface_hub import DatasetCardData

    if features is None:
        features = schema.features(with_stopword_mask=with_stopword_mask)
    configs = MetadataConfigs()
    infos = DatasetInfosDict()
    for config in CONFIG_NAMES:
        langs = schema.LANGUAGES if config == ALL_CONFIG else (config,)
        counts = {split: sum(int(split_sizes.get(lang, {}).get(split, 0)) for lang in langs) for split in splits}
        present = list(splits) if split_sizes is None else [split for split in splits if counts[split] > 0]
        if not present:
            continue
        entry: dict = {"data_files": data_files(config, present)}
        if config == ALL_CONFIG:
            entry["default"] = True
        configs[config] = entry
        split_dict = None
        if split_sizes is not None:
            split_dict = datasets.SplitDict()
            for split in present:
                split_dict.add(datasets.SplitInfo(name=split, num_examples=counts[split],
                                                  num_bytes=_total(split_bytes, langs, split)))
        infos[config] = DatasetInfo(
            features=features, splits=split_dict, config_name=config,
            dataset_size=sum(_total(split_bytes, langs, split) for split in present) if split_bytes else None,
            download_size=sum(_total(download_bytes, langs, split) for split in present) if download_bytes else None,
        )
    card_data = DatasetCardData(**dict(metadata or {}))
    configs.to_dataset_card_data(card_data)
    infos.to_dataset_card_data(card_data)
    # MetadataConfigs sorts configs alphabetically; keep "all" first, then the schema's language order.
    order = {name: index for index, name in enumerate(CONFIG_NAMES)}
    card_data["configs"] = sorted(card_data["configs"], key=lambda c: order[c["config_name"]])
    card_data["dataset_info"] = sorted(card_data["dataset_info"], key=lambda c: order[c["config_name"]])
    return card_data.to_yaml()


def _total(by_lang: Mapping[str, Mapping[str, int]] | None, langs: Sequence[str], split: str) -> int:
    return sum(int((by_lang or {}).get(lang, {}).get(split, 0)) for lang in langs)


def render_card(yaml_header: str, body: str = DEFAULT_CARD_BODY) -> str:
    """A complete ``README.md``: ``---`` fenced YAML header followed by the markdown body."""
    return f"---\n{yaml_header.rstrip()}\n---\n\n{body.lstrip()}"


def is_parquet_folder(folder: str | Path) -> bool:
    """Whether ``folder`` has the published layout (a card and a ``data/`` folder of parquet shards)."""
    folder = Path(folder)
    return (folder / CARD_FILENAME).is_file() and any((folder / DATA_DIR).glob("*/*.parquet"))


def _typed_table(rows: Iterable[Mapping] | pa.Table, features: datasets.Features) -> pa.Table:
    import pyarrow as pa
    from datasets.table import table_cast

    table = rows if isinstance(rows, pa.Table) else pa.Table.from_pylist(list(rows))
    if len(table) == 0:
        return features.arrow_schema.empty_table()
    missing = [name for name in features if name not in table.column_names]
    if missing:
        raise ValueError(f"rows lack the column(s) {missing} required by the MUCH features")
    return table_cast(table.select(list(features)), features.arrow_schema)


def write_parquet_folder(
    rows_by_split: Mapping[str, Iterable[Mapping] | pa.Table],
    folder: str | Path,
    *,
    card_body: str = DEFAULT_CARD_BODY,
    validate: bool = True,
    with_stopword_mask: bool | None = None,
    metadata: Mapping | None = None,
) -> dict[str, dict[str, int]]:
    """Write MUCH rows as a published folder (module docstring layout): parquet shards + ``README.md``.

    ``rows_by_split[split]`` is a list of rows in the hub's list-of-lists layout (or a ``pyarrow.Table``). Rows are
    validated first (:func:`much_dataset.validation.validate_table`, raising :class:`InvalidSampleError` on the first
    bad row) unless ``validate=False``. ``with_stopword_mask`` defaults to whether the first non-empty split carries
    the column. ``metadata`` (:func:`card_metadata`; default: the languages with rows and the size category,
    no license) goes into the card's YAML. Rows without any label column (a split whose labels are withheld) are
    written with :func:`much_dataset.schema.features` ``(with_labels=False)``. Returns ``{lang: {split: n_rows}}``.
    """
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from much_dataset.validation import validate_table

    unknown = set(rows_by_split) - set(schema.SPLITS)
    if unknown:
        raise ValueError(f"unknown split(s) {sorted(unknown)}; a published MUCH folder has {schema.SPLITS}")
    tables = {
        split: rows if isinstance(rows, pa.Table) else pa.Table.from_pylist(list(rows))
        for split, rows in rows_by_split.items()
    }
    if with_stopword_mask is None:
        with_stopword_mask = any(
            schema.STOPWORD_MASK in table.column_names for table in tables.values() if len(table)
        )
    labelled = {not schema.missing_label_columns(table.column_names) for table in tables.values() if len(table)}
    if len(labelled) > 1:
        raise ValueError("some splits have label columns and others not: a folder is either labelled or a split "
                         f"whose labels are withheld (none of {list(schema.LABEL_COLUMNS)})")
    features = schema.features(with_stopword_mask=with_stopword_mask, with_labels=labelled != {False})
    folder = Path(folder)
    splits = [split for split in schema.SPLITS if split in tables]
    sizes: dict[str, dict[str, int]] = {lang: {} for lang in schema.LANGUAGES}
    arrow_bytes: dict[str, dict[str, int]] = {lang: {} for lang in schema.LANGUAGES}
    parquet_bytes: dict[str, dict[str, int]] = {lang: {} for lang in schema.LANGUAGES}
    for split in splits:
        table = tables[split]
        if validate and len(table):
            validate_table(table, on_error="raise")
        typed = _typed_table(table, features)
        for lang in schema.LANGUAGES:
            part = typed.filter(pc.equal(typed[schema.LANG], lang)) if len(typed) else typed
            sizes[lang][split] = len(part)
            path = folder / shard_path(lang, split)
            if len(part):
                path.parent.mkdir(parents=True, exist_ok=True)
                # zstd + byte-stream-split of the float32 probabilities: about 25% smaller than the default
                # snappy + dictionary encoding on real top-24 data, and still readable by any parquet reader.
                pq.write_table(part, path, compression="zstd", use_dictionary=False,
                               use_byte_stream_split=[f"{schema.LOGITS_VALUES}.list.element.list.element"])
                arrow_bytes[lang][split], parquet_bytes[lang][split] = part.nbytes, path.stat().st_size
            else:
                path.unlink(missing_ok=True)  # a stale shard from an earlier export must not be served
        written = sum(sizes[lang][split] for lang in schema.LANGUAGES)
        if written != len(typed):
            raise ValueError(f"{len(typed) - written} {split} row(s) have a lang outside {schema.LANGUAGES}")
    if metadata is None:
        metadata = card_metadata(
            languages=[lang for lang in schema.LANGUAGES if any(sizes[lang].values())],
            n_rows=sum(sum(v.values()) for v in sizes.values()))
    header = card_yaml(split_sizes=sizes, splits=splits, features=features, metadata=metadata,
                       split_bytes=arrow_bytes, download_bytes=parquet_bytes)
    (folder / CARD_FILENAME).write_text(render_card(header, card_body), encoding="utf-8")
    return sizes
