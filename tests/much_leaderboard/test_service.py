"""Load and faults: concurrent submissions, duplicates, a process killed while scoring, the ranking."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from much_leaderboard import Leaderboard, Store
from much_leaderboard._store import archive_id
from tests.much_leaderboard._helpers import make_zip, sample_signal, valid_archive

REPO = Path(__file__).resolve().parents[2]


def test_twenty_concurrent_submissions_none_lost_none_duplicated(tmp_path, evaluation, signals):
    distinct = [valid_archive(sample_signal(seed=k), name=f"method_{k}") for k in range(8)]
    bad = [make_zip({"../x.jsonl": b"{}"}), b"not a zip"]
    # 20 requests: 8 distinct archives, 8 of them sent a second time at once, 2 malicious, 2 with the same archive
    requests = [*distinct, *distinct, *bad, distinct[0], distinct[1]]
    assert len(requests) == 20
    board = Leaderboard(tmp_path / "store", data=evaluation, max_parallel=2, background=True,  # as the server
                        daily_limit=100)
    with ThreadPoolExecutor(max_workers=20) as pool:
        outcomes = list(pool.map(lambda a: board.submit(a, {"method": "m"}), requests))
    board.join()
    assert all(o.status in ("accepted", "duplicate", "rejected") and o.message for o in outcomes)
    assert sum(o.status == "rejected" for o in outcomes) == 2
    assert sum(o.status == "accepted" for o in outcomes) == 8
    accepted = {o.submission for o in outcomes if o.status == "accepted"}
    assert accepted == {archive_id(a) for a in distinct}
    # every duplicate points at an accepted entry; the store holds each archive once and nothing pending
    assert {o.submission for o in outcomes if o.status == "duplicate"} <= accepted
    store = Store(tmp_path / "store")
    assert sorted(s["id"] for s in store.submissions()) == sorted(accepted)
    assert not store.pending() and len(store.rows()) == 8
    assert sorted(p.stem for p in (tmp_path / "store" / "archives").iterdir()) == sorted(accepted)
    # once the background work is done: every breakdown has its intervals, the ranking covers every row
    assert not store.incomplete()
    assert all("intervals" in m for r in store.rows() for groups in r["metrics"]["by"].values()
               for m in groups.values())
    ranking = board.ranking()
    assert {k for k in ranking if k != "_meta"} == {f"{r['submission']}/{r['signal']}" for r in store.rows()}


def test_same_archive_twice_is_one_entry(tmp_path, evaluation, signals):
    board = Leaderboard(tmp_path / "store", data=evaluation)
    archive = valid_archive(signals)
    first = board.submit(archive, {"method": "first"})
    second = board.submit(archive, {"method": "second name, same bytes"})
    assert (first.status, second.status) == ("accepted", "duplicate")
    assert first.submission == second.submission
    [entry] = board.store.submissions()
    assert entry["form"]["method"] == "first"
    # another process opening the same folder sees the same single entry
    again = Leaderboard(tmp_path / "store", data=evaluation).submit(archive, {"method": "third"})
    assert again.status == "duplicate" and len(board.store.rows()) == 1


def test_killed_while_scoring_is_rescored_at_restart(tmp_path, evaluation, signals):
    archive = tmp_path / "submission.zip"
    archive.write_bytes(valid_archive(signals))
    folder = tmp_path / "store"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    process = subprocess.Popen([sys.executable, "-m", "tests.much_leaderboard._kill_worker", str(folder),
                                str(archive)], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if (folder / "leaderboard.sqlite").exists():
                entries = Store(folder).submissions()
                if entries and entries[0]["attempts"] == 1:
                    break  # claimed: scoring (20,000 resamples) has started
            assert process.poll() is None, process.communicate()
            time.sleep(0.05)
        else:
            raise AssertionError("the worker never started scoring")
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    store = Store(folder)
    assert store.pending() == [archive_id(archive.read_bytes())] and not store.rows()
    restarted = Leaderboard(folder, data=evaluation)
    [outcome] = restarted.recover()
    assert outcome.status == "accepted" and outcome.submission == archive_id(archive.read_bytes())
    assert not store.pending() and [r["signal"] for r in store.rows()] == ["my_method"]
    assert store.get(outcome.submission)["attempts"] == 2
    assert restarted.recover() == []  # nothing left: a second restart adds nothing


def test_seeded_baselines_are_labelled_and_not_reseeded(tmp_path, evaluation):
    board = Leaderboard(tmp_path / "store", data=evaluation)
    outcomes = board.add_baselines(("max_likelihood", "token_likelihood"))
    assert [o.status for o in outcomes] == ["accepted", "accepted"]
    rows = board.store.rows()
    assert {r["kind"] for r in rows} == {"baseline"} and {r["signal"] for r in rows} == {"max_likelihood",
                                                                                          "token_likelihood"}
    assert all("built-in baseline" in r["form"]["method"] for r in rows)
    # issue 57: the board names a method as the tables do (its display name), not by its registry name
    assert {r["form"]["method"] for r in rows} == {"Max Likelihood (built-in baseline)",
                                                   "Token Likelihood (built-in baseline)"}
    assert board.add_baselines(("max_likelihood", "token_likelihood")) == []


def test_a_store_of_an_older_server_gets_its_builtin_rows_relabelled_on_start(tmp_path, evaluation):
    """add_baselines skips the rows a store already holds; their old label ("KTC (built-in baseline)") is brought to
    the one display name on start, a submission's name is left alone."""
    board = Leaderboard(tmp_path / "store", data=evaluation)
    board.add_baselines(("max_likelihood",))
    assert board.submit(valid_archive(sample_signal(seed=5), name="mine"), {"method": "Mine"}).status == "accepted"
    builtin = next(r for r in board.store.rows() if r["kind"] == "baseline")
    board.store.set_method(builtin["submission"], "max_likelihood (built-in baseline)")  # what an older server wrote
    restarted = Leaderboard(tmp_path / "store", data=evaluation)
    assert restarted.add_baselines(("max_likelihood",)) == []  # nothing recomputed
    methods = {r["kind"]: r["form"]["method"] for r in restarted.store.rows()}
    assert methods == {"baseline": "Max Likelihood (built-in baseline)", "submission": "Mine"}
    assert restarted.store.get(builtin["submission"])["form"]["authors"] == "MUCH toolkit"


