"""Packaged vocabulary stopword tables: the evaluation stopword rule (docs/reference-behaviour.md#stopword-rule) for
MUCH with no tokenizer.

The rule -- token id decoded **alone**, lowercased, stripped, in the evaluation stopword set -- depends only on
(tokenizer, id). For each MUCH tokenizer (:data:`much_dataset.offline_tokenizers.TOKENIZER_SOURCES`) the package
ships one bit per vocabulary id, built by ``scripts/data/build_stopword_tables.py`` from the real tokenizer files, in
``much_dataset/data/stopword_tables/<name>.npz``:

* ``bits`` -- ``numpy.packbits`` of the per-id flags (big bit order), ``ceil(vocab_size / 8)`` bytes;
* ``header`` -- a JSON string: ``format``, ``name``, ``models``, ``origin`` and ``tokenizer_file`` (where the file
  came from), ``sha256`` and ``bytes`` of that file, ``vocab_size`` (``len(tokenizer)``), ``n_stopwords``,
  ``stopwords_sha256`` (digest of the stopword set the bits were computed with, see :func:`stopword_set_digest`).

A table is refused at load time when its stopword-set digest is not the current set's (the bits would be stale).

:func:`mask_for` maps a ``generation_config`` id (or model name) and token ids to the mask;
:func:`stopword_masks` is what :func:`much_dataset.loader.fill_stopword_mask` calls for a whole dataset.
"""

from __future__ import annotations

import functools
import hashlib
import json
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from much_dataset import schema
from much_dataset.offline_tokenizers import MODEL_TABLES, TOKENIZER_SOURCES

__all__ = [
    "TABLE_DIR",
    "FORMAT_VERSION",
    "StopwordTable",
    "StaleTableError",
    "rule_flags",
    "stopword_set_digest",
    "table_name",
    "has_table",
    "load_table",
    "mask_for",
    "tokenizer_disagreements",
    "stopword_masks",
    "write_table",
]

#: Where the packaged tables live.
TABLE_DIR = Path(__file__).resolve().parent / "data" / "stopword_tables"
#: Version of the ``.npz`` layout described in the module docstring.
FORMAT_VERSION = 1


class StaleTableError(ValueError):
    """A packaged table was built with another stopword set, or is malformed: rebuild it."""


def _rule():
    # The single place that imports the stopword rule (its module is moving; repoint this line only).
    from much_dataset.stopwords import EVALUATION_STOPWORDS, stopword_mask

    return stopword_mask, EVALUATION_STOPWORDS


def rule_flags(token_ids: Any, tokenizer: Any) -> np.ndarray:
    """The stopword rule applied with ``tokenizer`` (one ``decode([id])`` per distinct id). Bool, same length."""
    stopword_mask, _ = _rule()
    return np.asarray(stopword_mask(token_ids, tokenizer), dtype=bool)


def stopword_set_digest() -> str:
    """sha256 of the evaluation stopword set (sorted, UTF-8, one entry per line), identifying the rule's set."""
    _, vocabulary = _rule()
    return hashlib.sha256("\n".join(sorted(vocabulary)).encode("utf-8")).hexdigest()


@dataclass(frozen=True, eq=False)
class StopwordTable:
    """One tokenizer's stopword bit per vocabulary id. ``flags``: read-only bool array of shape (vocab_size,)."""

    name: str
    flags: np.ndarray
    header: Mapping[str, Any]

    @property
    def vocab_size(self) -> int:
        return int(self.flags.shape[0])

    @property
    def models(self) -> tuple[str, ...]:
        return tuple(self.header["models"])

    def mask(self, token_ids: Any) -> np.ndarray:
        """Bool array, one entry per id of ``token_ids`` (any shape; raveled). Raises ValueError on an id outside
        ``[0, vocab_size)`` (naming its position) or on non-integer ids."""
        ids = np.asarray(token_ids)
        if ids.size == 0:
            return np.zeros(0, dtype=bool)
        if not np.issubdtype(ids.dtype, np.integer):
            raise TypeError(f"token ids must be integers, got dtype {ids.dtype}")
        ids = ids.ravel()
        bad = (ids < 0) | (ids >= self.vocab_size)
        if bad.any():
            position = int(np.flatnonzero(bad)[0])
            raise ValueError(
                f"token id {int(ids[position])} at position {position} is outside the {self.name!r} vocabulary "
                f"(size {self.vocab_size}, models {list(self.models)})"
            )
        return self.flags[ids]


