"""Samples packs: N further answers per stored answer, written by ``python -m builder samples``.

A pack is a folder of a manifest and content-addressed parquet shards, one per generation config (the model and
sampler the samples were drawn with): :mod:`much_dataset.samples_pack` reads it (layout, manifest, index, the pack
check, :func:`iter_pack_rows`); its public names are importable from here too.

A sample row has the columns of a ``generate`` row (:data:`much_dataset.schema.SAMPLE_COLUMNS`: ``output``,
``output_tokens``, ``logits_token_ids``, ``logits_values``, ``finished``, ``sampling``) plus the answer's
``generation_id`` and its ``sample_index`` (0..N-1), so whatever reads generations reads samples. ``sampling`` holds
the sampler and the sample's own ``seed``: :func:`sample_seed` of the config's seed and the index, so one sample can
be drawn again alone. The probabilities are MUCH's (``softmax(logits / T)`` over the full vocabulary, top
``stored_candidates`` per position, 24 unless the manifest says fewer, sorted descending, not renormalised; the
sampled token is appended when it ranked lower).

:func:`load_samples` returns them as a ``datasets.Dataset`` (Arrow, memory-mapped from ``datasets``' cache; the
shards are content-addressed, so a cached copy is never stale), one row per sample, ordered by the dataset's rows
and then ``sample_index``; :func:`samples_by_row` gives the samples of dataset row ``i``.
``load_samples("sample")`` opens the embedded sample's pack: answers of its observer, SmolLM2-135M-Instruct, NOT of
the models that wrote the sample's texts. Every open checks the pack and the values of every sample read
(:func:`check_samples_pack`, :func:`much_dataset.samples_pack.check_sample_values`; with ``dataset=`` also the row's
``prompt``, ``wiki_url`` and ``lang``); a pack that fails is refused with :class:`SamplesError`.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from much_dataset import schema
from much_dataset.decoded_text import UncheckedTextWarning, text_decoder, text_problems
from much_dataset.params import POSITIVE_INT, InvalidParameterError, check_param
from much_dataset.samples_checks import ROW_FIELDS, row_field_problems
from much_dataset.samples_pack import (
    FORMAT,
    MANIFEST,
    SAMPLE,
    SAMPLE_PACK_DIR,
    SHARDS,
    SamplesError,
    check_sample_values,
    check_samples_pack,
    is_samples_pack,
    iter_pack_rows,
    pack_folder,
    pack_index,
    read_samples_manifest,
)

if TYPE_CHECKING:  # pragma: no cover
    import datasets

__all__ = ["FORMAT", "MANIFEST", "SHARDS", "SAMPLE", "SAMPLE_PACK_DIR", "SamplesError", "MissingSamplesError",
           "sample_seed", "read_samples_manifest", "is_samples_pack", "pack_index", "iter_pack_rows", "load_samples",
           "samples_by_row", "SamplesByRow", "check_samples_pack", "check_sample_texts"]


class MissingSamplesError(KeyError, SamplesError):
    """A generation_id (or one of its sample indices) the pack does not hold."""

    def __str__(self) -> str:  # KeyError would print the repr of its argument
        return str(self.args[0]) if self.args else ""


def sample_seed(seed: int, sample_index: int) -> int:
    """The seed sample ``sample_index`` is drawn with under a config of seed ``seed``: ``seed + 1 + sample_index``.

    Never the config's own seed (the stored answer's), and consecutive for consecutive indices, so vLLM's ``n``
    samples of one request (child ``j`` seeded ``s + j``) are the samples of their own indices.

    >>> from much_dataset.samples import sample_seed
    >>> [sample_seed(1234, i) for i in range(3)]
    [1235, 1236, 1237]
    """
    return int(seed) + 1 + int(sample_index)


def _shard_keys(path: Path) -> list[tuple[str, int]]:
    import pyarrow.parquet as pq

    if not path.is_file():
        raise SamplesError(f"{path}: shard file is missing from the samples pack")
    try:
        table = pq.read_table(path, columns=[schema.GENERATION_ID, schema.SAMPLE_INDEX])
    except Exception as error:  # any unreadable shard is reported by its path
        raise SamplesError(f"{path}: unreadable shard of the samples pack ({error})") from error
    return list(zip(table.column(0).to_pylist(), table.column(1).to_pylist(), strict=True))


def _wanted(index: dict[str, dict[int, str]], ids: Sequence[str], n: int | None, where: str) -> list[tuple[str, int]]:
    """The (generation_id, sample_index) pairs to return, in order; raises naming the first id that lacks one."""
    pairs = []
    for gid in ids:
        stored = index.get(gid)
        if stored is None:
            raise MissingSamplesError(f"generation_id={gid!r}: no samples in {where}")
        indices = sorted(stored) if n is None else list(range(n))
        missing = [i for i in indices if i not in stored]
        if missing:
            raise MissingSamplesError(f"generation_id={gid!r}: sample_index {missing[0]} is not in {where} (it holds "
                                      f"{sorted(stored)})")
        pairs += [(gid, i) for i in indices]
    return pairs


def _dataset_ids(dataset: Any) -> list[str]:
    if isinstance(dataset, dict) or (hasattr(dataset, "keys") and not hasattr(dataset, "column_names")):
        raise InvalidParameterError("dataset must be one split (a datasets.Dataset or a list of rows), not a "
                                    "DatasetDict: e.g. much_dataset.load('sample', split='test')")
    if isinstance(dataset, list):
        return [str(row[schema.GENERATION_ID]) for row in dataset]
    return [str(g) for g in dataset.select_columns([schema.GENERATION_ID]).with_format("arrow")[:]
            .column(0).to_pylist()]


def _positions(index: dict[str, dict[int, str]], shards: list[str],
               files: list[Path]) -> tuple[dict[tuple[str, int], int], int]:
    """Where each listed (generation_id, sample_index) sits in the shards read one after the other, and how many
    rows they hold: a pair stored again in a later shard counts only where the manifest lists it."""
    position: dict[tuple[str, int], int] = {}
    offset = 0
    for name, file in zip(shards, files, strict=True):
        keys = _shard_keys(file)
        for row, (gid, i) in enumerate(keys):
            if index.get(gid, {}).get(int(i)) == name:
                position[(gid, int(i))] = offset + row
        offset += len(keys)
    return position, offset


def load_samples(pack: str | Path = SAMPLE, *, dataset: Any = None, n: int | None = None,
                 model: str | None = None, cache_dir: str | Path | None = None) -> datasets.Dataset:
    """The samples of a pack as a ``datasets.Dataset``, one row per sample.

    Parameters
    ----------
    pack : str or path
        The pack folder (``python -m builder samples --out``), or ``"sample"``: the embedded sample's pack (answers
        of its observer SmolLM2-135M-Instruct, not of the models that wrote the sample's texts).
    dataset : datasets.Dataset or list of rows, optional
        When given, the samples of its rows, in its row order (then by ``sample_index``); every row must have its
        samples in the pack, else :class:`MissingSamplesError` naming the first ``generation_id`` missing, the pack
        and its model. Without it, every row of the pack (in ``generation_id`` order).
    n : int, optional
        Only sample indices ``0..n-1`` (each required); default every stored sample of each row.
    model : str, optional
        When given, the pack must be of this model (its name as built, or its weights sha256).
    cache_dir : path, optional
        ``datasets``' cache folder for the Arrow copy that is memory-mapped (default: its usual cache).

    Returns
    -------
    datasets.Dataset
        Columns :data:`much_dataset.schema.SAMPLE_COLUMNS` first (``generation_id``, ``sample_index``, ``output``,
        ``output_tokens``, ``logits_token_ids``, ``logits_values``, ``finished``, ``sampling``), then the rest of a
        stored sample row (``sample_id``, ``generation_config``, ``lang``, ``wiki_url``, ``prompt``, ``engine``,
        ``engine_version``). :func:`samples_by_row` groups them by dataset row.

    Examples
    --------
    >>> import much_dataset
    >>> rows = much_dataset.load("sample", split="test").select(range(2))
    >>> samples = much_dataset.load_samples("sample", dataset=rows, n=8)
    >>> samples.num_rows, samples[0]["generation_id"] == rows[0]["generation_id"]
    (16, True)
    >>> list(much_dataset.samples_by_row(samples, rows)[1]["sample_index"])
    [0, 1, 2, 3, 4, 5, 6, 7]
    """
    import datasets

    path = pack_folder(pack)
    manifest = read_samples_manifest(path)
    where = f"the samples pack {path} (model {manifest.get('model')!r})"
    if model is not None and model not in (manifest.get("model"), manifest.get("model_name"),
                                           manifest.get("weights_sha256")):
        raise SamplesError(f"{path / MANIFEST}: the pack is of model {manifest.get('model')!r} (weights "
                           f"{str(manifest.get('weights_sha256'))[:12]}), not {model!r}")
    if n is not None:
        check_param("n", n, POSITIVE_INT, owner="load_samples")
    check_samples_pack(path, manifest)  # every shard, once per open (load_samples reads whole shards anyway)
    index = pack_index(manifest)
    ids = list(index) if dataset is None else _dataset_ids(dataset)
    if dataset is not None and ids and not any(gid in index for gid in ids):
        raise MissingSamplesError(f"generation_id={ids[0]!r}: {where} holds none of the {len(ids)} rows (it was "
                                  "built from another dataset or split)")
    wanted = _wanted(index, ids, n, where)
    shards = sorted({index[gid][i] for gid, i in wanted})
    if not shards:
        raise SamplesError(f"{where} holds no sample for these rows")
    files = [path / SHARDS / name for name in shards]
    position, offset = _positions(index, shards, files)
    loaded = datasets.load_dataset("parquet", data_files=[str(f) for f in files], split="train",
                                   cache_dir=None if cache_dir is None else str(cache_dir))
    if loaded.num_rows != offset:
        raise SamplesError(f"{where}: its shards hold {offset} rows but {loaded.num_rows} were read")
    selected = loaded.select([position[pair] for pair in wanted])
    table = selected.with_format("arrow")[:]
    read = zip(table[schema.GENERATION_ID].to_pylist(), table[schema.SAMPLE_INDEX].to_pylist(), strict=True)
    if list(read) != wanted:
        raise SamplesError(f"{where}: its shards were read in another order than listed (a datasets cache of other "
                           "files?); pass cache_dir= to a fresh folder")
    check_sample_values(path, manifest, table, [index[gid][i] for gid, i in wanted], None)
    warnings.warn(f"samples pack {path}: texts not compared with their decoded tokens (check_sample_texts(samples, "
                  "tokenizer, pack=...) with the pack's model's tokenizer does)", UncheckedTextWarning,
                  stacklevel=1)  # stacklevel 1: one location, so the default filter says it once per pack
    if dataset is not None:
        _check_row_fields(path, table, dataset, [index[gid][i] for gid, i in wanted])
    first = [name for name in schema.SAMPLE_COLUMNS if name in selected.column_names]
    return selected.select_columns(first + [c for c in selected.column_names if c not in first])


def check_sample_texts(samples: Any, tokenizer: Any, *, pack: str | Path = SAMPLE) -> None:
    """Raise :class:`SamplesError` unless every sample's ``output`` is its ``output_tokens`` decoded by
    ``tokenizer`` (the pack's model's tokenizer, or a batch decoding function; special tokens kept: the rule of
    ``builder verify``, :mod:`much_dataset.decoded_text`), naming the pack, the shard, the ``generation_id``, the
    sample index, the column and the character where the texts part. ``samples``: what :func:`load_samples` returned
    for ``pack`` (which does not compare the texts itself: it has no tokenizer, and says so). ``much run --samples``
    calls it with the pack's tokenizer when one is known offline (``much_metric.models.local_tokenizer``)."""
    path = pack_folder(pack)
    index = pack_index(read_samples_manifest(path))
    table = samples.select_columns([schema.GENERATION_ID, schema.SAMPLE_INDEX, schema.OUTPUT, schema.OUTPUT_TOKENS]
                                   ).with_format("arrow")[:] if hasattr(samples, "select_columns") else samples
    shards = [index.get(gid, {}).get(int(i), "(not listed)") for gid, i in zip(
        table[schema.GENERATION_ID].to_pylist(), table[schema.SAMPLE_INDEX].to_pylist(), strict=True)]
    found = text_problems(table[schema.OUTPUT].to_pylist(), table[schema.OUTPUT_TOKENS].to_pylist(),
                          text_decoder(tokenizer))
    if found:
        row, reason = found[0]
        more = f" ({len(found) - 1} more sample(s))" if len(found) > 1 else ""
        raise SamplesError(f"samples pack {path}: shard {shards[row]}, generation_id="
                           f"{table[schema.GENERATION_ID][row].as_py()!r}, sample_index "
                           f"{table[schema.SAMPLE_INDEX][row].as_py()}, column {schema.OUTPUT!r}, {reason}{more}")


