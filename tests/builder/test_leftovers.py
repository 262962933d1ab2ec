"""Leftovers of killed runs (temporary copies, export folders) are removed by the next run, never a live one's."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from builder import _locks
from builder.cli import main

OLD = time.time() - 3600


def _age(path):
    os.utime(path, (OLD, OLD))
    return path


def test_clean_stale_removes_dead_writers_temporaries_only(tmp_path):
    dead_file = tmp_path / ".generations.jsonl.abc123.tmp"
    dead_file.write_text("half")
    _age(dead_file)
    (tmp_path / ".much.x1y2").mkdir()
    (tmp_path / ".much.x1y2" / "big.parquet").write_bytes(b"0" * 100)
    _age(tmp_path / ".much.x1y2")
    young = tmp_path / ".labels.jsonl.def.tmp"  # maybe just created by a writer that has not locked it yet
    young.write_text("x")
    kept = [tmp_path / "generations.jsonl", tmp_path / ".much.lock", tmp_path / "notes.tmp"]
    for path in kept:
        path.write_text("keep")
        _age(path)
    # A live writer (another process) holds its temporary's lock: it must survive.
    live = tmp_path / ".segments.jsonl.live.tmp"
    live.write_text("in progress")
    _age(live)
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, os, sys, time; fd = os.open(sys.argv[1], "
                               "os.O_RDONLY); fcntl.flock(fd, fcntl.LOCK_EX); print('locked', flush=True); "
                               "time.sleep(60)", str(live)], stdout=subprocess.PIPE)
    try:
        assert holder.stdout.readline().strip() == b"locked"
        removed = _locks.clean_stale(tmp_path, quiet=True)
    finally:
        holder.kill()
        holder.wait()
    assert sorted(p.name for p in removed) == [".generations.jsonl.abc123.tmp", ".much.x1y2"]
    assert young.exists() and live.exists() and all(p.exists() for p in kept)


def test_a_step_cleans_its_folder_first(tmp_path, capsys):
    (tmp_path / "rows").mkdir()
    leftover = tmp_path / "rows" / ".train.jsonl.k1ll3d.tmp"
    leftover.write_bytes(b"0" * 1000)
    _age(leftover)
    main(["segment", "--out", str(tmp_path)])  # fails (no generations.jsonl), but cleans up first
    assert not leftover.exists()
    assert "removed 1 leftover(s) of killed runs" in capsys.readouterr().err


def test_export_puts_back_a_folder_a_killed_export_moved_aside(tmp_path):
    from builder.export import export_folder
    from much_dataset.synthetic import make_rows

    aside = tmp_path / ".much.old"
    aside.mkdir()
    (aside / "README.md").write_text("previous export")
    rows = make_rows(6, seed=3)
    try:
        export_folder({"train": [], "test": [], "trash": []}, tmp_path / "much", card_body="x", check=False)
    except ValueError:
        pass  # nothing to publish: the folder moved aside by the killed export is back in place
    assert (tmp_path / "much" / "README.md").read_text() == "previous export" and not aside.exists()
    export_folder({"train": rows[:4], "test": rows[4:], "trash": []}, tmp_path / "much", card_body="x", check=False)
    assert (tmp_path / "much" / "README.md").read_text() != "previous export"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".much.lock", "much"]