def test_ranking_matches_rank_methods_on_the_same_signals(tmp_path, evaluation, signals):
    from much_metric.report import EvaluationOptions, evaluate_signals, rank_methods
    from much_metric.scoring import Bootstrap

    board = Leaderboard(tmp_path / "store", data=evaluation)
    noisy = sample_signal(seed=3)
    board.submit(valid_archive(signals, name="a"), {"method": "a"})
    board.submit(valid_archive(noisy, name="b"), {"method": "b"})
    ranking = board.ranking()
    table = evaluate_signals(evaluation.dataset, {"a": signals["max_likelihood"], "b": noisy["max_likelihood"]},
                             evaluation=EvaluationOptions(bootstrap=None, floors=False))
    direct = rank_methods(table, "roc_auc", bootstrap=Bootstrap(n_resamples=50, random_state=0))
    by_signal = {key.split("/")[1]: value for key, value in ranking.items() if key != "_meta"}
    for row in direct.rows:
        name = row.method.split(" (")[0]
        assert by_signal[name]["rank"] == row.rank
        assert abs(by_signal[name]["rank_probability"] - row.rank_probability) < 1e-12


def test_background_intervals_left_undone_are_completed_at_restart(tmp_path, evaluation, signals):
    archive = valid_archive(signals)
    stopped = Leaderboard(tmp_path / "store", data=evaluation, background=True)
    stopped._after_accept = lambda submission: None  # the process stops before its background work runs
    outcome = stopped.submit(archive, {"method": "m"})
    assert outcome.status == "accepted" and stopped.store.incomplete() == [outcome.submission]
    [row] = stopped.store.rows()
    assert "intervals" not in row["metrics"]["by"]["lang"]["fr"] and "intervals" in row["metrics"]["overall"]
    restarted = Leaderboard(tmp_path / "store", data=evaluation)
    assert restarted.recover() == [] and not restarted.store.incomplete()
    reference = Leaderboard(tmp_path / "reference", data=evaluation)
    assert reference.submit(archive, {"method": "m"}).status == "accepted"
    completed, expected = restarted.store.rows()[0]["metrics"], reference.store.rows()[0]["metrics"]
    assert completed["by"] == expected["by"] and completed["overall"] == expected["overall"]
    assert not completed["intervals_pending"] and restarted.ranking()


def test_pending_entry_without_its_archive_is_dropped_at_restart(tmp_path, evaluation, signals):
    store = Store(tmp_path / "store")
    submission, created = store.add_pending(valid_archive(signals), {"method": "m"})
    assert created
    store.archive_path(submission).unlink()
    assert Leaderboard(tmp_path / "store", data=evaluation).recover() == []
    assert not store.submissions()