def _check_row_fields(path: Path, table: Any, dataset: Any, shards: Sequence[str]) -> None:
    """Raise :class:`SamplesError` for the first sample whose ``prompt``, ``wiki_url`` or ``lang`` is not its row's
    (:func:`much_dataset.samples_checks.row_field_problems`; a field is compared when every row has it)."""
    if isinstance(dataset, list):
        fields = [f for f in ROW_FIELDS if all(f in r for r in dataset)]
        rows = {str(r[schema.GENERATION_ID]): {f: r[f] for f in fields} for r in dataset}
    else:
        fields = [f for f in ROW_FIELDS if f in dataset.column_names]
        rows = {str(r[schema.GENERATION_ID]): r
                for r in dataset.select_columns([schema.GENERATION_ID, *fields]).to_list()}
    problems = row_field_problems(table, rows)
    if problems:
        row, column, reason = problems[0]
        raise SamplesError(f"samples pack {path}: shard {shards[row]}, generation_id="
                           f"{table[schema.GENERATION_ID][row].as_py()!r}, sample_index "
                           f"{table[schema.SAMPLE_INDEX][row].as_py()}, column {column!r}: {reason}")


class SamplesByRow(Sequence["datasets.Dataset"]):
    """The samples of each dataset row: ``grouped[i]`` is a ``datasets.Dataset`` of row ``i``'s samples (in
    ``sample_index`` order); ``grouped.generation_ids[i]`` its id; ``grouped.counts[i]`` how many."""

    def __init__(self, samples: datasets.Dataset, generation_ids: list[str], spans: list[tuple[int, int]]) -> None:
        self.samples = samples
        self.generation_ids = generation_ids
        self._spans = spans

    @property
    def counts(self) -> list[int]:
        """Samples per dataset row, in dataset order."""
        return [stop - start for start, stop in self._spans]

    def __len__(self) -> int:
        return len(self._spans)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        start, stop = self._spans[i]
        return self.samples.select(range(start, stop))

    def __repr__(self) -> str:
        return f"SamplesByRow(rows={len(self)}, samples={self.samples.num_rows})"


