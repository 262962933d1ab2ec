"""Issue #54: the open-time pack check remembers each shard's sha256 by file identity, so a second open of an
unchanged pack hashes nothing -- and a cache never serves stale bytes: a file edited in place (same size, mtime set
back), replaced by a rename, or changed while it is young is hashed again."""

from __future__ import annotations

import hashlib
import os
import shutil
import threading
import time
from pathlib import Path

import pytest

from much_dataset import packs
from much_dataset.packs import PackError, verify_shard
from much_dataset.samples import SAMPLE_PACK_DIR, SamplesError, check_samples_pack, read_samples_manifest


@pytest.fixture()
def hashed(monkeypatch):
    """Every file hashed (the real hash, counted), a cache emptied first, and no racy window: the tests' files are
    seconds old at most (the racy rule has its own test)."""
    calls: list[Path] = []
    real = packs._hash_file

    def counting(path):
        calls.append(Path(path))
        return real(path)

    monkeypatch.setattr(packs, "_hash_file", counting)
    monkeypatch.setattr(packs, "RACY_SECONDS", 0.0)
    packs.VERIFIED.clear()
    yield calls
    packs.VERIFIED.clear()


def _shard(folder: Path, payload: bytes) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{hashlib.sha256(payload).hexdigest()}.parquet"
    path.write_bytes(payload)
    return path


def _settle() -> None:
    """Let the kernel's coarse timestamp clock move on (a jiffy is at most 10 ms), as it has between any two opens."""
    time.sleep(0.05)


def test_a_second_open_of_an_unchanged_pack_hashes_nothing(tmp_path, hashed):
    pack = tmp_path / "pack"
    shutil.copytree(SAMPLE_PACK_DIR, pack)
    manifest = read_samples_manifest(pack)
    check_samples_pack(pack, manifest)
    assert len(hashed) == len(manifest["shards"]) > 1
    hashed.clear()
    check_samples_pack(pack, manifest)
    assert hashed == []


def test_a_manifest_edit_is_checked_again_over_remembered_shards(tmp_path, hashed):
    pack = tmp_path / "pack"
    shutil.copytree(SAMPLE_PACK_DIR, pack)
    manifest = read_samples_manifest(pack)
    check_samples_pack(pack, manifest)
    shard = next(iter(manifest["shards"]))
    manifest["shards"][shard]["n_samples"] += 1  # the shard's bytes untouched: only the manifest lies
    with pytest.raises(SamplesError, match=shard):
        check_samples_pack(pack, manifest)


def test_a_file_edited_in_place_with_its_size_and_mtime_kept_is_hashed_again(tmp_path, hashed):
    path = _shard(tmp_path, b"the shard's bytes " * 100)
    verify_shard(path)
    stat = path.stat()
    _settle()
    with open(path, "r+b") as handle:  # same size, one byte changed, mtime set back: only the ctime says so
        handle.seek(10)
        handle.write(b"X")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert (path.stat().st_size, path.stat().st_mtime_ns) == (stat.st_size, stat.st_mtime_ns)
    with pytest.raises(PackError, match="hash to"):
        verify_shard(path)
    assert hashed.count(path) == 2


def test_a_file_replaced_by_a_rename_or_resized_under_the_same_mtime_is_hashed_again(tmp_path, hashed):
    path = _shard(tmp_path / "shards", b"a" * 1000)
    verify_shard(path)
    stat = path.stat()
    _settle()
    other = tmp_path / "other"
    other.write_bytes(b"b" * 1000)  # same size
    os.utime(other, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    os.replace(other, path)  # same path, size and mtime; another inode
    with pytest.raises(PackError, match="hash to"):
        verify_shard(path)
    _settle()
    path.write_bytes(b"a" * 999)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # same mtime, another size
    with pytest.raises(PackError, match="hash to"):
        verify_shard(path)
    assert hashed.count(path) == 3


def test_a_young_file_is_not_remembered(tmp_path, hashed, monkeypatch):
    monkeypatch.setattr(packs, "RACY_SECONDS", 60.0)  # every file of this test is younger
    path = _shard(tmp_path, b"young" * 10)
    verify_shard(path)
    verify_shard(path)
    assert hashed.count(path) == 2 and len(packs.VERIFIED) == 0


def _verdicts(files: list[Path], rounds: int = 20) -> set[tuple[str, bool]]:
    """(file name, passed) of every verification of 8 threads started together, ``rounds`` times over ``files``."""
    seen: set[tuple[str, bool]] = set()
    start = threading.Barrier(8)

    def one(path: Path) -> tuple[str, bool]:
        try:
            verify_shard(path)
        except PackError:
            return path.name, False
        return path.name, True

    def work() -> None:
        start.wait()
        found = {one(path) for _ in range(rounds) for path in files}
        with lock:
            seen.update(found)

    lock = threading.Lock()
    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return seen


def test_eight_threads_get_the_true_hash_and_see_an_edit(tmp_path, hashed):
    files = [_shard(tmp_path, f"shard {i} ".encode() * 50) for i in range(16)]
    assert _verdicts(files) == {(path.name, True) for path in files}
    assert len(hashed) < 8 * 20 * len(files) / 4  # most verifications came from the cache
    assert {packs.shard_sha256(p) for p in files} == {p.name.split(".")[0] for p in files}
    _settle()
    with open(files[0], "r+b") as handle:
        handle.write(b"Z")
    assert _verdicts(files) == {(files[0].name, False)} | {(path.name, True) for path in files[1:]}
