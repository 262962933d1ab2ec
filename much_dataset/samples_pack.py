"""A samples pack on disk: its layout, its manifest and index, the pack check, and its rows read shard by shard.

A pack is a folder, one per generation config (the model and sampler the samples were drawn with)::

    PACK/manifest.json                 format, model, weights hash, engine and version, sampler, generation config,
                                       prompt style, stored candidates, n, source hashes,
                                       rows {generation_id: {shard: [sample_index, ...]}}, shards, failures
    PACK/shards/<sha256>.parquet       sample rows, content-addressed

A pack is what its manifest says (the one pack check of :mod:`much_dataset.packs`, with the samples layout of
:mod:`much_dataset.samples_checks`): every open (:func:`load_samples <much_dataset.samples.load_samples>`,
:func:`iter_pack_rows`) checks each shard's size, content address, columns, types, ids, duplicates and recorded
identity, then the values of every sample read (probabilities, token ids, shapes, the sampler and seed rule, and with
``dataset=`` the row's ``prompt``, ``wiki_url`` and ``lang``). A pack that fails is refused with :class:`SamplesError`
naming the pack, the shard, the ``generation_id``, the sample index, the column and the position; ``python -m builder
samples`` rerun with the same options redraws the damaged shards' samples.

:mod:`much_dataset.samples` re-exports the public names here and serves the samples as a ``datasets.Dataset``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from much_dataset import schema
from much_dataset.decoded_text import Decoder, text_decoder
from much_dataset.packs import PackError, damage_message
from much_dataset.samples_checks import count_problem, identity_problem, samples_pack_damage, value_problems

__all__ = ["FORMAT", "MANIFEST", "SHARDS", "SAMPLE", "SAMPLE_PACK_DIR", "REPAIR", "SamplesError", "pack_folder",
           "read_samples_manifest", "is_samples_pack", "pack_index", "iter_pack_rows", "check_samples_pack",
           "check_sample_values"]

FORMAT = "much-samples/1"
MANIFEST = "manifest.json"
SHARDS = "shards"
#: ``load_samples(SAMPLE)`` opens the embedded sample's pack.
SAMPLE = "sample"
#: Where the embedded sample's pack lives (written by ``scripts/data/make_sample_samples.py``).
SAMPLE_PACK_DIR = Path(__file__).resolve().parent / "sample" / "samples"
#: What a reader of a damaged pack is told to do.
REPAIR = ("rerun `python -m builder samples` with the same options and --out: it checks every shard, says which are "
          "damaged and redraws their samples")


class SamplesError(PackError):
    """A samples pack that cannot be read, or that does not hold the samples of the data it is used with."""


def pack_folder(pack: str | Path) -> Path:
    """The folder of a pack: ``pack`` itself, or the embedded sample's pack for ``"sample"``."""
    return SAMPLE_PACK_DIR if str(pack) == SAMPLE else Path(pack)


def is_samples_pack(path: str | Path) -> bool:
    """Whether ``path`` is a folder holding a samples pack manifest."""
    manifest = Path(path) / MANIFEST
    if not manifest.is_file():
        return False
    try:
        return json.loads(manifest.read_text(encoding="utf-8")).get("format") == FORMAT
    except (ValueError, AttributeError):
        return False


def read_samples_manifest(pack: str | Path) -> dict[str, Any]:
    """The manifest of a samples pack (``"sample"``: the embedded one), checked to be one."""
    path = pack_folder(pack) / MANIFEST
    if not path.is_file():
        hint = (" (the embedded sample's pack is built by scripts/data/make_sample_samples.py)"
                if str(pack) == SAMPLE else "")
        raise SamplesError(f"{path}: not a samples pack (no {MANIFEST}; build one with `python -m builder samples`)"
                           f"{hint}")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as error:
        raise SamplesError(f"{path}: not valid JSON ({error})") from error
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT or not isinstance(manifest.get("rows"),
                                                                                              dict):
        raise SamplesError(f"{path}: not a {FORMAT} manifest")
    return manifest


def pack_index(manifest: dict[str, Any]) -> dict[str, dict[int, str]]:
    """``generation_id -> {sample_index: shard file name}`` of a manifest (an entry that is not a listing of
    integer indices is left out: :func:`check_samples_pack` reports it)."""
    index: dict[str, dict[int, str]] = {}
    for gid, by_shard in manifest["rows"].items():
        if not isinstance(by_shard, dict):
            continue
        index[gid] = {i: shard for shard, indices in by_shard.items() if isinstance(indices, list)
                      for i in indices if isinstance(i, int) and not isinstance(i, bool)}
    return index


def iter_pack_rows(pack: str | Path, *, tokenizer: Any = None) -> Iterator[dict[str, Any]]:
    """Every sample row the manifest lists, as plain dicts (shard by shard; for ``verify`` and ``replay``), after
    the pack check and the value rules of :func:`load_samples <much_dataset.samples.load_samples>` (a damaged pack
    raises :class:`SamplesError`; texts are compared with their decoded tokens only with ``tokenizer``: ``verify``
    decodes them itself)."""
    import pyarrow.parquet as pq

    path = pack_folder(pack)
    manifest = read_samples_manifest(path)
    index = pack_index(manifest)
    shards = sorted({name for by_index in index.values() for name in by_index.values()})
    check_samples_pack(path, manifest)
    decode = None if tokenizer is None else text_decoder(tokenizer)
    for shard in shards:
        table = pq.read_table(path / SHARDS / shard)
        check_sample_values(path, manifest, table, [shard] * table.num_rows, decode)
        for row in table.to_pylist():
            if index.get(row[schema.GENERATION_ID], {}).get(int(row[schema.SAMPLE_INDEX])) == shard:
                yield row


def check_samples_pack(pack: str | Path, manifest: dict[str, Any]) -> None:
    """Raise :class:`SamplesError` unless the pack is what its manifest says (:mod:`much_dataset.samples_checks`:
    sizes, content addresses, columns and types, ids, duplicates, the identity its shards were written under, the
    manifest's counts)."""
    path = pack_folder(pack)
    edited = identity_problem(manifest)
    if edited is not None:
        raise SamplesError(f"{path / MANIFEST}: {edited}; rebuild the pack (`python -m builder samples` into a new "
                           "--out)")
    damage = samples_pack_damage(path, manifest, hashes=True)
    if damage:
        raise SamplesError(damage_message(path, damage, repair=REPAIR))
    miscounted = count_problem(manifest)
    if miscounted is not None:
        raise SamplesError(f"{path / MANIFEST}: {miscounted}; rebuild the pack (`python -m "
                           "builder samples` into a new --out)")


def check_sample_values(pack: str | Path, manifest: dict[str, Any], table: Any, shards: Sequence[str],
                        decode: Decoder | None) -> None:
    """Raise :class:`SamplesError` at the first sample of ``table`` (pyarrow) whose values break a rule of
    :func:`much_dataset.samples_checks.value_problems` (the text rule with ``decode``), naming the pack,
    ``shards[row]``, the generation_id, the sample index, the column and the position."""
    problems = value_problems(table, manifest, decode=decode)
    if problems:
        row, column, reason = problems[0]
        more = f" ({len(problems) - 1} more problem(s))" if len(problems) > 1 else ""
        raise SamplesError(f"samples pack {pack_folder(pack)}: shard {shards[row]}, generation_id="
                           f"{table[schema.GENERATION_ID][row].as_py()!r}, sample_index "
                           f"{table[schema.SAMPLE_INDEX][row].as_py()}, column {column!r}, {reason}{more}; {REPAIR}")
