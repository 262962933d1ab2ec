"""Advisory locks between builder processes, atomic writes whose temporaries can be told stale, and their cleanup.

Every lock is a POSIX ``flock`` on an open file descriptor, so the kernel drops it when its process dies, even by
SIGKILL. That gives two guarantees used across the builder:

* :func:`locked` serialises the writers of one output file (``scripts/cluster/generate.sbatch`` runs several tasks
  appending to one ``generations.jsonl``; two ``annotate`` runs may overlap on one folder);
* a temporary (``.<file>.*.tmp`` of :func:`atomic_write_bytes`, the one writer of
  :mod:`much_metric.fileio`, the export's ``.much.*`` folder) is locked by its
  writer while it exists, so :func:`clean_stale` removes exactly the ones whose writer is gone -- never one that a
  live process is still writing.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from much_metric.fileio import atomic_write_bytes, atomic_write_text, make_private_name

__all__ = ["locked", "hold", "atomic_write_bytes", "atomic_write_text", "locked_tempdir", "clean_stale", "clean_owned",
           "TEMP_SUFFIX"]

#: The random part ``tempfile`` adds to a temporary's name (``mkstemp``/``mkdtemp``: 8 characters of this set).
TEMP_SUFFIX = r"[a-z0-9_]{8}"
#: A temporary younger than this is never removed: its writer may be between creating it and locking it.
STALE_AFTER_S = 30.0


def lock_path(path: str | os.PathLike) -> Path:
    """The lock file of ``path``: a hidden empty sibling ``.<name>.lock`` (never replaced, so the lock is stable)."""
    path = Path(path)
    return path.with_name(f".{path.name}.lock")


@contextlib.contextmanager
def locked(path: str | os.PathLike, *, shared: bool = False) -> Iterator[None]:
    """Hold the advisory lock of ``path`` (exclusive unless ``shared``) for the ``with`` block."""
    target = lock_path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(target, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def hold(path: str | os.PathLike) -> int:
    """Lock ``path`` itself (a file or a folder) exclusively; returns the descriptor to ``os.close`` when done."""
    fd = os.open(path, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


@contextlib.contextmanager
def locked_tempdir(parent: Path, prefix: str) -> Iterator[Path]:
    """A new folder ``parent/<prefix>XXXX`` locked for the ``with`` block (removed on error, kept on success).

    Its mode is what a plain ``mkdir`` gives under the process umask (``mkdtemp`` makes it 0700), since a kept folder
    is renamed into place as a published output that others may need to read. The kernel applies the umask to
    ``mkdir(0o777)``: the process umask is never switched to read it (that races with other threads' files).
    """
    while True:
        tmp = Path(parent) / make_private_name(prefix)
        try:
            os.mkdir(tmp, 0o777)
            break
        except FileExistsError:  # pragma: no cover - 37**8 names
            continue
    fd = hold(tmp)
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        os.close(fd)


def _is_free(path: Path) -> bool:
    """Whether no live process holds ``path``'s lock (it is free to take)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError as error:
        if error.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            return False
        raise
    finally:
        os.close(fd)


def clean_stale(folder: str | os.PathLike, *, now: float | None = None, quiet: bool = False) -> list[Path]:
    """Remove what killed runs left in ``folder``: ``.<file>.*.tmp`` files and ``.<name>.*`` temporary folders whose
    writer is gone (their lock is free) and that are older than :data:`STALE_AFTER_S`. ``.<name>.old`` folders are
    left to the export step, which handles them under its own lock. Returns the removed paths.
    """
    folder = Path(folder)
    if not folder.is_dir():
        return []
    now = time.time() if now is None else now
    cleaned = []
    for entry in sorted(folder.iterdir()):
        name = entry.name
        if not name.startswith(".") or entry.is_symlink() or name.endswith((".lock", ".old")):
            continue
        if not ((entry.is_file() and name.endswith(".tmp")) or (entry.is_dir() and "." in name[1:])):
            continue
        try:
            if now - entry.stat().st_mtime < STALE_AFTER_S or not _is_free(entry):
                continue
        except FileNotFoundError:
            continue
        cleaned.append(entry)
    return _remove(folder, cleaned, quiet=quiet)


def _remove(folder: Path, entries: list[Path], *, quiet: bool) -> list[Path]:
    """Remove the leftovers ``entries`` of ``folder`` (files or folders) and say so unless ``quiet``."""
    for entry in entries:
        if entry.is_dir():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
    if entries and not quiet:
        print(f"builder: removed {len(entries)} leftover(s) of killed runs in {folder}: "
              + ", ".join(p.name for p in entries), file=sys.stderr)
    return entries


def clean_owned(folder: str | os.PathLike, pattern: re.Pattern[str], *, quiet: bool = False) -> list[Path]:
    """Remove the temporaries in ``folder`` whose whole name matches ``pattern`` and whose lock is free, whatever
    their age.

    Call it only while holding the lock that every creator of such names holds from before it creates one until it
    renames or removes it (the export holds its folder's lock around its ``.much.XXXXXXXX`` folder and its
    ``rows/.<split>.jsonl.XXXXXXXX.tmp`` files). Then no live writer can be between creating a temporary and locking
    it, so :func:`clean_stale`'s age rule (which left the leftovers of runs killed less than
    :data:`STALE_AFTER_S` ago) is not needed; the lock check stays as a second guard.
    """
    folder = Path(folder)
    if not folder.is_dir():
        return []
    cleaned = []
    for entry in sorted(folder.iterdir()):
        if entry.is_symlink() or not pattern.fullmatch(entry.name) or not _is_free(entry):
            continue
        cleaned.append(entry)
    return _remove(folder, cleaned, quiet=quiet)
