"""A pack is what its manifest says: the check shared by every pack format (internals packs, samples packs).

A *pack* is a folder of content-addressed shards and a ``manifest.json`` that lists them. Internals packs
(safetensors)::

    manifest["shards"]  {"<sha256>.safetensors": {"bytes": N, "sha256": "<sha256>"}}
    manifest["rows"]    {row_id: {"shard": "<sha256>.safetensors", ...}}      tensors "<row_id>/<name>" in the shard

Samples packs (parquet, :mod:`much_dataset.samples_checks`) list ``{generation_id: {shard: [sample_index, ...]}}``;
a format hands :func:`pack_damage` its :class:`PackLayout` (which keys each shard holds, how to read one), and the
checks below are the same for both.

:func:`pack_damage` compares the bytes with the manifest and returns one :class:`ShardDamage` per shard that does not
match (none: the pack is what its manifest says):

* every row names a shard the manifest lists, and the file is there with the listed size;
* with ``hashes=True``, the file's sha256 is its name and the listed ``sha256`` (the content address: a shard replaced
  by another one, truncated or edited in place is found);
* the shard's header is readable and holds, for each row the manifest assigns to it, exactly the arrays ``expect``
  says, with their dtypes and shapes (the manifest's layer and head counts, the row's token count, ...), and no
  array of a row that is in no manifest (rows of another pack added to it).

A format supplies ``expect(row_id, entry) -> {name: (safetensors dtype, shape)}`` and decides what to do with the
damage: a reader refuses the pack (:func:`damage_message`), a resumed build recomputes the damaged rows.
:func:`verify_shard` hashes one shard (a reader calls it the first time it maps that shard, so every byte read has
been checked once). A shard's hash is remembered in the process while the file's identity (path, device, inode,
size, mtime, ctime) is unchanged (:func:`shard_sha256`), and a layout with a ``manifest_key`` (samples packs)
remembers a shard found sound under an unchanged manifest: a second open of an unchanged pack reads no shard, a file
written, replaced or touched since (or any manifest edit) is checked again.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from much_dataset.cache import BoundedCache

__all__ = ["PackError", "ShardDamage", "PackLayout", "pack_damage", "damage_message",
           "read_header", "verify_shard", "shard_sha256", "manifest_digest", "VERIFIED"]

#: Largest safetensors header read (bytes): a header that claims more is a damaged file, not a reason to allocate.
MAX_HEADER_BYTES = 256 << 20

#: ``expect(row_id, entry)`` -> ``{array name: (safetensors dtype, shape)}``.
Expect = Callable[[str, Mapping[str, Any]], Mapping[str, tuple[str, tuple[int, ...]]]]


class PackError(ValueError):
    """A pack whose bytes do not match its manifest, or that cannot be read."""


@dataclass(frozen=True)
class ShardDamage:
    """One shard that does not match the manifest: its name, the rows the manifest assigns to it, and why."""

    shard: str
    rows: tuple[Hashable, ...]
    reason: str

    def __str__(self) -> str:
        first = f" (first: {self.rows[0]!r})" if self.rows else ""
        return f"shard {self.shard}: {self.reason}; {len(self.rows)} row(s) assigned to it{first}"


def read_header(path: Path) -> tuple[dict[str, Any], int, int]:
    """A safetensors file's header (without ``__metadata__``), the offset of its data section and the file size;
    :class:`PackError` for a missing, truncated or unreadable file, or offsets past the end."""
    if not path.is_file():
        raise PackError(f"{path}: the shard file is missing")
    size = path.stat().st_size
    with open(path, "rb") as handle:
        head = handle.read(8)
        if len(head) < 8:
            raise PackError(f"{path}: truncated shard ({size} bytes)")
        (length,) = struct.unpack("<Q", head)
        if length > MAX_HEADER_BYTES or 8 + length > size:
            raise PackError(f"{path}: truncated shard (header of {length} bytes, file of {size})")
        try:
            header = json.loads(handle.read(length))
        except ValueError as error:
            raise PackError(f"{path}: corrupt shard header ({error})") from None
    if not isinstance(header, dict):
        raise PackError(f"{path}: corrupt shard header (not an object)")
    header.pop("__metadata__", None)
    end = 0
    for key, info in header.items():
        try:
            begin, stop = (int(v) for v in info["data_offsets"])
            str(info["dtype"]), [int(d) for d in info["shape"]]
        except (KeyError, TypeError, ValueError):
            raise PackError(f"{path}: corrupt shard header (entry {key!r})") from None
        if not 0 <= begin <= stop:
            raise PackError(f"{path}: corrupt shard header (entry {key!r} has offsets {begin}..{stop})")
        end = max(end, stop)
    if 8 + length + end > size:
        raise PackError(f"{path}: truncated shard ({size} bytes, its header describes {8 + length + end})")
    return header, 8 + length, size


#: Shards checked in this process: file identity (:func:`_file_identity`) -> the sha256 its bytes hashed to, and
#: ``("sound", file identity, manifest digest, hashes)`` -> ``"sound"`` for a shard whose whole check passed.
VERIFIED: BoundedCache[tuple[Any, ...], str] = BoundedCache(8192)
#: A file changed less than this many seconds before it was hashed is not remembered: an edit within the filesystem's
#: timestamp granularity (a coarse kernel clock, 2 s on FAT) might leave every timestamp as it was.
RACY_SECONDS = 2.0


def _file_identity(path: Path, stat: os.stat_result) -> tuple[Any, ...]:
    """What changes whenever a file's bytes may have: its path, device and inode (a file replaced by a rename),
    size, mtime and ctime in ns (ctime moves on every write and on ``os.utime`` itself, and cannot be set back)."""
    return (str(path.resolve()), stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)


def _hash_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def shard_sha256(path: Path) -> str:
    """The sha256 of the file's bytes, hashed once per file identity (:data:`VERIFIED`): a file whose identity is
    unchanged since it was hashed is not read again; any write, replacement or ``os.utime`` changes it and the file
    is hashed again. A file that changed during its hash, or less than :data:`RACY_SECONDS` before it, is not
    remembered (docs/decisions.md#verified-shards-are-remembered-by-file-identity)."""
    before = path.stat()
    key = _file_identity(path, before)
    found = VERIFIED.get(key)
    if found is not None:
        return found
    digest = _hash_file(path)
    if _rememberable(path, before):
        VERIFIED.put(key, digest)
    return digest


def _rememberable(path: Path, before: os.stat_result) -> bool:
    """Whether what was read of ``path`` since ``before`` (its stat then) may be remembered: the file did not change
    meanwhile and its last change is at least :data:`RACY_SECONDS` old."""
    changed = max(before.st_mtime_ns, before.st_ctime_ns) / 1e9
    return _file_identity(path, path.stat()) == _file_identity(path, before) and time.time() - changed >= RACY_SECONDS


def verify_shard(path: Path, *, sha256: str | None = None, size: int | None = None) -> None:
    """Raise :class:`PackError` unless ``path`` hashes to its name (``<sha256>.safetensors``), to ``sha256`` when
    given, and has ``size`` bytes when given (the hash remembered while the file is unchanged: :func:`shard_sha256`)."""
    if not path.is_file():
        raise PackError(f"{path}: the shard file is missing")
    actual = path.stat().st_size
    if size is not None and actual != int(size):
        raise PackError(f"{path}: {actual} bytes, the manifest lists {size} (truncated or replaced)")
    found = shard_sha256(path)
    if found == path.name.split(".")[0] and sha256 and sha256 != found:  # the file is what its name says
        raise PackError(f"{path}: the manifest lists sha256 {str(sha256)[:16]}..., but the file's bytes hash to its "
                        f"name, {found[:16]}... (the manifest edited)")
    names = {path.name.split(".")[0], *((sha256,) if sha256 else ())}
    if names != {found}:
        raise PackError(f"{path}: its bytes hash to {found[:16]}..., not to the content address its name and the "
                        "manifest give (replaced or edited)")


def _rows_by_shard(manifest: Mapping[str, Any]) -> tuple[dict[str, list[str]], list[ShardDamage]]:
    by_shard: dict[str, list[str]] = {}
    damage = []
    unassigned = []
    for row_id, entry in manifest["rows"].items():
        shard = entry.get("shard") if isinstance(entry, Mapping) else None
        if not isinstance(shard, str) or not shard:
            unassigned.append(str(row_id))
        else:
            by_shard.setdefault(shard, []).append(str(row_id))
    if unassigned:
        damage.append(ShardDamage("(none)", tuple(unassigned), "rows without a shard in the manifest"))
    return by_shard, damage


def _arrays_problem(header: dict[str, Any], rows: Sequence[str], manifest: Mapping[str, Any],
                    expect: Expect) -> str | None:
    """Why a shard's tensors are not the arrays the manifest implies for its rows, or None."""
    held: dict[str, dict[str, Any]] = {}
    for key, info in header.items():
        row_id, _, name = key.rpartition("/")
        held.setdefault(row_id, {})[name] = info
    foreign = sorted(set(held) - set(manifest["rows"]))
    if foreign:
        return f"holds arrays of {len(foreign)} row(s) the manifest does not list (first: {foreign[0]!r})"
    for row_id in rows:
        wanted = expect(row_id, manifest["rows"][row_id])
        arrays = held.get(row_id, {})
        if set(arrays) != set(wanted):
            return f"row {row_id!r} has arrays {sorted(arrays)}, the manifest says {sorted(wanted)}"
        for name, (dtype, shape) in wanted.items():
            info = arrays[name]
            if info["dtype"] != dtype or tuple(info["shape"]) != tuple(shape):
                return (f"row {row_id!r}, array {name!r}: {info['dtype']} {tuple(info['shape'])}, the manifest says "
                        f"{dtype} {tuple(shape)}")
    return None


#: ``contents(shard path, the keys the manifest assigns to it)`` -> why the shard's contents are not what the
#: manifest says, or None (called after the shard's size and, with ``hashes``, its content address were checked).
Contents = Callable[[Path, Sequence[Hashable]], "str | None"]


@dataclass(frozen=True)
class PackLayout:
    """How one pack format assigns its manifest's rows to shards and reads a shard: what :func:`pack_damage` needs
    beyond the checks every pack shares (listing, file name, size, content address).

    ``assigned``: shard file name -> the keys of the rows the manifest puts in it (row ids, or (generation_id,
    sample_index) pairs); ``damage``: what the manifest itself gets wrong (rows without a shard, a key listed twice);
    ``contents``: the format's reading of one shard; ``manifest_key``: when ``contents`` depends on nothing but the
    shard's bytes and the manifest, a digest of the manifest (:func:`manifest_digest`): a shard found sound is then
    not read again while its file and the manifest are unchanged."""

    assigned: Mapping[str, Sequence[Hashable]]
    contents: Contents
    damage: Sequence[ShardDamage] = ()
    suffix: str = ".safetensors"
    folder: str = "shards"
    manifest_key: str | None = None


def manifest_digest(manifest: Mapping[str, Any]) -> str:
    """sha256 of the manifest's JSON (keys sorted): any change of it changes the digest."""
    return hashlib.sha256(json.dumps(manifest, sort_keys=True, default=str).encode("utf-8")).hexdigest()


def _safetensors_layout(manifest: Mapping[str, Any], expect: Expect) -> PackLayout:
    """The layout of a safetensors pack (``manifest["rows"]`` = ``{row_id: {"shard": name, ...}}``, tensors
    ``"<row_id>/<name>"``): each shard's header holds exactly the arrays ``expect`` says for its rows."""
    by_shard, damage = _rows_by_shard(manifest)

    def contents(path: Path, rows: Sequence[Hashable]) -> str | None:
        header, _, _ = read_header(path)
        return _arrays_problem(header, [str(r) for r in rows], manifest, expect)

    return PackLayout(by_shard, contents, tuple(damage))


def _shard_problem(path: Path, listed: Any, layout: PackLayout, rows: Sequence[Hashable], hashes: bool) -> str | None:
    """Why the shard at ``path`` (the manifest's ``listed`` entry) is not what the manifest says, or None; a shard
    found sound is remembered by its file identity and the layout's ``manifest_key`` (:data:`VERIFIED`)."""
    if not isinstance(listed, Mapping):
        return "not listed in the manifest's shards"
    if layout.manifest_key is None or not path.is_file():
        return _shard_reason(path, listed, layout, rows, hashes)
    before = path.stat()
    key = ("sound", _file_identity(path, before), layout.manifest_key, hashes)
    if VERIFIED.get(key) is not None:
        return None
    reason = _shard_reason(path, listed, layout, rows, hashes)
    if reason is None and _rememberable(path, before):
        VERIFIED.put(key, "sound")
    return reason


def _shard_reason(path: Path, listed: Mapping[str, Any], layout: PackLayout, rows: Sequence[Hashable],
                  hashes: bool) -> str | None:
    try:
        if hashes:
            verify_shard(path, sha256=listed.get("sha256"), size=listed.get("bytes"))
        elif not path.is_file():
            raise PackError(f"{path}: the shard file is missing")
        reason = layout.contents(path, rows)  # first: it says how a shard is truncated, where it can
    except PackError as error:
        return str(error).removeprefix(f"{path}: ")
    size = path.stat().st_size
    if reason is None and listed.get("bytes") is not None and size != int(listed["bytes"]):
        return f"{size} bytes, the manifest lists {listed['bytes']} (truncated or replaced)"
    return reason


def pack_damage(folder: str | Path, manifest: Mapping[str, Any], *, expect: Expect | None = None,
                layout: PackLayout | None = None, hashes: bool = True) -> list[ShardDamage]:
    """Every shard of ``folder`` (in its layout's ``shards/`` folder) that does not match ``manifest`` (module
    docstring), in the manifest's order; empty when the pack is what its manifest says.

    A safetensors pack passes ``expect``; another format its :class:`PackLayout`. ``hashes=False`` skips the
    content hash (sizes, contents, row ids, dtypes and shapes are still checked: one small read per shard); a reader
    then calls :func:`verify_shard` on each shard before its first use.
    """
    if layout is None:
        if expect is None:
            raise ValueError("pack_damage needs expect= (a safetensors pack) or layout=")  # a caller's bug
        layout = _safetensors_layout(manifest, expect)
    listing = manifest.get("shards") if isinstance(manifest.get("shards"), Mapping) else {}
    damage = list(layout.damage)
    for shard, rows in layout.assigned.items():
        if Path(shard).name != shard or not shard.endswith(layout.suffix):
            damage.append(ShardDamage(shard, tuple(rows), "not a shard file name"))
            continue
        reason = _shard_problem(Path(folder) / layout.folder / shard, listing.get(shard), layout, rows, hashes)
        if reason is not None:
            damage.append(ShardDamage(shard, tuple(rows), reason))
    return damage


def damage_message(folder: str | Path, damage: Sequence[ShardDamage], *, repair: str) -> str:
    """One line for a damaged pack: how many shards, the first one and why, and how to repair it."""
    first = damage[0]
    more = f" (and {len(damage) - 1} more shard(s))" if len(damage) > 1 else ""
    return (f"{folder}: the pack does not match its manifest: {first}{more}; {repair}")
