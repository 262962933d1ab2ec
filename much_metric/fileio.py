"""Atomic file writes shared by the metric, the baselines, the CLI and the builder.

A reader never sees half a file: data goes to a temporary file in the same folder, is fsynced, then renamed over
the target with ``os.replace`` (atomic on POSIX and Windows).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["atomic_write_bytes", "atomic_write_text"]


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically (parent folders are created)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        # mkstemp creates 0600 files; give the result the permissions a plain open() would.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Replace ``path`` with ``text`` (UTF-8) atomically."""
    atomic_write_bytes(path, text.encode("utf-8"))
