"""The private board's own SQLite file, ``<store>/private.sqlite``: rounded results and the daily quota.

Kept apart from ``leaderboard.sqlite`` on purpose: the hub mirror (:mod:`much_leaderboard._hub`) publishes the main
store's entries, never this file, and this file never holds more than the board shows -- each signal's rounded
private ROC-AUC (or why there is none), keyed by the SHA-256 of the label file it was computed with, so a server
started with another label file recomputes instead of serving stale values. ``quota`` holds one line per submission
that sent private values: its submitter (the ``authors`` field, normalised) and when.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path

__all__ = ["PrivateStore"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS results (
    submission TEXT NOT NULL, signal TEXT NOT NULL, labels_sha256 TEXT NOT NULL, value REAL, note TEXT,
    PRIMARY KEY (submission, signal, labels_sha256));
CREATE TABLE IF NOT EXISTS scored (
    submission TEXT NOT NULL, labels_sha256 TEXT NOT NULL, PRIMARY KEY (submission, labels_sha256));
CREATE TABLE IF NOT EXISTS quota (submission TEXT PRIMARY KEY, submitter TEXT NOT NULL, time REAL NOT NULL);
"""


class PrivateStore:
    """``<folder>/private.sqlite`` (one connection per call; writes serialised by a lock and SQLite's own)."""

    def __init__(self, folder: str | Path) -> None:
        self.path = Path(folder) / "private.sqlite"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        with self._write() as db:
            db.executescript(_SCHEMA)

    @contextlib.contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        db = sqlite3.connect(self.path, timeout=30)
        try:
            yield db
        finally:
            db.close()

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._lock, self._connect() as db:
            db.execute("PRAGMA journal_mode=WAL")
            with db:
                yield db

    # -- results ---------------------------------------------------------------------------------------------
    def save(self, submission: str, values: Mapping[str, float | None], labels_sha256: str, *,
             note: str | None = None) -> None:
        """Record a submission as scored with this label file, with its signals' shown values."""
        with self._write() as db:
            for signal, value in values.items():
                db.execute("INSERT OR REPLACE INTO results VALUES (?, ?, ?, ?, ?)",
                           (submission, signal, labels_sha256, value, note))
            db.execute("INSERT OR REPLACE INTO scored VALUES (?, ?)", (submission, labels_sha256))

    def results(self, labels_sha256: str) -> dict[tuple[str, str], tuple[float | None, str | None]]:
        """``{(submission, signal): (shown value, note)}`` computed with this label file."""
        with self._connect() as db:
            found = db.execute("SELECT submission, signal, value, note FROM results WHERE labels_sha256 = ?",
                               (labels_sha256,)).fetchall()
        return {(submission, signal): (value, note) for submission, signal, value, note in found}

    def scored(self, labels_sha256: str) -> set[str]:
        """Submissions already scored (or found to have no private values) with this label file."""
        with self._connect() as db:
            return {r[0] for r in db.execute("SELECT submission FROM scored WHERE labels_sha256 = ?",
                                             (labels_sha256,))}

    def forget(self, submission: str) -> None:
        """Remove a submission's results and quota line (it was refused after all)."""
        with self._write() as db:
            for table in ("results", "scored", "quota"):
                db.execute(f"DELETE FROM {table} WHERE submission = ?", (submission,))  # noqa: S608 -- fixed names

    # -- quota -----------------------------------------------------------------------------------------------
    def reserve(self, submission: str, submitter: str, now: float, *, since: float, limit: int,
                board_limit: int | None = None) -> tuple[str, float] | None:
        """Count one private submission for ``submitter`` unless it already made ``limit`` since ``since``, or all
        submitters together made ``board_limit`` (both checked and the line written in one transaction): returns None
        when reserved, else which quota is full (``"submitter"`` or ``"board"``) and the time its oldest counted
        submission leaves the window."""
        with self._write() as db:
            rows = db.execute("SELECT time, submitter FROM quota WHERE time >= ? AND submission != ? ORDER BY time",
                              (since, submission)).fetchall()
            mine = [time for time, who in rows if who == submitter]
            if len(mine) >= limit:
                return "submitter", mine[0]
            if board_limit is not None and len(rows) >= board_limit:
                return "board", rows[0][0]
            db.execute("INSERT OR REPLACE INTO quota VALUES (?, ?, ?)", (submission, submitter, now))
        return None
