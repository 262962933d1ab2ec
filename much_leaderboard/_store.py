"""The leaderboard's store: one SQLite database and the accepted archives in a folder.

* ``<folder>/leaderboard.sqlite`` (WAL journal): ``submissions`` (one row per archive, keyed by the SHA-256 of its
  bytes, so the same archive submitted twice is one entry; ``status`` ``pending`` -> ``accepted``), ``rows`` (one
  row per scored signal: metrics JSON) and ``board`` (the cached ranking);
* ``<folder>/archives/<sha256>.zip``: the submitted bytes, written atomically *before* the pending row is committed,
  so a pending row always has its archive: a process killed while scoring leaves a pending row that the next start
  re-scores (:meth:`Store.pending`);
* ``<folder>/scores/<sha256>/<signal>.npz``: claim scores of accepted rows (numpy, ``allow_pickle=False``) for the
  ranking and the figures.

Every connection is opened per call (threads and processes may share the folder); writes run in ``BEGIN
IMMEDIATE`` transactions with a busy timeout.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from much_metric.fileio import atomic_write_bytes

__all__ = ["Store", "archive_id"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS submissions (
    id TEXT PRIMARY KEY, status TEXT NOT NULL, kind TEXT NOT NULL, form TEXT NOT NULL,
    submitted REAL NOT NULL, scored REAL, synced INTEGER NOT NULL DEFAULT 0, attempts INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS rows (
    submission TEXT NOT NULL, signal TEXT NOT NULL, metrics TEXT NOT NULL, PRIMARY KEY (submission, signal)
);
CREATE TABLE IF NOT EXISTS board (metric TEXT PRIMARY KEY, payload TEXT NOT NULL, version INTEGER NOT NULL);
"""


def archive_id(data: bytes) -> str:
    """The entry's key: SHA-256 of the archive bytes (hex)."""
    return hashlib.sha256(data).hexdigest()