def samples_by_row(samples: datasets.Dataset, dataset: Any = None) -> SamplesByRow:
    """Group :func:`load_samples`' rows by answer: item ``i`` holds the samples of ``dataset`` row ``i`` (of the
    ``i``-th answer of ``samples`` when ``dataset`` is None).

    Each answer's samples must be contiguous (as :func:`load_samples` returns them); a dataset row without samples
    raises :class:`MissingSamplesError` naming its ``generation_id``.
    """
    gids = [str(g) for g in samples.select_columns([schema.GENERATION_ID]).with_format("arrow")[:]
            .column(0).to_pylist()]
    spans: dict[str, tuple[int, int]] = {}
    order: list[str] = []
    start = 0
    for position in range(1, len(gids) + 1):
        if position == len(gids) or gids[position] != gids[start]:
            if gids[start] in spans:
                raise SamplesError(f"generation_id={gids[start]!r}: its samples are not contiguous (sort them by "
                                   "generation_id, or use load_samples' order)")
            spans[gids[start]] = (start, position)
            order.append(gids[start])
            start = position
    ids = order if dataset is None else _dataset_ids(dataset)
    missing = next((gid for gid in ids if gid not in spans), None)
    if missing is not None:
        raise MissingSamplesError(f"generation_id={missing!r}: no samples among the {len(gids)} given")
    return SamplesByRow(samples, ids, [spans[gid] for gid in ids])
