"""Persistence in a hub dataset repository, against the push tests' local fake hub (real huggingface_hub client)."""

from __future__ import annotations

import json
import logging

import pytest

from much_leaderboard import HubError, HubMirror, Leaderboard
from tests.much_leaderboard._fake_hub import GOOD_TOKEN, LeaderboardHub
from tests.much_leaderboard._helpers import valid_archive


@pytest.fixture
def hub(monkeypatch):
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    with LeaderboardHub() as server:
        monkeypatch.setenv("HF_ENDPOINT", server.endpoint)
        yield server


def _mirror(hub, **kwargs) -> HubMirror:
    return HubMirror("me/much-leaderboard", token=GOOD_TOKEN, endpoint=hub.endpoint, backoff=0.01, **kwargs)


def _token_nowhere(folder, caplog, *texts):
    for path in folder.rglob("*"):
        if path.is_file():
            assert GOOD_TOKEN.encode() not in path.read_bytes(), path
    assert GOOD_TOKEN not in caplog.text
    for text in texts:
        assert GOOD_TOKEN not in text


def test_accepted_submission_is_one_commit_and_comes_back_after_restart(tmp_path, hub, evaluation, signals, caplog):
    caplog.set_level(logging.DEBUG)
    board = Leaderboard(tmp_path / "a", data=evaluation, mirror=_mirror(hub))
    outcome = board.submit(valid_archive(signals), {"method": "mirrored"})
    assert outcome.status == "accepted"
    [commit] = hub.commits
    folder = f"submissions/{outcome.submission}"
    assert set(commit["files"]) == {f"{folder}/archive.zip", f"{folder}/entry.json"}
    assert commit["files"][f"{folder}/archive.zip"] == valid_archive(signals)
    entry = json.loads(commit["files"][f"{folder}/entry.json"])
    assert entry["form"]["method"] == "mirrored" and "my_method" in entry["rows"]
    assert board.store.get(outcome.submission)["synced"] == 1
    # a fresh Space (empty disk) pulls the entry back and re-scores it: same numbers
    fresh = Leaderboard(tmp_path / "b", data=evaluation, mirror=_mirror(hub))
    assert fresh.mirror.pull(fresh.store) == [outcome.submission]
    [again] = fresh.recover()
    assert again.status == "accepted"
    assert fresh.store.rows()[0]["metrics"] == board.store.rows()[0]["metrics"]
    assert len(hub.commits) == 1  # pulled entries are not pushed back
    assert fresh.mirror.pull(fresh.store) == []
    _token_nowhere(tmp_path, caplog, repr(fresh.mirror), json.dumps(entry))


def test_failed_commits_are_retried_and_never_half_written(tmp_path, hub, evaluation, signals, caplog):
    hub.fail_commits = 2
    board = Leaderboard(tmp_path / "a", data=evaluation, mirror=_mirror(hub, retries=4))
    outcome = board.submit(valid_archive(signals), {"method": "retried"})
    assert outcome.status == "accepted"
    failed = [r for r in hub.requests if r.get("failed")]
    assert len(failed) == 2 and len(hub.commits) == 1
    assert len(hub.repos["me/much-leaderboard"]["files"]) == 2
    assert "retrying" in caplog.text
    _token_nowhere(tmp_path, caplog)


def test_hub_down_keeps_the_local_entry_and_syncs_later(tmp_path, hub, evaluation, signals, caplog):
    hub.fail_commits = 10
    board = Leaderboard(tmp_path / "a", data=evaluation, mirror=_mirror(hub, retries=2))
    outcome = board.submit(valid_archive(signals), {"method": "later"})
    assert outcome.status == "accepted" and board.store.get(outcome.submission)["synced"] == 0
    assert not hub.commits and not hub.repos["me/much-leaderboard"]["files"]  # nothing half-written
    assert "will retry at the next sync" in caplog.text
    hub.fail_commits = 0
    board.sync()
    assert len(hub.commits) == 1 and board.store.get(outcome.submission)["synced"] == 1
    board.sync()
    assert len(hub.commits) == 1
    _token_nowhere(tmp_path, caplog)


def test_refused_token_is_not_retried(tmp_path, hub, evaluation, signals):
    mirror = HubMirror("me/much-leaderboard", token="hf_revoked_secret", endpoint=hub.endpoint, backoff=0.01)
    with pytest.raises(HubError, match=r"refused the token \(HTTP 401\)") as error:
        mirror.pull(Leaderboard(tmp_path / "a", data=evaluation).store)
    assert "hf_revoked_secret" not in str(error.value)
    assert len([r for r in hub.requests if r["method"] == "GET"]) == 1


def test_tampered_archive_on_the_hub_is_skipped(tmp_path, hub, evaluation, signals):
    board = Leaderboard(tmp_path / "a", data=evaluation, mirror=_mirror(hub))
    outcome = board.submit(valid_archive(signals), {"method": "x"})
    files = hub.repos["me/much-leaderboard"]["files"]
    files[f"submissions/{outcome.submission}/archive.zip"] = valid_archive(signals, timings=9.0)
    fresh = Leaderboard(tmp_path / "b", data=evaluation, mirror=_mirror(hub))
    assert fresh.mirror.pull(fresh.store) == [] and not fresh.store.submissions()


def test_start_restores_a_space_from_the_hub(tmp_path, hub, evaluation, signals, monkeypatch):
    from much_leaderboard import start

    board = Leaderboard(tmp_path / "a", data=evaluation, mirror=_mirror(hub))
    outcome = board.submit(valid_archive(signals), {"method": "persisted"})
    monkeypatch.setenv("HF_TOKEN", GOOD_TOKEN)  # as a Space secret: never passed as an argument
    restored = start(tmp_path / "fresh-disk", n_resamples=50, baselines=False,
                     mirror=HubMirror("me/much-leaderboard", endpoint=hub.endpoint))
    restored.join()  # the server scores breakdown intervals in the background
    [row] = restored.store.rows()
    assert row["submission"] == outcome.submission and row["form"]["method"] == "persisted"
    assert row["metrics"] == board.store.rows()[0]["metrics"]
    assert len(hub.commits) == 1