def table_name(config_or_model: str) -> str | None:
    """Table name for a MUCH ``generation_config`` id or model name; None for anything else."""
    model = schema.MUCH_CONFIGS.get(config_or_model, (config_or_model,))[0]
    return MODEL_TABLES.get(model)


def has_table(config_or_model: str) -> bool:
    """Whether a packaged table covers this ``generation_config`` id or model name."""
    return table_name(config_or_model) is not None


@functools.lru_cache(maxsize=len(TOKENIZER_SOURCES))
def load_table(name: str) -> StopwordTable:
    """The packaged table ``name`` (``"llama3"``, ``"tekken"``, ``"gemma3"``). Cached; raises StaleTableError."""
    if name not in TOKENIZER_SOURCES:
        raise ValueError(f"unknown stopword table {name!r}; expected one of {sorted(TOKENIZER_SOURCES)}")
    path = TABLE_DIR / f"{name}.npz"
    if not path.is_file():
        raise FileNotFoundError(f"the packaged stopword table {path} is missing "
                                "(scripts/data/build_stopword_tables.py)")
    with np.load(path, allow_pickle=False) as archive:
        header = json.loads(str(archive["header"]))
        packed = archive["bits"]
    size = int(header.get("vocab_size", -1))
    if header.get("format") != FORMAT_VERSION or header.get("name") != name or packed.dtype != np.uint8 \
            or packed.shape != ((size + 7) // 8,):
        raise StaleTableError(f"{path} is not a format-{FORMAT_VERSION} table of {name!r} "
                              f"(header {header!r}, bits {packed.dtype}{packed.shape})")
    if header["stopwords_sha256"] != stopword_set_digest():
        raise StaleTableError(f"{path} was built with another stopword set than the current one: rebuild it with "
                              "`python scripts/data/build_stopword_tables.py`")
    flags = np.unpackbits(packed, count=size).astype(bool)
    if int(flags.sum()) != header["n_stopwords"]:
        raise StaleTableError(f"{path}: {int(flags.sum())} bits set, header says {header['n_stopwords']}")
    flags.flags.writeable = False
    return StopwordTable(name=name, flags=flags, header=header)


def _table_for(config_or_model: str) -> StopwordTable:
    name = table_name(config_or_model)
    if name is None:
        raise ValueError(f"no packaged stopword table for {config_or_model!r}: tables exist for the MUCH "
                         f"generation configs {sorted(schema.MUCH_CONFIGS)} and models {sorted(MODEL_TABLES)}")
    return load_table(name)


def mask_for(config_or_model: str, token_ids: Any) -> np.ndarray:
    """Per token of ``token_ids``: whether it decoded alone is an evaluation stopword
    (docs/reference-behaviour.md#stopword-rule), from the table.

    ``config_or_model`` is a MUCH ``generation_config`` id (:data:`much_dataset.schema.MUCH_CONFIGS`) or model name.
    Returns a bool array of ``token_ids``' size. Raises ValueError for another config or an out-of-vocabulary id.
    """
    return _table_for(config_or_model).mask(token_ids)


def tokenizer_disagreements(config_or_model: str, tokenizer: Any, token_ids: Any) -> np.ndarray:
    """Distinct ids of ``token_ids`` where the rule applied with ``tokenizer`` differs from the packaged table.

    Ids outside the table's vocabulary count as disagreements. Returns a sorted int64 array (empty = agreement).
    """
    table = _table_for(config_or_model)
    ids = np.unique(np.asarray(token_ids, dtype=np.int64).ravel())
    inside = (ids >= 0) & (ids < table.vocab_size)
    known = ids[inside]
    differ = known[rule_flags(known, tokenizer) != table.flags[known]]
    return np.union1d(differ, ids[~inside])


def _disagreement_message(config: str, table: StopwordTable, tokenizer: Any, differ: np.ndarray, n_ids: int) -> str:
    examples = []
    for token_id in differ[:3].tolist():
        text = tokenizer.decode([token_id])
        in_table = "outside the table" if token_id >= table.vocab_size else (
            "stopword" if table.flags[token_id] else "not a stopword")
        examples.append(f"id {token_id} decodes to {text!r} (table: {in_table})")
    model = schema.MUCH_CONFIGS.get(config, (config,))[0]
    return (f"the tokenizer given for {model} (generation_config {config}) disagrees with the packaged stopword "
            f"table {table.name!r} (built from {table.header['tokenizer_file']}, sha256 "
            f"{table.header['sha256'][:12]}...) on {len(differ)} of {n_ids} distinct token ids: "
            f"{'; '.join(examples)}. The given tokenizer's mask is used.")


def stopword_masks(
    tokens: np.ndarray,
    token_configs: np.ndarray,
    tokenizers: Mapping[str, Any | None],
    *,
    lengths: np.ndarray | None = None,
    generation_ids: Any = None,
) -> np.ndarray:
    """Stopword flags of a flat token array whose tokens belong to several ``generation_config`` ids.

    Parameters
    ----------
    tokens : int array of shape (n_tokens,), every row's ``output_tokens`` concatenated.
    token_configs : array of shape (n_tokens,), the ``generation_config`` of each token's row.
    tokenizers : ``{generation_config: tokenizer or None}`` for every distinct config of ``token_configs``.
        A given tokenizer is used (and, for a MUCH config, cross-checked against the table on the ids present: a
        warning names any disagreement); with None a MUCH config uses its table, another config stays all False
        (the caller marks those rows as missing).
    lengths, generation_ids : per-row token counts and ids, only used to name the row of an out-of-vocabulary id.

    Returns a bool array of shape (n_tokens,).
    """
    tokens = np.asarray(tokens, dtype=np.int64)
    token_configs = np.asarray(token_configs, dtype=object)
    if tokens.shape != token_configs.shape or tokens.ndim != 1:
        raise ValueError(f"tokens {tokens.shape} and token_configs {token_configs.shape} must be equal 1-D shapes")
    mask = np.zeros(len(tokens), dtype=bool)
    for config, tokenizer in tokenizers.items():
        where = np.flatnonzero(token_configs == config)
        if tokenizer is not None:
            if has_table(config):
                differ = tokenizer_disagreements(config, tokenizer, tokens[where])
                if len(differ):
                    table = _table_for(config)
                    warnings.warn(_disagreement_message(config, table, tokenizer, differ,
                                                        len(np.unique(tokens[where]))), stacklevel=3)
            mask[where] = rule_flags(tokens[where], tokenizer)
        elif has_table(config):
            try:
                mask[where] = mask_for(config, tokens[where])
            except ValueError as error:
                raise ValueError(_name_row(error, where, tokens, lengths, generation_ids, config)) from error
    return mask


def _name_row(error: ValueError, where: np.ndarray, tokens: np.ndarray, lengths, generation_ids, config) -> str:
    table = _table_for(config)
    bad = where[(tokens[where] < 0) | (tokens[where] >= table.vocab_size)]
    if lengths is None or generation_ids is None or not len(bad):
        return f"generation_config {config}: {error}"
    ends = np.cumsum(np.asarray(lengths))
    row = int(np.searchsorted(ends, bad[0], side="right"))
    start = int(ends[row - 1]) if row else 0
    return (f"sample {generation_ids[row]!s} (generation_config {config}), field "
            f"{schema.OUTPUT_TOKENS}[{bad[0] - start}]: token id {int(tokens[bad[0]])} is outside the "
            f"{table.name!r} vocabulary (size {table.vocab_size})")


def write_table(path: str | Path, flags: np.ndarray, header: Mapping[str, Any]) -> None:
    """Write one table (``flags``: bool array of shape (vocab_size,)) in the format of the module docstring."""
    flags = np.asarray(flags)
    if flags.dtype != bool or flags.ndim != 1:
        raise TypeError(f"flags must be a 1-D bool array, got {flags.dtype}{flags.shape}")
    header = {**header, "format": FORMAT_VERSION, "vocab_size": int(flags.size), "n_stopwords": int(flags.sum())}
    np.savez_compressed(path, bits=np.packbits(flags), header=np.array(json.dumps(header, sort_keys=True)))
