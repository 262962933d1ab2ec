"""``much_dataset.load``: the typed MUCH dataset from the hub, a local folder, or the embedded sample.

Sources:

* ``"sample"`` -- the embedded sample ``much_dataset/sample/``, a published folder (layout in
  :mod:`much_dataset.card`: ``README.md`` + ``data/<lang>/<split>-00000-of-00001.parquet``).
* a local folder -- a published folder (same layout; read into memory with pyarrow, never from a cache that a
  rewrite in place could leave stale, see :mod:`much_dataset._local`), the
  export step's ``rows/`` JSONL folder (``<folder>/rows/{train,test}.jsonl`` or the ``rows`` folder itself, built
  with :class:`much_dataset.builder.MuchBuilder`), or any other folder of parquet files, such as a downloaded
  snapshot of the hub repository (read like a hub id, below).
* anything else is a hub repository id (default ``"orailix/MUCH"``), read with ``datasets.load_dataset``. When the
  repository has no config named ``config`` (the published orailix/MUCH has a single default config), its default
  config is loaded and, for a language config, filtered on ``lang``. An unreachable hub fails within seconds with
  :class:`much_dataset._hub.HubUnreachableError` (a ``ConnectionError``) saying what to do, unless
  ``HF_HUB_OFFLINE=1`` asks for the local cache.

A split whose labels are withheld (``python -m builder export --withhold-labels``) loads the same way, without the
label columns (:data:`much_dataset.schema.LABEL_COLUMNS`): every column a detector needs is there.

Whatever the source, the result has the typed features of :func:`much_dataset.schema.features` (the hub's
list-of-lists ``logits_*`` are cast to ``Array2D((None, 24))``, ids to int32) and every row is validated
(:mod:`much_dataset.validation`).

``stopword_mask``: the hub rows lack it. Rows of the eight MUCH generation configs get it from the packaged
vocabulary tables (:mod:`much_dataset.vocab_stopwords`, no tokenizer and no download needed). Other rows need the
generating models' tokenizers (``tokenizers={generation_config id or model name: tokenizer}`` or
``tokenizers=function(generation_config) -> tokenizer | None``), decoding each distinct token id once; a given
tokenizer of a MUCH model is used and cross-checked against its table. Rows with neither get ``None`` and a warning
names the models; if no row can be filled the column stays absent.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from much_dataset import schema
from much_dataset.card import CONFIG_NAMES, is_parquet_folder
from much_dataset.params import OneOf, check_param
from much_dataset.validation import Problem, check_columns, invalid_rows, validate_table

if TYPE_CHECKING:  # pragma: no cover
    import datasets

__all__ = ["SAMPLE", "SAMPLE_DIR", "LoadResult", "load", "load_with_problems", "to_numpy", "fill_stopword_mask",
           "missing_tokenizers_message"]

logger = logging.getLogger(__name__)

#: The ``source`` naming the embedded sample.
SAMPLE = "sample"
#: Where the embedded sample lives (written by the builder's sample step, layout of :mod:`much_dataset.card`).
SAMPLE_DIR = Path(__file__).resolve().parent / "sample"

TokenizerLookup = Callable[[str], Any]
ON_ERROR = OneOf(("raise", "drop"))


def load(
    source: str | Path = schema.HUB_REPO_ID,
    config: str = "all",
    split: str | None = None,
    *,
    tokenizers: Mapping[str, Any] | TokenizerLookup | None = None,
    on_error: str = "raise",
    cache_dir: str | Path | None = None,
    revision: str | None = None,
) -> datasets.Dataset | datasets.DatasetDict:
    """Load MUCH as a typed ``datasets.Dataset`` (``split`` given) or ``DatasetDict`` (``split=None``).

    Parameters
    ----------
    source : hub id, local folder, or ``"sample"`` (see the module docstring).
    config : ``"all"`` or a language (``"en"``, ``"fr"``, ``"es"``, ``"de"``).
    split : ``"train"``, ``"test"`` or None for both.
    tokenizers : the generating models' tokenizers, to fill a missing ``stopword_mask``: a mapping
        ``{generation_config id or model name: tokenizer}`` or a function ``generation_config -> tokenizer | None``.
    on_error : ``"raise"`` -- a bad row raises :class:`~much_dataset.validation.InvalidSampleError` naming its
        ``generation_id`` and field; ``"drop"`` -- bad rows are dropped and a warning says how many
        (:func:`load_with_problems` returns each :class:`~much_dataset.validation.Problem` instead).
    cache_dir : ``datasets`` cache folder (default: the library's); used for hub ids and ``rows/`` folders (keyed on
        the files' content), not for local parquet folders (read without a cache).
    revision : hub revision (hub ids only).

    Examples
    --------
    The embedded sample (Mu-SHROOM texts re-scored by a small model, shipped with the package; no network):

    >>> import much_dataset
    >>> test = much_dataset.load("sample", split="test")
    >>> len(test), sorted(set(test["lang"]))
    (606, ['de', 'en', 'es', 'fr'])
    >>> row = test[0]
    >>> len(row["token_chunks"]) == len(row["labels"])    # one label per claim, EOS claim included
    True
    >>> len(row["logits_values"]) == len(row["output_tokens"]), len(row["logits_values"][0])
    (True, 24)
    >>> much_dataset.load("sample", "fr", split="test").num_rows < len(test)
    True
    >>> sorted(much_dataset.load("sample"))                # split=None: a DatasetDict
    ['test']
    """
    if config not in CONFIG_NAMES:
        raise ValueError(f"config must be one of {CONFIG_NAMES}, got {config!r}")
    if split is not None and split not in schema.SPLITS:
        raise ValueError(f"split must be one of {schema.SPLITS} or None, got {split!r}")
    check_param("on_error", on_error, ON_ERROR, owner="much_dataset.load")
    loaded, problems = _load(source, config, split, tokenizers, on_error, cache_dir, revision)
    if problems:
        shown = "; ".join(f"{p.generation_id} [{p.field}] {p.reason}" for p in problems[:5])
        warnings.warn(
            f"much_dataset.load dropped invalid rows ({len(problems)} problem(s)): {shown}"
            + (" ..." if len(problems) > 5 else ""),
            stacklevel=2,
        )
    return loaded


@dataclass(frozen=True)
class LoadResult:
    """What :func:`load_with_problems` returns: the valid rows and, for each dropped row, its problem."""

    dataset: datasets.Dataset | datasets.DatasetDict
    problems: tuple[Problem, ...]


def load_with_problems(
    source: str | Path = schema.HUB_REPO_ID,
    config: str = "all",
    split: str | None = None,
    *,
    tokenizers: Mapping[str, Any] | TokenizerLookup | None = None,
    cache_dir: str | Path | None = None,
    revision: str | None = None,
) -> LoadResult:
    """:func:`load` that drops invalid rows and RETURNS their :class:`~much_dataset.validation.Problem`\\ s (each
    names the ``generation_id``, the field and the reason) instead of raising on the first or warning."""
    loaded, problems = _load(source, config, split, tokenizers, "drop", cache_dir, revision)
    return LoadResult(loaded, tuple(problems))


def _load(source, config: str, split: str | None, tokenizers, on_error: str, cache_dir, revision):
    """The loaded (validated, typed, stopword-masked) data and the problems of the rows dropped."""
    problems: list[Problem] = []
    cache = None if cache_dir is None else str(cache_dir)

    if str(source) == SAMPLE:
        if not is_parquet_folder(SAMPLE_DIR):
            raise FileNotFoundError(
                f"the embedded MUCH sample is missing: expected {SAMPLE_DIR}/README.md and "
                f"{SAMPLE_DIR}/data/<lang>/<split>-*.parquet (written by the builder's sample step). "
                "Load a hub id or a local folder instead."
            )
        loaded = _load_dataset(str(SAMPLE_DIR), config, split, cache)
    elif Path(source).exists():
        folder = Path(source)
        # Local parquet is read without datasets' cache (much_dataset._local): a folder rewritten in place
        # (builder export) must never be served from a previous build.
        from much_dataset._local import read_parquet_folder

        if is_parquet_folder(folder):
            loaded = read_parquet_folder(folder, config, split, published=True)
        elif (folder / "rows" / "train.jsonl").is_file() or (folder / "train.jsonl").is_file():
            loaded = _build_rows(folder, config, split, cache, on_error, problems)
        elif folder.is_dir() and any(folder.rglob("*.parquet")):
            # A local copy of a hub repository (e.g. a snapshot of orailix/MUCH): datasets' split patterns.
            loaded = read_parquet_folder(folder, config, split, published=False)
        else:
            raise FileNotFoundError(
                f"{folder} is neither a published MUCH folder (README.md + data/<lang>/<split>-*.parquet), an "
                "export folder (rows/train.jsonl and rows/test.jsonl) nor a copy of a hub repository (parquet files)"
            )
    else:
        loaded = _load_hub(str(source), config, split, cache, revision)

    def finish(dataset: datasets.Dataset) -> datasets.Dataset:
        # Validate before casting: a malformed row must be reported by generation_id, not as an Arrow cast error.
        dataset = _validated(dataset, on_error, problems)
        dataset = _typed(dataset)
        if schema.STOPWORD_MASK not in dataset.column_names:
            if callable(tokenizers) and not isinstance(tokenizers, Mapping):
                dataset = fill_stopword_mask(dataset, tokenizer_for=tokenizers)
            else:
                dataset = fill_stopword_mask(dataset, tokenizers=tokenizers)
        return dataset

    import datasets

    if isinstance(loaded, datasets.DatasetDict):
        loaded = datasets.DatasetDict({name: finish(part) for name, part in loaded.items()})
    else:
        loaded = finish(loaded)
    return loaded, problems


# ---------------------------------------------------------------------------------------------------------------
# Sources


def _load_dataset(path: str, config: str, split: str | None, cache_dir: str | None, **kwargs):
    import datasets

    return datasets.load_dataset(path, name=config, split=split, cache_dir=cache_dir, **kwargs)


def _build_rows(folder: Path, config, split, cache_dir, on_error, problems: list[Problem]):
    from datasets.exceptions import DatasetGenerationError

    from much_dataset.builder import MuchBuilder
    from much_dataset.validation import InvalidSampleError

    builder = MuchBuilder(config_name=config, data_dir=str(folder), cache_dir=cache_dir, on_error=on_error)
    try:
        builder.download_and_prepare()
    except DatasetGenerationError as error:
        # datasets wraps whatever the generator raised; surface our own error (it names the row and the field).
        cause = error.__cause__
        if isinstance(cause, (InvalidSampleError, ValueError)):
            raise cause.with_traceback(cause.__traceback__) from None
        raise
    problems.extend(builder.problems)
    return builder.as_dataset(split=split)


def _load_hub(repo_id: str, config: str, split, cache_dir, revision):
    from much_dataset._hub import require_hub

    # One short probe, one clear error (the same as the CLI's), instead of datasets' ~20 s of retries.
    require_hub(f"much_dataset.load({repo_id!r})")
    try:
        return _load_dataset(repo_id, config, split, cache_dir, revision=revision)
    except ValueError as error:
        # The published orailix/MUCH has one default config: load it and select the language ourselves.
        if "not found" not in str(error) or config not in str(error):
            raise
        logger.info("%s has no config %r; loading its default config and filtering on lang", repo_id, config)
    loaded = _load_dataset(repo_id, None, split, cache_dir, revision=revision)
    if config in schema.LANGUAGES:
        loaded = loaded.filter(lambda langs: [lang == config for lang in langs], input_columns=schema.LANG,
                               batched=True)
    return loaded


# ---------------------------------------------------------------------------------------------------------------
# Post-processing


def _typed(dataset: datasets.Dataset) -> datasets.Dataset:
    """Cast the hub's list-of-lists layout to the schema's typed features (extra columns are kept as they are)."""
    import datasets

    check_columns(dataset.column_names, what="the loaded dataset")
    target = schema.features(with_stopword_mask=schema.STOPWORD_MASK in dataset.column_names,
                             with_labels=not schema.missing_label_columns(dataset.column_names))
    features = datasets.Features({name: target.get(name, dataset.features[name]) for name in dataset.column_names})
    if dataset.features == features:
        return dataset
    return dataset.cast(features)


def _arrow(dataset: datasets.Dataset):
    # The arrow formatter applies a pending indices mapping (after select/filter); without one it is zero-copy.
    return dataset.with_format("arrow")[:]


def _validated(dataset: datasets.Dataset, on_error: str, problems: list[Problem]) -> datasets.Dataset:
    check_columns(dataset.column_names, what="the loaded dataset")
    table = _arrow(dataset)
    if on_error == "raise":
        validate_table(table)
        return dataset
    bad, found = invalid_rows(table)
    if not found:
        return dataset
    problems.extend(found)
    return dataset.select(np.flatnonzero(~bad))


def missing_tokenizers_message(configs: list[str]) -> str:
    """Which tokenizers are needed to compute ``stopword_mask`` for rows of these ``generation_config`` ids."""
    needed = sorted({schema.MUCH_CONFIGS.get(config, (config, None))[0] for config in configs})
    return (
        f"stopword_mask cannot be computed for generation_config(s) {sorted(configs)}: no tokenizer given for "
        f"model(s) {needed}. Pass much_dataset.load(..., tokenizers={{config id or model name: tokenizer}}) or "
        "tokenizer_for=callable."
    )


def _lookup(config: str, tokenizers: Mapping[str, Any] | None, tokenizer_for: TokenizerLookup | None):
    if tokenizer_for is not None:
        found = tokenizer_for(config)
        if found is not None:
            return found
    if tokenizers:
        if config in tokenizers:
            return tokenizers[config]
        model = schema.MUCH_CONFIGS.get(config, (None,))[0]
        if model is not None and model in tokenizers:
            return tokenizers[model]
    return None


def fill_stopword_mask(
    dataset: datasets.Dataset,
    *,
    tokenizers: Mapping[str, Any] | None = None,
    tokenizer_for: TokenizerLookup | None = None,
) -> datasets.Dataset:
    """Add ``stopword_mask`` (per output token: decoded alone, is it an evaluation stopword?,
    docs/reference-behaviour.md#stopword-rule).

    The tokenizer of each row's ``generation_config`` comes from ``tokenizer_for(config)`` first, then
    ``tokenizers[config]``, then ``tokenizers[model name]`` (:data:`much_dataset.schema.MUCH_CONFIGS`). Rows of the
    eight MUCH configs need none: without a tokenizer they use the packaged vocabulary table
    (:mod:`much_dataset.vocab_stopwords`); with one, it is used and cross-checked against the table (a warning
    names any disagreement). Other rows with no tokenizer get ``None`` and a warning names the models; if no row can
    be filled the dataset is returned unchanged (with that warning). Each distinct id of a config is decoded once.
    """
    import datasets
    import pyarrow as pa

    from much_dataset._arrow import flat_numpy, list_array, list_lengths
    from much_dataset.vocab_stopwords import has_table, stopword_masks

    table = _arrow(dataset)
    configs = np.asarray(table[schema.GENERATION_CONFIG].to_pylist(), dtype=object)
    distinct = sorted(set(configs.tolist()))
    chosen = {config: _lookup(config, tokenizers, tokenizer_for) for config in distinct}
    missing = [config for config, tokenizer in chosen.items() if tokenizer is None and not has_table(config)]
    if missing:
        warnings.warn(missing_tokenizers_message(missing), stacklevel=3)
    if len(missing) == len(distinct):
        return dataset

    tokens_array = list_array(table[schema.OUTPUT_TOKENS])
    lengths = list_lengths(tokens_array)
    tokens = flat_numpy(tokens_array.flatten(), np.int64)
    token_config = np.repeat(configs, lengths)
    mask = stopword_masks(tokens, token_config, chosen, lengths=lengths,
                          generation_ids=table[schema.GENERATION_ID].to_pylist())
    offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int32)
    row_missing = np.isin(configs, missing) if missing else None
    column = pa.ListArray.from_arrays(
        pa.array(offsets), pa.array(mask),
        mask=None if row_missing is None else pa.array(row_missing.astype(bool)),
    )
    feature = datasets.List(datasets.Value("bool"))
    return dataset.add_column(schema.STOPWORD_MASK, column.to_pylist(), feature=feature)


def to_numpy(dataset: datasets.Dataset, columns: list[str] | None = None) -> dict[str, Any]:
    """Every row of ``dataset`` as numpy arrays, built from the flat Arrow buffers in one pass (no per-row decode).

    Returns ``{column: value}``: a string / scalar column gives one numpy array of length n_rows; a list column a
    list (one entry per row) of 1-D arrays; ``logits_token_ids`` / ``logits_values`` (``Array2D``) a list of
    ``(n_tokens_i, 24)`` arrays; ``token_chunks`` a list (per row) of lists (per chunk) of index arrays. Arrays keep
    the stored dtypes (int32 ids, float32 probabilities, int8 labels, bool mask) and are views into one contiguous
    array per column; a null list (e.g. a ``stopword_mask`` that could not be computed) gives ``None``.
    Equivalent to ``dataset.with_format("numpy", dtype=None)[:]`` -- the test suite checks it -- but faster.
    """
    import pyarrow as pa

    from much_dataset._arrow import list_array, list_lengths

    table = _arrow(dataset)
    names = list(table.column_names if columns is None else columns)
    result: dict[str, Any] = {}
    for name in names:
        array = list_array(table[name])
        if not (pa.types.is_list(array.type) or pa.types.is_large_list(array.type)):
            result[name] = array.to_numpy(zero_copy_only=False)
            continue
        nulls = array.is_null().to_numpy(zero_copy_only=False)
        lengths = list_lengths(array)
        inner = array.flatten()
        if pa.types.is_list(inner.type) or pa.types.is_large_list(inner.type):
            inner_lengths = list_lengths(inner)
            values = inner.flatten().to_numpy(zero_copy_only=False)
            width = int(inner_lengths[0]) if len(inner_lengths) else 0
            if len(inner_lengths) and width > 0 and np.all(inner_lengths == width):
                rows = np.split(values.reshape(-1, width), np.cumsum(lengths)[:-1])
            else:
                pieces = np.split(values, np.cumsum(inner_lengths)[:-1]) if len(inner_lengths) else []
                bounds = np.concatenate(([0], np.cumsum(lengths))).tolist()
                rows = [pieces[start:stop] for start, stop in zip(bounds[:-1], bounds[1:], strict=True)]
        else:
            values = inner.to_numpy(zero_copy_only=False)
            rows = np.split(values, np.cumsum(lengths)[:-1]) if len(lengths) else []
        if nulls.any():
            rows = [None if null else row for row, null in zip(rows, nulls.tolist(), strict=True)]
        result[name] = list(rows)
    return result
