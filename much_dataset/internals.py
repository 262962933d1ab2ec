"""Internals packs: a model's attention and hidden states per output token, written by ``python -m builder internals``.

A pack is a folder::

    PACK/manifest.json                      model, weights hash, layers, heads, hidden_layers, dtypes, source hash,
                                            rows {generation_id: {"shard", "n_tokens", "max_abs_diff"}}, shards
    PACK/shards/<sha256>.safetensors        tensors "<generation_id>/<name>", content-addressed

Row ``t`` of every array is the sequence position of output token ``t`` (the position that reads token ``t``; its
logits predict token ``t + 1``; the stored probabilities of token ``t`` came from the position before it).

:func:`load_internals` memory-maps the shards (nothing is read until an array is used) and returns a read-only
mapping ``generation_id -> {name: numpy array}`` with the manifest as ``.manifest``.

A pack is what its manifest says (:mod:`much_dataset.packs`): opening it checks every shard's size, header, row ids,
dtypes and shapes against the manifest (its layer and head counts, each row's token count), and the first use of a
shard checks its bytes against its content address (sha256); a row's values are checked as it is read
(:mod:`much_dataset.internals_checks`: attention weights in [0, 1] summing to at most 1, finite hidden states). A pack
that fails is refused (:class:`InternalsError` naming the pack, the shard or the ``generation_id``, the array and the
position); ``python -m builder internals`` rerun with the same options recomputes the damaged rows.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from much_dataset.packs import PackError, ShardDamage, damage_message, pack_damage, read_header, verify_shard

__all__ = ["FORMAT", "MANIFEST", "SHARDS", "BASIS", "NOT_COMPUTATION", "InternalsPack", "InternalsError",
           "MissingRowError", "internals_pack_damage", "load_internals", "read_basis"]

FORMAT = "much-internals/1"
MANIFEST = "manifest.json"
SHARDS = "shards"
#: Folder of a ``pca:K`` pack's basis file (``basis/<sha256>.safetensors``: tensors ``mean`` and ``components``).
BASIS = "basis"

#: Manifest fields that say which rows a pack holds, where they came from and how they were checked, not how its
#: arrays are computed: left out of :attr:`InternalsPack.fingerprint`, so a pack keeps its fingerprint as it grows
#: (a resumed build, one more ``--source`` file) and two folders built the same way share it. ``model`` is a name: the
#: weights hash decides.
NOT_COMPUTATION = frozenset({"rows", "shards", "n_rows", "n_tokens", "failures", "max_abs_diff", "hidden_error",
                             "toolkit_version", "model", "source_sha256", "sources", "probability_check"})

_DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32,
           "I16": np.int16, "I8": np.int8, "U8": np.uint8}


#: What a reader of a damaged pack is told to do.
REPAIR = ("rerun `python -m builder internals` with the same options and --out to recompute the damaged rows "
          "(it checks every shard and says which)")


class InternalsError(PackError):
    """A pack that cannot be read, or that does not belong to the data or model it is used with."""


class MissingRowError(KeyError, InternalsError):
    """A generation_id the pack does not hold."""

    def __str__(self) -> str:  # KeyError would print the repr of its argument
        return str(self.args[0]) if self.args else ""


class InternalsPack(Mapping[str, dict[str, np.ndarray]]):
    """Read-only ``generation_id -> {name: array}`` over a pack's memory-mapped shards (see :func:`load_internals`).

    Attributes
    ----------
    manifest : dict
        The pack's ``manifest.json``.
    path : pathlib.Path
        The pack folder.
    """

    def __init__(self, path: Path, manifest: dict[str, Any]) -> None:
        self.path = path
        self.manifest = manifest
        self._rows: dict[str, dict[str, Any]] = manifest["rows"]
        self._shards: dict[str, tuple[np.ndarray, dict[str, Any]]] = {}
        self.compression = str(manifest.get("compression") or "none")
        self._basis: dict[str, np.ndarray] | None = None
        self._verified: set[str] = set()

    @property
    def fingerprint(self) -> str:
        """sha256 of how the pack's arrays are computed: every manifest field except :data:`NOT_COMPUTATION`
        (weights hash, layers, dtypes, compression and basis, prompt style, ...).

        Signals computed from a pack record it (``much run --internals PACK --out DIR``), so that a resumed run or
        ``much evaluate --internals PACK`` never mixes or scores values of another observer.
        """
        import hashlib

        computation = {key: value for key, value in self.manifest.items() if key not in NOT_COMPUTATION}
        return hashlib.sha256(json.dumps(computation, sort_keys=True).encode("utf-8")).hexdigest()

    def __repr__(self) -> str:
        return (f"InternalsPack({str(self.path)!r}, model={self.manifest.get('model')!r}, rows={len(self)}, "
                f"tokens={self.manifest.get('n_tokens')})")

    def __len__(self) -> int:
        return len(self._rows)

    def __iter__(self) -> Iterator[str]:
        return iter(self._rows)

    def __contains__(self, key: object) -> bool:
        return key in self._rows

    def __getitem__(self, generation_id: str) -> dict[str, np.ndarray]:
        entry = self._rows.get(str(generation_id))
        if entry is None:
            raise MissingRowError(f"generation_id={generation_id!r}: no such row in the internals pack {self.path} "
                                  f"({len(self)} rows; built from another dataset or split, or not finished?)")
        buffer, header = self._shard(entry["shard"])
        prefix = f"{generation_id}/"
        arrays = {}
        for key, info in header.items():
            if key.startswith(prefix):
                begin, end = info["data_offsets"]
                array = buffer[begin:end].view(_DTYPES[info["dtype"]]).reshape(info["shape"])
                name = key[len(prefix):]
                if self.manifest.get("dtypes", {}).get(name) == "bfloat16":
                    array = (array.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
                arrays[name] = array
        if not arrays or any(array.shape[0] != entry["n_tokens"] for array in arrays.values()):
            raise InternalsError(f"generation_id={generation_id!r}: shard {entry['shard']} of {self.path} does not "
                                 f"hold its {entry['n_tokens']} rows")
        self._check_values(str(generation_id), arrays)
        if self.compression != "none" and "hidden" in arrays:  # dequantised on read: always float arrays
            from much_dataset.internals_compression import decode_hidden

            basis = self.basis() if self.compression.startswith("pca") else None
            try:
                arrays["hidden"] = decode_hidden(arrays, self.compression, basis=basis)
            except (KeyError, ValueError) as error:
                raise InternalsError(f"generation_id={generation_id!r}: shard {entry['shard']} of {self.path}: "
                                     f"cannot decode the {self.compression} hidden states ({error})") from None
            arrays.pop("hidden_scale", None)
            self._check_values(str(generation_id), {"hidden": arrays["hidden"]})
        return arrays

    def _check_values(self, generation_id: str, arrays: dict[str, np.ndarray]) -> None:
        from much_dataset.internals_checks import check_row_values

        try:
            check_row_values(self.path, generation_id, arrays)
        except PackError as error:
            raise InternalsError(str(error)) from None

    def basis(self) -> dict[str, np.ndarray]:
        """A ``pca:K`` pack's basis ``{"mean": [layers, d], "components": [layers, K, d]}`` (checked against its
        content address)."""
        if self._basis is None:
            name = self.manifest.get("pca_basis")
            if not name:
                raise InternalsError(f"{self.path / MANIFEST}: a {self.compression} pack without its 'pca_basis'")
            self._basis = read_basis(self.path / BASIS / str(name))
        return self._basis

    def _shard(self, name: str) -> tuple[np.ndarray, dict[str, Any]]:
        if name not in self._shards:
            path = self.path / SHARDS / name
            if name not in self._verified:  # every byte read was checked against its content address once
                listed = self.manifest.get("shards", {}).get(name) or {}
                try:
                    verify_shard(path, sha256=listed.get("sha256"), size=listed.get("bytes"))
                except PackError as error:
                    raise InternalsError(f"{error}; {REPAIR}") from None
                self._verified.add(name)
            self._shards[name] = _map_safetensors(path)
        return self._shards[name]

    def n_tokens(self, generation_id: str) -> int:
        """Output tokens of a row (from the manifest, no shard read)."""
        return int(self._rows[str(generation_id)]["n_tokens"])

    def check(self, generation_ids: Sequence[str], n_tokens: Sequence[int] | None = None, *,
              model: str | None = None, source: str | None = None) -> None:
        """Raise :class:`InternalsError` unless the pack holds every ``generation_id`` with the given token counts
        (and, when given, was built from ``model``: its name or weights sha256)."""
        if model is not None and model not in (self.manifest.get("model"), self.manifest.get("weights_sha256")):
            raise InternalsError(f"{self.path / MANIFEST}: the pack is of model {self.manifest.get('model')!r} "
                                 f"(weights {str(self.manifest.get('weights_sha256'))[:12]}), not {model!r}")
        ids = [str(g) for g in generation_ids]
        held = self.held(ids, n_tokens)
        if len(held) < len(ids):
            first = next(g for g in ids if g not in self._rows)
            raise MissingRowError(f"generation_id={first!r}: no such row in the internals pack {self.path} "
                                  f"({len(ids) - len(held)} of {len(ids)} samples missing)")

    def held(self, generation_ids: Sequence[str], n_tokens: Sequence[int] | None = None) -> list[str]:
        """The ``generation_ids`` the pack holds, in order, each checked against its token count (when given): the
        samples a signal that reads the pack can score (``much run --internals`` on a pack of part of the data).

        Raises :class:`InternalsError` when the pack holds none of them (a pack of another dataset) or holds one
        with another token count (another dataset or tokenizer), naming the ``generation_id``."""
        ids = [str(g) for g in generation_ids]
        held = [g for g in ids if g in self._rows]
        if ids and not held:
            raise InternalsError(f"the internals pack {self.path} holds none of the {len(ids)} samples (first: "
                                 f"generation_id={ids[0]!r}): it was built from another dataset")
        if n_tokens is not None:
            for gid, count in zip(ids, n_tokens, strict=True):
                if gid in self._rows and int(self._rows[gid]["n_tokens"]) != int(count):
                    raise InternalsError(f"generation_id={gid!r}: the internals pack {self.path} has "
                                         f"{self._rows[gid]['n_tokens']} tokens, the data {count} (field "
                                         "output_tokens): a pack of another dataset or tokenizer")
        return held


def _map_safetensors(path: Path) -> tuple[np.ndarray, dict[str, Any]]:
    """The data section of a safetensors file as a read-only uint8 memmap, and its header."""
    try:
        header, start, _ = read_header(path)
    except PackError as error:
        raise InternalsError(str(error)) from None
    end = max((info["data_offsets"][1] for info in header.values()), default=0)
    if end == 0:
        return np.zeros(0, dtype=np.uint8), header
    return np.memmap(path, dtype=np.uint8, mode="r", offset=start, shape=(end,)), header


def internals_pack_damage(path: str | Path, manifest: dict[str, Any], *, hashes: bool = True) -> list[ShardDamage]:
    """The shards of an internals pack that do not match its manifest (:func:`much_dataset.packs.pack_damage` with
    the arrays :func:`much_dataset.internals_checks.expected_arrays` derives from the manifest); empty: the pack is
    what its manifest says."""
    from much_dataset.internals_checks import expected_arrays

    try:
        expect = expected_arrays(manifest)
    except ValueError as error:
        raise InternalsError(f"{Path(path) / MANIFEST}: {error}") from None
    return pack_damage(path, manifest, expect=expect, hashes=hashes)  # shards in SHARDS, the layout's default


def read_basis(path: Path) -> dict[str, np.ndarray]:
    """A PCA basis file, checked: its name is the sha256 of its bytes (content-addressed)."""
    import hashlib

    if not path.is_file():
        raise InternalsError(f"{path}: the PCA basis file is missing from the internals pack")
    data = path.read_bytes()
    if path.name != f"{hashlib.sha256(data).hexdigest()}.safetensors":
        raise InternalsError(f"{path}: the basis file does not hash to its name (corrupt or replaced)")
    buffer, header = _map_safetensors(path)
    arrays = {}
    for key, info in header.items():
        begin, end = info["data_offsets"]
        arrays[key] = np.array(buffer[begin:end].view(_DTYPES[info["dtype"]]).reshape(info["shape"]))
    if set(arrays) != {"mean", "components"}:
        raise InternalsError(f"{path}: a PCA basis holds 'mean' and 'components', not {sorted(arrays)}")
    return arrays


def load_internals(pack: str | Path, *, dataset: Any = None, model: str | None = None) -> InternalsPack:
    """Open an internals pack (``python -m builder internals``) read-only, memory-mapped.

    Parameters
    ----------
    pack : str or path
        The pack folder (holding ``manifest.json``).
    dataset : datasets.Dataset, list of rows, or None
        When given, every sample must be in the pack with its number of output tokens (else
        :class:`InternalsError` naming the first ``generation_id`` that is not).
    model : str, optional
        When given, the pack must be of this model (its name as built, or its weights sha256).

    Returns
    -------
    InternalsPack
        ``pack[generation_id]`` -> ``{"attention_to_previous": (n_tokens, layers, heads), "hidden": (n_tokens,
        len(hidden_layers), hidden_size), ...}``; ``pack.manifest``. A compressed ``hidden`` (``int8``, ``pca:K``:
        ``pack.manifest["compression"]``) is decoded on read to a float32 array (see
        :mod:`much_dataset.internals_compression`); uncompressed arrays are memory-mapped.
    """
    path = Path(pack)
    manifest_path = path / MANIFEST
    if not manifest_path.is_file():
        raise InternalsError(f"{manifest_path}: not an internals pack (no {MANIFEST}; build one with "
                             "`python -m builder internals`)")
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except ValueError as error:
        raise InternalsError(f"{manifest_path}: not valid JSON ({error})") from error
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT or not isinstance(manifest.get("rows"), dict):
        raise InternalsError(f"{manifest_path}: not a {FORMAT} manifest")
    damage = internals_pack_damage(path, manifest, hashes=False)  # the bytes: on each shard's first use
    if damage:
        raise InternalsError(damage_message(path, damage, repair=REPAIR))
    loaded = InternalsPack(path, manifest)
    if dataset is not None or model is not None:
        ids, counts = _ids_and_lengths(dataset) if dataset is not None else ([], None)
        if dataset is not None:
            loaded.check(ids, counts, model=model)
        else:
            loaded.check([], None, model=model)
    return loaded


def _ids_and_lengths(dataset: Any) -> tuple[list[str], list[int]]:
    from much_dataset import schema

    if isinstance(dataset, list):
        return ([str(r[schema.GENERATION_ID]) for r in dataset], [len(r[schema.OUTPUT_TOKENS]) for r in dataset])
    if hasattr(dataset, "select_columns") and hasattr(dataset, "with_format"):  # datasets.Dataset
        table = dataset.select_columns([schema.GENERATION_ID, schema.OUTPUT_TOKENS]).with_format("arrow")[:]
    else:  # pyarrow.Table
        table = dataset
    ids = [str(g) for g in table.column(schema.GENERATION_ID).to_pylist()]
    lengths = table.column(schema.OUTPUT_TOKENS).combine_chunks().value_lengths().to_pylist() \
        if hasattr(table.column(schema.OUTPUT_TOKENS), "combine_chunks") else \
        [len(t) for t in table.column(schema.OUTPUT_TOKENS).to_pylist()]
    return ids, [int(n) for n in lengths]
