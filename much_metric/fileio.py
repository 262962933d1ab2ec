"""Atomic file writes shared by the metric, the baselines, the CLI and the builder.

A reader never sees half a file: data goes to a temporary file ``.<name>.XXXXXXXX.tmp`` in the same folder, is
fsynced, then renamed over the target with ``os.replace`` (atomic on POSIX and Windows). On POSIX the temporary is
locked (``flock``) by its writer until it is renamed, so a cleaner (``builder/_locks.clean_stale``) can tell the
leftover of a killed writer (lock free) from a temporary that a live process is still writing.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no advisory locks, the temporary is only renamed
    fcntl = None

__all__ = ["atomic_write_bytes", "atomic_write_text"]


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically (parent folders are created)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        # mkstemp creates 0600 files; give the result the permissions a plain open() would.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
            if fcntl is not None:
                os.replace(tmp, path)  # still locked: a cleaner never sees an unlocked temporary of a live writer
        if fcntl is None:  # pragma: no cover - Windows cannot rename an open file
            os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Replace ``path`` with ``text`` (UTF-8) atomically."""
    atomic_write_bytes(path, text.encode("utf-8"))
