"""The storage of an internals pack (``python -m builder internals``): its identity, manifest, shards and PCA basis.

A pack's **identity** (:func:`pack_identity`: model weights, layers, dtypes, compression, prompt, temperature, source
hash) is written once in ``manifest.json``; every later run must ask for the same (:func:`check_identity`). Shards
and the PCA basis are content-addressed safetensors files written atomically before the manifest, rewritten
atomically under the pack's lock, names them (:func:`write_shard`, :func:`write_basis`, :func:`commit_rows`): a
killed run loses at most the shard it was computing and a row is never listed twice.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from builder.errors import BuilderError
from much_dataset._version import __version__
from much_dataset.internals import BASIS, FORMAT, MANIFEST, SHARDS
from much_dataset.internals_compression import parse_compression
from much_dataset.offline_tokenizers import file_sha256

__all__ = ["IDENTITY_DEFAULTS", "pack_identity", "check_identity", "read_manifest", "new_manifest", "write_shard",
           "write_basis", "commit_rows", "repair_pack", "file_sha256", "weights_sha256"]


def weights_sha256(model: str, loaded: Any = None) -> str:
    """sha256 of the weights: of the ``.gguf`` file itself (as ``sha256sum`` prints it), of a folder's weight files
    (name and hash of each, sorted by name), or, for a hub id resolved from the local cache, of its snapshot's weight
    files; else of the loaded tensors."""
    name = model
    path = Path(name)
    files: list[Path] = []
    if path.is_file():
        return file_sha256(path)
    else:
        folder = path if path.is_dir() else None
        if folder is None:
            try:
                from huggingface_hub import snapshot_download

                folder = Path(snapshot_download(name, local_files_only=True))
            except Exception:  # noqa: BLE001 - not in the cache: hash the loaded tensors instead
                folder = None
        if folder is not None:
            files = sorted(p for p in folder.iterdir() if p.suffix in (".safetensors", ".bin", ".gguf", ".pt"))
    digest = hashlib.sha256()
    if files:
        for file in files:
            digest.update(file.name.encode() + b"\0" + file_sha256(file).encode())
        return digest.hexdigest()
    if loaded is None:
        raise BuilderError(f"{model}: no weight files found to fingerprint")
    for key, tensor in sorted(loaded.state_dict().items()):
        digest.update(key.encode() + b"\0")
        digest.update(tensor.detach().float().cpu().numpy().tobytes())
    return digest.hexdigest()


#: Identity keys newer than the first packs, and the value a manifest without them stands for.
IDENTITY_DEFAULTS = {"attention_to_self": False, "pca_fit_rows": None, "compression": "none",
                     "generation_config": None, "engine": "transformers"}


def _hidden_dtypes(options: Any) -> dict[str, str]:
    kind, _ = parse_compression(options.hidden_compression)
    if kind == "int8":
        return {"hidden": "int8", "hidden_scale": "float16"}
    return {"hidden": "float32" if kind == "pca" else options.hidden_dtype}


def pack_identity(model: str, weights: str, config: Any, options: Any, source: str) -> dict[str, Any]:
    """The keys every run into a pack must agree on (``options``: ``builder.internals.InternalsOptions``; a pack of
    an engine without attention, ``options.attention`` False, has no ``attention_to_previous`` in ``dtypes``)."""
    kind, _ = parse_compression(options.hidden_compression)
    extra: dict[str, Any] = {}
    if kind == "pca":
        extra["pca_fit_rows"] = options.pca_fit_rows
    if options.attention_to_self:
        extra["attention_to_self"] = True
    if options.generation_config:
        extra["generation_config"] = options.generation_config
    return {**extra,
        "format": FORMAT,
        "model": model,
        "weights_sha256": weights,
        "n_layers": int(config.num_hidden_layers),
        "n_heads": int(config.num_attention_heads),
        "hidden_size": int(config.hidden_size),
        "hidden_layers": list(options.hidden_layers),
        "attention_window": options.attention_window,
        "engine": getattr(options, "engine", "transformers"),
        "dtypes": {**({"attention_to_previous": "float32"} if getattr(options, "attention", True) else {}),
                   **_hidden_dtypes(options),
                   **({"attention_window": "float32"} if options.attention_window else {}),
                   **({"attention_to_self": "float32"} if options.attention_to_self else {})},
        "compression": options.hidden_compression,
        "temperature": options.temperature,
        "prompt_style": options.prompt_style,
        "brief": options.brief,
        "source_sha256": source,
    }


def read_manifest(pack: Path) -> dict[str, Any] | None:
    path = pack / MANIFEST
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError as error:  # named: a bare JSONDecodeError says neither the file nor the pack
        raise BuilderError(f"{path}: not valid JSON ({error}); the pack's manifest is damaged") from None


def write_shard(pack: Path, arrays: dict[str, np.ndarray]) -> tuple[str, int]:
    from safetensors.numpy import save

    from builder._locks import atomic_write_bytes

    payload = save({key: np.ascontiguousarray(value) for key, value in arrays.items()})
    digest = hashlib.sha256(payload).hexdigest()
    name = f"{digest}.safetensors"
    (pack / SHARDS).mkdir(parents=True, exist_ok=True)
    target = pack / SHARDS / name
    if not target.exists():  # content-addressed: an existing file of this name holds these bytes
        atomic_write_bytes(target, payload)
    return name, len(payload)


def write_basis(pack: Path, basis: dict[str, np.ndarray]) -> str:
    from safetensors.numpy import save

    from builder._locks import atomic_write_bytes

    payload = save({key: np.ascontiguousarray(value, dtype=np.float32) for key, value in basis.items()})
    name = f"{hashlib.sha256(payload).hexdigest()}.safetensors"
    target = pack / BASIS / name
    target.parent.mkdir(parents=True, exist_ok=True)
    if not target.exists():
        atomic_write_bytes(target, payload)
    return name


def new_manifest(identity: dict[str, Any]) -> dict[str, Any]:
    return {**identity, "rows": {}, "shards": {}, "failures": {}, "max_abs_diff": 0.0}


def _merge_errors(manifest: dict[str, Any], new: dict[str, dict[str, Any]], n_hidden: int) -> None:
    """Fold the new rows' hidden reconstruction errors into the manifest's ``hidden_error`` {mean, max, n_vectors}."""
    total = manifest.get("hidden_error") or {"mean": 0.0, "max": 0.0, "n_vectors": 0}
    count, mean, worst = int(total["n_vectors"]), float(total["mean"]), float(total["max"])
    for entry in new.values():
        if "hidden_error_mean" not in entry:
            continue
        vectors = int(entry["n_tokens"]) * n_hidden
        mean = (mean * count + float(entry["hidden_error_mean"]) * vectors) / max(count + vectors, 1)
        count += vectors
        worst = max(worst, float(entry["hidden_error_max"]))
    if count:
        manifest["hidden_error"] = {"mean": mean, "max": worst, "n_vectors": count}


def _record_check(manifest: dict[str, Any]) -> None:
    """The pack's ``probability_check``, from its rows' own records (``tolerance``, ``enforced``: the run that
    stored each row): the largest tolerance, ``enforced`` only if every row was, and how many rows are above it."""
    checked = [entry for entry in manifest["rows"].values() if "tolerance" in entry]
    if not checked:
        return
    tolerance = max(float(entry["tolerance"]) for entry in checked)
    above = sum(1 for entry in manifest["rows"].values() if entry.get("max_abs_diff") is not None
                and not np.isnan(entry["max_abs_diff"]) and float(entry["max_abs_diff"]) > tolerance)
    manifest["probability_check"] = {"tolerance": tolerance, "rows_above_tolerance": above,
                                     "enforced": all(bool(entry.get("enforced", True)) for entry in checked)}


def commit_rows(pack: Path, identity: dict[str, Any], stored: tuple[str, int] | None, rows: dict[str, dict[str, Any]],
                failures: dict[str, str]) -> dict[str, Any]:
    """Add one shard's rows to the manifest (under the pack's lock, atomically): rows another process stored
    meanwhile are kept as they were (a row is never listed twice). ``stored``: the shard's file name and size as
    :func:`write_shard` returns them (None when no row of the chunk was stored); the pack's ``max_abs_diff`` grows to
    the largest of the rows' own ``max_abs_diff``, and its ``probability_check`` sums up the rows' own ``tolerance``
    and ``enforced`` (the free check of the run that stored each)."""
    from builder._locks import atomic_write_text, locked

    shard, size = stored if stored is not None else (None, 0)
    diffs = [float(entry["max_abs_diff"]) for entry in rows.values()
             if entry.get("max_abs_diff") is not None and not np.isnan(entry["max_abs_diff"])]
    max_abs_diff = max(diffs) if diffs else float("nan")

    with locked(pack / MANIFEST):
        manifest = read_manifest(pack) or new_manifest(identity)
        new = {gid: entry for gid, entry in rows.items() if gid not in manifest["rows"]}
        if shard is not None and new:
            manifest["shards"][shard] = {"bytes": size, "sha256": shard.split(".")[0]}
            manifest["rows"].update(new)
            _merge_errors(manifest, new, len(manifest.get("hidden_layers") or ()))
        for gid in new:
            manifest["failures"].pop(gid, None)
        manifest["failures"].update({gid: error for gid, error in failures.items() if gid not in manifest["rows"]})
        if not np.isnan(max_abs_diff):
            manifest["max_abs_diff"] = max(float(manifest.get("max_abs_diff") or 0.0), max_abs_diff)
        first = manifest.get("source_sha256")
        manifest["sources"] = sorted({*manifest.get("sources", [first] if first else []), identity["source_sha256"]})
        _totals(manifest)
        _record_check(manifest)
        manifest["toolkit_version"] = __version__
        atomic_write_text(pack / MANIFEST, json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return manifest


def _totals(manifest: dict[str, Any]) -> None:
    manifest["n_rows"] = len(manifest["rows"])
    manifest["n_tokens"] = int(sum(entry["n_tokens"] for entry in manifest["rows"].values()))


def _value_damage(pack: Path, manifest: dict[str, Any], broken: set[str]) -> list[Any]:
    """The sound shards holding a row whose values the reader refuses (:func:`much_dataset.internals_checks.
    check_row_values`, as :func:`much_dataset.load_internals` applies them), as damage naming the first such row."""
    from much_dataset.internals import InternalsError, InternalsPack
    from much_dataset.packs import ShardDamage

    reader = InternalsPack(pack, manifest)
    by_shard: dict[str, list[str]] = {}
    for gid, entry in manifest["rows"].items():
        if entry.get("shard") not in broken:
            by_shard.setdefault(entry["shard"], []).append(gid)
    damage = []
    for shard, gids in by_shard.items():
        for gid in gids:
            try:
                reader[gid]
            except InternalsError as error:
                damage.append(ShardDamage(shard, tuple(gids), str(error)))
                break
    return damage


def repair_under_lock(pack: Path, pack_format: str, find_damage: Callable[[dict[str, Any]], list[Any]],
                      take_out: Callable[[dict[str, Any], list[Any]], None]) -> tuple[dict[str, Any] | None, list[Any]]:
    """The resume check every pack kind shares (internals, samples): under the pack's lock, read its manifest
    (None: no pack yet; another format or no ``rows``: returned as it is, nothing checked), ``find_damage(manifest)``,
    and when there is any, ``take_out(manifest, damage)`` (edits the manifest, removes files) and write the manifest
    back atomically. Returns the manifest and the damage found."""
    from builder._locks import atomic_write_text, locked

    if read_manifest(pack) is None:
        return None, []
    with locked(pack / MANIFEST):
        manifest = read_manifest(pack)
        if manifest is None or manifest.get("format") != pack_format or not isinstance(manifest.get("rows"), dict):
            return manifest, []
        damage = find_damage(manifest)
        if not damage:
            return manifest, []
        take_out(manifest, damage)
        atomic_write_text(pack / MANIFEST, json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return manifest, damage


def repair_pack(pack: Path) -> tuple[dict[str, Any] | None, list[Any]]:
    """Check the pack against its manifest (:func:`much_dataset.internals.internals_pack_damage`, content hashes
    included) and every row's values as the reader checks them, and take the rows of every damaged shard out of the
    manifest, under the pack's lock (:func:`repair_under_lock`), so that the run recomputes them; a shard file whose
    bytes do not hash to its name is removed (its name would otherwise block the recomputed shard). Returns the
    manifest (None: no pack yet) and the damage found."""
    from much_dataset.internals import InternalsError, internals_pack_damage
    from much_dataset.packs import PackError, verify_shard

    def find_damage(manifest: dict[str, Any]) -> list[Any]:
        try:
            damage = internals_pack_damage(pack, manifest, hashes=True)
        except InternalsError as error:
            raise BuilderError(str(error)) from None
        return damage + _value_damage(pack, manifest, {found.shard for found in damage})

    def take_out(manifest: dict[str, Any], damage: list[Any]) -> None:
        for found in damage:
            for gid in found.rows:
                manifest["rows"].pop(gid, None)
            manifest.get("shards", {}).pop(found.shard, None)
            path = pack / SHARDS / found.shard
            if Path(found.shard).name == found.shard and path.is_file():
                try:
                    verify_shard(path)
                except PackError:
                    path.unlink()  # not the bytes its name promises: garbage under a name a new shard may need
        _totals(manifest)
        _record_check(manifest)

    return repair_under_lock(pack, FORMAT, find_damage, take_out)


def check_identity(pack: Path, identity: dict[str, Any]) -> None:
    manifest = read_manifest(pack)
    if manifest is None:
        return
    # the model's name may differ (another path to the same file): its weights hash decides; a key a pack of an
    # earlier version lacks stands for its default (its identity had it implicitly)
    keys = set(identity) | (set(manifest) & set(IDENTITY_DEFAULTS))

    def value(source: dict[str, Any], key: str) -> Any:
        return source.get(key, IDENTITY_DEFAULTS.get(key))

    # the source file is not part of how the arrays are computed: a pack grows from several files (every language
    # of a generation config, every shard of a split), each recorded in "sources"
    differing = sorted(key for key in keys if key not in ("model", "source_sha256")
                       and value(manifest, key) != value(identity, key))
    if differing:
        details = "; ".join(f"{key}: pack has {value(manifest, key)!r}, asked {value(identity, key)!r}"
                            for key in differing)
        raise BuilderError(f"{pack / MANIFEST} was built differently ({details}); use another --out")