class Store:
    """A leaderboard store in ``folder`` (created if absent)."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / "archives").mkdir(exist_ok=True)
        (self.folder / "scores").mkdir(exist_ok=True)
        self.path = self.folder / "leaderboard.sqlite"
        with self._connect() as db:
            db.execute("PRAGMA journal_mode=WAL")
            db.executescript(_SCHEMA)

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        db = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        db.row_factory = sqlite3.Row
        try:
            yield db
        finally:
            db.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._connect() as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    # -- submissions ------------------------------------------------------------------------------------------
    def archive_path(self, submission: str) -> Path:
        return self.folder / "archives" / f"{submission}.zip"

    def add_pending(self, data: bytes, form: dict[str, Any], *, kind: str = "submission", synced: bool = False
                    ) -> tuple[str, bool]:
        """Store the archive and a pending row; returns ``(id, created)`` (``created`` False: already known).
        ``synced``: the entry came from the hub mirror (not pushed again)."""
        submission = archive_id(data)
        if self.get(submission) is not None:
            return submission, False
        path = self.archive_path(submission)
        if not path.is_file():
            atomic_write_bytes(path, bytes(data))
        with self._write() as db:
            cursor = db.execute("INSERT OR IGNORE INTO submissions (id, status, kind, form, submitted, synced) VALUES "
                                "(?, 'pending', ?, ?, ?, ?)", (submission, kind, json.dumps(form), time.time(),
                                                               int(synced)))
            created = cursor.rowcount == 1
        return submission, created

    def claim(self, submission: str) -> bool:
        """Mark a pending submission as being scored by this process (counts attempts); False if not pending."""
        with self._write() as db:
            cursor = db.execute("UPDATE submissions SET attempts = attempts + 1 WHERE id = ? AND status = 'pending'",
                                (submission,))
            return cursor.rowcount == 1

    def accept(self, submission: str, rows: dict[str, dict[str, Any]], scores: dict[str, dict[str, np.ndarray]]
               ) -> None:
        """Record the scored rows (and their claim arrays) and mark the submission accepted, in one transaction."""
        folder = self.folder / "scores" / submission
        for signal, arrays in scores.items():
            import io

            buffer = io.BytesIO()
            np.savez(buffer, **arrays)
            atomic_write_bytes(folder / f"{signal}.npz", buffer.getvalue())
        with self._write() as db:
            for signal, metrics in rows.items():
                db.execute("INSERT OR REPLACE INTO rows (submission, signal, metrics) VALUES (?, ?, ?)",
                           (submission, signal, json.dumps(metrics)))
            db.execute("UPDATE submissions SET status = 'accepted', scored = ? WHERE id = ?", (time.time(), submission))

    def complete_breakdowns(self, submission: str, by: dict[str, dict[str, dict[str, Any]]]) -> None:
        """Merge breakdown metrics with intervals into the stored rows and clear ``intervals_pending``."""
        with self._write() as db:
            for signal, groups in by.items():
                row = db.execute("SELECT metrics FROM rows WHERE submission = ? AND signal = ?",
                                 (submission, signal)).fetchone()
                if row is None:
                    continue
                metrics = json.loads(row["metrics"])
                for breakdown, values in groups.items():
                    metrics.setdefault("by", {}).setdefault(breakdown, {}).update(values)
                metrics["intervals_pending"] = False
                db.execute("UPDATE rows SET metrics = ? WHERE submission = ? AND signal = ?",
                           (json.dumps(metrics), submission, signal))

    def incomplete(self) -> list[str]:
        """Accepted submissions whose breakdown intervals are still to compute (oldest first)."""
        return sorted({r["submission"] for r in self.rows() if r["metrics"].get("intervals_pending")},
                      key=lambda s: self.get(s)["submitted"])

    def discard(self, submission: str) -> None:
        """Remove a submission that failed validation against the evaluation data: nothing of it stays."""
        with self._write() as db:
            db.execute("DELETE FROM rows WHERE submission = ?", (submission,))
            db.execute("DELETE FROM submissions WHERE id = ?", (submission,))
        self.archive_path(submission).unlink(missing_ok=True)
        shutil.rmtree(self.folder / "scores" / submission, ignore_errors=True)

    def set_method(self, submission: str, method: str) -> None:
        """Rename a stored submission's method (its form's ``method``): the built-in rows' one display name."""
        with self._write() as db:
            row = db.execute("SELECT form FROM submissions WHERE id = ?", (submission,)).fetchone()
            if row is not None:
                db.execute("UPDATE submissions SET form = ? WHERE id = ?",
                           (json.dumps({**json.loads(row["form"]), "method": method}), submission))

    def mark_synced(self, submission: str) -> None:
        with self._write() as db:
            db.execute("UPDATE submissions SET synced = 1 WHERE id = ?", (submission,))

    def get(self, submission: str) -> dict[str, Any] | None:
        with self._connect() as db:
            row = db.execute("SELECT * FROM submissions WHERE id = ?", (submission,)).fetchone()
        return None if row is None else {**dict(row), "form": json.loads(row["form"])}

    def pending(self) -> list[str]:
        """Submissions stored but not yet scored (oldest first): re-scored at start."""
        with self._connect() as db:
            return [r[0] for r in db.execute("SELECT id FROM submissions WHERE status = 'pending' ORDER BY submitted")]

    def unsynced(self) -> list[str]:
        with self._connect() as db:
            return [r[0] for r in db.execute("SELECT id FROM submissions WHERE status = 'accepted' AND synced = 0 "
                                             "ORDER BY submitted")]

    def submissions(self, *, status: str | None = None) -> list[dict[str, Any]]:
        query, params = "SELECT * FROM submissions", ()
        if status is not None:
            query, params = query + " WHERE status = ?", (status,)
        with self._connect() as db:
            return [{**dict(r), "form": json.loads(r["form"])} for r in db.execute(query + " ORDER BY submitted",
                                                                                  params)]

    def rows(self) -> list[dict[str, Any]]:
        """Accepted rows: ``submission``, ``signal``, ``kind``, ``form``, ``metrics``, ``submitted``."""
        with self._connect() as db:
            found = db.execute("SELECT r.submission, r.signal, r.metrics, s.kind, s.form, s.submitted FROM rows r "
                               "JOIN submissions s ON s.id = r.submission WHERE s.status = 'accepted' "
                               "ORDER BY s.submitted, r.signal").fetchall()
        return [{"submission": r["submission"], "signal": r["signal"], "kind": r["kind"],
                 "form": json.loads(r["form"]), "metrics": json.loads(r["metrics"]), "submitted": r["submitted"]}
                for r in found]

    def scores(self, submission: str, signal: str) -> dict[str, np.ndarray]:
        with np.load(self.folder / "scores" / submission / f"{signal}.npz", allow_pickle=False) as data:
            return {key: data[key] for key in data.files}

    # -- ranking cache ----------------------------------------------------------------------------------------
    def save_board(self, metric: str, payload: dict[str, Any], version: int) -> None:
        with self._write() as db:
            db.execute("INSERT OR REPLACE INTO board (metric, payload, version) VALUES (?, ?, ?)",
                       (metric, json.dumps(payload), version))

    def board(self, metric: str) -> tuple[dict[str, Any], int] | None:
        with self._connect() as db:
            row = db.execute("SELECT payload, version FROM board WHERE metric = ?", (metric,)).fetchone()
        return None if row is None else (json.loads(row["payload"]), row["version"])

    def version(self) -> int:
        """A number that changes whenever the accepted set changes (count of accepted submissions + rows)."""
        with self._connect() as db:
            return int(db.execute("SELECT COUNT(*) FROM rows r JOIN submissions s ON s.id = r.submission "
                                  "WHERE s.status = 'accepted'").fetchone()[0])
