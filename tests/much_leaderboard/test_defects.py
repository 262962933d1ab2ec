"""Issue 32's leaderboard defects, each with a test that failed before the fix: (a) a hub entry whose entry.json
is not JSON no longer stops the start; (c) no warnings filter (process-wide state) is set while scoring; (f) a
toolkit bug while re-scoring is a server error, never a rejection."""

from __future__ import annotations

import logging
import threading
import warnings

import much_metric.report
from much_leaderboard import HubMirror, Leaderboard
from tests.much_leaderboard._fake_hub import GOOD_TOKEN
from tests.much_leaderboard._helpers import sample_signal, valid_archive
from tests.much_leaderboard.test_hub import hub  # noqa: F401 -- the fake hub fixture


def test_hub_entry_json_that_is_not_json_is_skipped_with_a_reason(tmp_path, hub, evaluation, signals,  # noqa: F811
                                                                     caplog, monkeypatch):
    from much_leaderboard import start

    mirror = HubMirror("me/much-leaderboard", token=GOOD_TOKEN, endpoint=hub.endpoint, backoff=0.01)
    board = Leaderboard(tmp_path / "a", data=evaluation, mirror=mirror)
    good = board.submit(valid_archive(signals), {"method": "good"}).submission
    broken = board.submit(valid_archive(sample_signal(seed=1)), {"method": "broken"}).submission
    files = hub.repos["me/much-leaderboard"]["files"]
    files[f"submissions/{broken}/entry.json"] = b"{not json"
    monkeypatch.setenv("HF_TOKEN", GOOD_TOKEN)
    with caplog.at_level(logging.WARNING, logger="much_leaderboard"):
        restored = start(tmp_path / "fresh", n_resamples=50, baselines=False,
                         mirror=HubMirror("me/much-leaderboard", endpoint=hub.endpoint))
    restored.join()
    assert [row["submission"] for row in restored.store.rows()] == [good]
    assert f"hub entry {broken[:12]}: entry.json is not a JSON object" in caplog.text and "skipped" in caplog.text


def test_scoring_sets_no_process_wide_warnings_filter(tmp_path, evaluation, signals, monkeypatch):
    seen = []
    real = much_metric.report.evaluate_signals

    def spy(*args, **kwargs):
        seen.append(list(warnings.filters))  # what every other thread of the server sees at this moment
        return real(*args, **kwargs)

    monkeypatch.setattr(much_metric.report, "evaluate_signals", spy)
    before = list(warnings.filters)
    board = Leaderboard(tmp_path / "store", data=evaluation)
    assert board.submit(valid_archive(signals), {"method": "m"}).status == "accepted"
    assert seen and all(filters == before for filters in seen)
    assert list(warnings.filters) == before
    # a warning raised by another thread while a submission is scored is still shown
    caught = []

    def other_thread():
        with warnings.catch_warnings(record=True) as record:  # this test's own thread-local use
            warnings.simplefilter("always")
            warnings.warn("from another thread", UserWarning, stacklevel=1)
            caught.extend(record)

    thread = threading.Thread(target=other_thread)
    thread.start()
    thread.join()
    assert [str(w.message) for w in caught] == ["from another thread"]


def test_a_toolkit_bug_while_scoring_is_a_server_error_not_a_rejection(tmp_path, evaluation, signals, monkeypatch,
                                                                      caplog):
    def broken(*args, **kwargs):
        raise KeyError("claim_rows")  # a bug of the toolkit, not of the submission

    monkeypatch.setattr(much_metric.report, "evaluate_signals", broken)
    board = Leaderboard(tmp_path / "store", data=evaluation)
    with caplog.at_level(logging.ERROR, logger="much_leaderboard"):
        outcome = board.submit(valid_archive(signals), {"method": "m"})
    assert outcome.status == "error" and not outcome.message.startswith("rejected")
    assert outcome.message.startswith("server error") and "not rejected" in outcome.message
    assert "KeyError: 'claim_rows'" in caplog.text  # the traceback is logged for the maintainers
    assert "claim_rows" not in outcome.message  # internals stay in the log
    assert board.store.pending() == [outcome.submission]  # kept: re-scored at the next start
    def wrong_type(*args, **kwargs):
        raise TypeError("unsupported operand type(s)")

    monkeypatch.setattr(much_metric.report, "evaluate_signals", wrong_type)  # another kind of bug
    assert board.submit(valid_archive(sample_signal(seed=2)), {"method": "m"}).status == "error"
    # once the bug is fixed, the next start scores what was kept
    monkeypatch.undo()
    restarted = Leaderboard(tmp_path / "store", data=evaluation)
    assert [o.status for o in restarted.recover()] == ["accepted", "accepted"]
