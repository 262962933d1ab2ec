"""A killed ``python -m builder export`` leaves nothing behind once the next run has run: its ``.much.XXXXXXXX``
folder and ``rows/.<split>.jsonl.XXXXXXXX.tmp`` files are removed by the next export whatever their age (every such
name is created under the export's lock, so one whose lock is free belongs to a dead export), and the result equals
an uninterrupted run's, byte for byte."""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from builder import _locks
from tests.builder.test_export import _artifacts

REPO = Path(__file__).resolve().parents[2]


def _export(out: Path) -> list[str]:
    return [sys.executable, "-m", "builder", "export", "--out", str(out)]


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "HF_DATASETS_CACHE": str(tmp_path / "datasets_cache"),
            "HF_HUB_OFFLINE": "1"}


def _hidden(out: Path) -> list[str]:
    """Every hidden entry under ``out`` except the (empty, permanent) lock files."""
    return sorted(str(p.relative_to(out)) for p in out.rglob(".*") if not p.name.endswith(".lock"))


def _published(out: Path) -> dict[str, bytes]:
    files = [*(out / "rows").glob("*.jsonl"), *(out / "much").rglob("*.parquet")]
    return {str(p.relative_to(out)): p.read_bytes() for p in files}


@pytest.mark.slow
def test_killed_exports_leave_no_temporary_and_the_next_run_matches_an_uninterrupted_one(tmp_path):
    reference = tmp_path / "reference"
    reference.mkdir()
    _artifacts(reference)
    start = time.perf_counter()
    subprocess.run(_export(reference), env=_env(tmp_path), check=True, capture_output=True)
    full = time.perf_counter() - start

    out = tmp_path / "killed"
    out.mkdir()
    _artifacts(out)
    rng = random.Random(14)
    left_behind = set()
    for _ in range(10):
        process = subprocess.Popen(_export(out), env=_env(tmp_path), stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.2, full))
        process.send_signal(signal.SIGKILL)
        process.wait()
        left_behind.update(_hidden(out))
    # The kills did leave temporaries (otherwise this test would prove nothing) ...
    assert any(re.fullmatch(r"\.much\.\w{8}", name) for name in left_behind), left_behind
    # ... and one normal run, right after the last kill (younger than clean_stale's age rule), removes them all.
    result = subprocess.run(_export(out), env=_env(tmp_path), capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert _hidden(out) == []
    assert _published(out) == _published(reference)


def _hold(path: Path) -> subprocess.Popen:
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, os, sys, time; fd = os.open(sys.argv[1], "
                               "os.O_RDONLY); fcntl.flock(fd, fcntl.LOCK_EX); print('locked', flush=True); "
                               "time.sleep(60)", str(path)], stdout=subprocess.PIPE)
    assert holder.stdout.readline().strip() == b"locked"
    return holder


def test_clean_owned_removes_only_its_own_free_temporaries_whatever_their_age(tmp_path):
    dead = tmp_path / ".much.k1ll3d_x"
    dead.mkdir()
    (dead / "train-00000.parquet").write_bytes(b"0" * 100)  # just created: clean_stale's age rule keeps it
    dead_rows = tmp_path / ".train.jsonl.abcd1234.tmp"
    dead_rows.write_text("half")
    live = tmp_path / ".much.l1ve0000"  # held by another process: a live writer
    live.mkdir()
    kept = [tmp_path / ".much.old", tmp_path / ".much.v2.abcd1234", tmp_path / ".much.lock", tmp_path / "much",
            tmp_path / ".much.short"]
    for path in kept:
        path.mkdir()
    pattern = re.compile(rf"\.much\.{_locks.TEMP_SUFFIX}|\.train\.jsonl\.{_locks.TEMP_SUFFIX}\.tmp")
    assert _locks.clean_stale(tmp_path, quiet=True) == []  # too young for the age rule
    holder = _hold(live)
    try:
        removed = _locks.clean_owned(tmp_path, pattern, quiet=True)
    finally:
        holder.kill()
        holder.wait()
    assert sorted(p.name for p in removed) == [".much.k1ll3d_x", ".train.jsonl.abcd1234.tmp"]
    assert live.exists() and all(path.exists() for path in kept)


def test_an_export_waits_for_a_running_one_and_keeps_its_temporary(tmp_path):
    """A second export of the same folder blocks on the folder's lock while the first runs, so it never removes the
    temporary folder the first one is writing."""
    from builder.export import export_folder
    from much_dataset.synthetic import make_rows

    lock = _locks.lock_path(tmp_path / "much")
    lock.touch()
    holder = _hold(lock)  # a running export holds the folder's lock ...
    writing = tmp_path / ".much.wr1t1ng0"
    writing.mkdir()  # ... and writes this folder
    rows = make_rows(6, seed=3)
    result = {}
    import threading

    thread = threading.Thread(target=lambda: result.update(
        sizes=export_folder({"train": rows[:4], "test": rows[4:], "trash": []}, tmp_path / "much", card_body="x",
                            check=False)))
    thread.start()
    try:
        thread.join(1.0)
        assert thread.is_alive() and writing.exists()
    finally:
        holder.kill()
        holder.wait()
    thread.join(60)
    # The first export is gone (killed): the second now owns the lock and removes what the dead one left.
    assert not thread.is_alive() and result["sizes"]
    assert not writing.exists() and (tmp_path / "much" / "README.md").is_file()
