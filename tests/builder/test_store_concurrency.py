"""JsonlStore under concurrent writers and kills: every key ends up stored exactly once, torn lines are repaired."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
import warnings
from collections import Counter
from pathlib import Path

import pytest

from builder.store import JsonlStore, read_store

ROOT = Path(__file__).resolve().parents[2]


def _start(path: Path, n_keys: int, seed: int, die: float) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tests.builder._store_worker", str(path), str(n_keys), str(seed),
                             str(die)], cwd=ROOT, stderr=subprocess.PIPE)


def _ids(path: Path) -> Counter:
    return Counter(json.loads(line)["id"] for line in path.read_text(encoding="utf-8").splitlines() if line.strip())


def test_writers_with_random_kills_store_every_row_exactly_once(tmp_path):
    path = tmp_path / "generations.jsonl"
    n_keys, rng = 150, random.Random(7)
    kills = 0
    for round_number in range(6):
        # Four writers at once; some die mid-write by themselves, the parent SIGKILLs others at random moments.
        workers = [_start(path, n_keys, rng.randrange(10**6), 0.05 if round_number < 5 else 0.0) for _ in range(4)]
        if round_number < 5:
            time.sleep(rng.uniform(0.5, 2.0))
            for worker in rng.sample(workers, 2):
                worker.send_signal(signal.SIGKILL)
                kills += 1
        for worker in workers:
            _, err = worker.communicate(timeout=120)
            assert worker.returncode in (0, -signal.SIGKILL), err.decode()
    torn_deaths = len((tmp_path / "generations.jsonl.deaths").read_text().splitlines())
    assert kills and torn_deaths  # some writers died mid-record, not only between records
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the last round's opening repairs may warn; the file must end clean
        JsonlStore(path, key="id")
    counts = _ids(path)  # every line parses: nothing torn is left
    assert sorted(counts) == [f"k{i:04d}" for i in range(n_keys)]
    assert set(counts.values()) == {1}


def test_concurrent_writers_without_kills_never_duplicate(tmp_path):
    path = tmp_path / "labels.jsonl"
    workers = [_start(path, 300, seed, 0.0) for seed in range(4)]
    for worker in workers:
        assert worker.wait(timeout=120) == 0, worker.stderr.read().decode()
    counts = _ids(path)
    assert len(counts) == 300 and set(counts.values()) == {1}


def test_a_torn_fragment_glued_to_the_next_record_is_repaired_keeping_that_record(tmp_path):
    path = tmp_path / "generations.jsonl"
    good = [{"generation_id": f"g{i}", "output": "{not: a brace}"} for i in range(4)]
    torn = json.dumps({"generation_id": "gX", "output": "cut {here"})[:25]
    text = (json.dumps(good[0]) + "\n" + torn + json.dumps(good[1]) + "\n" + json.dumps(good[2]) + "\n")
    path.write_text(text, encoding="utf-8")
    with pytest.warns(UserWarning, match=r"generations.jsonl: skipped torn record fragment\(s\) at line\(s\) \[2\]"):
        assert [r["generation_id"] for r in read_store(path)] == ["g0", "g1", "g2"]
    with pytest.warns(UserWarning, match="repaired 1 torn"):
        store = JsonlStore(path)
    assert store.done_keys() == {"g0", "g1", "g2"}
    assert store.append(good[3]) and store.append({"generation_id": "gX"})
    assert [r["generation_id"] for r in read_store(path)] == ["g0", "g1", "g2", "g3", "gX"]


def test_torn_tail_is_cut_before_the_next_append(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text('{"generation_id": "a"}\n{"generation_id": "b", "outp', encoding="utf-8")
    assert [r["generation_id"] for r in read_store(path)] == ["a"]  # a write in flight: no warning needed
    with pytest.warns(UserWarning, match=r"repaired 1 torn record fragment\(s\) at line\(s\) \[2\]"):
        store = JsonlStore(path)
    assert store.append({"generation_id": "b"})
    assert path.read_text(encoding="utf-8") == '{"generation_id": "a"}\n{"generation_id":"b"}\n'


def test_a_key_stored_by_another_process_is_not_written_again(tmp_path):
    path = tmp_path / "x.jsonl"
    first, second = JsonlStore(path), JsonlStore(path)
    assert first.append({"generation_id": "a", "by": 1})
    assert "a" not in second  # second opened before: it does not know yet
    assert second.append({"generation_id": "a", "by": 2}) is False
    assert [r["by"] for r in read_store(path)] == [1]
    assert "a" in second
    # Learnt from another writer: still a normal race (checked, then stored by the other run), not a caller bug.
    assert second.append({"generation_id": "a"}) is False
    with pytest.raises(KeyError):  # but writing one's own key twice is
        first.append({"generation_id": "a"})


def test_garbage_in_the_middle_is_still_an_error_naming_the_line(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text('{"generation_id": "a"}\nnot json at all\n{"generation_id": "b"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"x.jsonl:2: corrupt JSONL record"):
        JsonlStore(path)
