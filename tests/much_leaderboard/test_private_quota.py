"""The board-wide private quota: at most ``board_daily_limit`` submissions with private-split values in any 24 hours
from all submitters together, beside the per-submitter quota (names are free to make up; this cap is not)."""

from __future__ import annotations

import copy

import pytest

from much_leaderboard import Leaderboard, PrivatePolicy, main
from much_leaderboard._private_store import PrivateStore
from tests.much_leaderboard._helpers import sample_signal, valid_archive

DAY = 24 * 3600


def test_the_board_wide_quota_counts_every_submitter_together(tmp_path, public_evaluation, private_split):
    split = copy.copy(private_split)
    split.policy = PrivatePolicy(daily_limit=1, board_daily_limit=2)
    board = Leaderboard(tmp_path / "store", data=public_evaluation)
    board.attach_private(split)
    for seed, name in ((11, "Alice"), (12, "Bob")):
        outcome = board.submit(valid_archive(sample_signal(seed=seed), name="q"),
                               {"method": f"Q {name}", "authors": name})
        assert outcome.status == "accepted", outcome.message
    third = board.submit(valid_archive(sample_signal(seed=13), name="q"), {"method": "Q Carol", "authors": "Carol"})
    assert third.status == "rejected"
    assert "at most 2 submission(s) with private-split values in 24 hours from all submitters together" in \
        third.message
    assert not any(r["form"].get("authors") == "Carol" for r in board.store.rows())  # nothing stored
    # public values only: no quota of either kind
    public_only = {gid: v for gid, v in sample_signal(seed=13)["max_likelihood"].items() if gid not in split.ids}
    assert board.submit(valid_archive({"q": public_only}, name="q"),
                        {"method": "Q Carol", "authors": "Carol"}).status == "accepted"
    # the per-submitter quota is still the first to answer for a submitter over it
    again = board.submit(valid_archive(sample_signal(seed=14), name="q"), {"method": "Q Alice", "authors": "Alice"})
    assert again.status == "rejected" and "authors 'Alice': at most 1 submission(s)" in again.message
    assert board.private.table(board.store.rows())["board_daily_limit"] == 2


def test_the_board_wide_window_slides_over_24_hours(tmp_path):
    """Differential: the store's answer equals a plain count over the last 24 hours of every submitter's lines."""
    store = PrivateStore(tmp_path)
    accepted: list[tuple[str, float]] = []
    start = 1_000_000.0
    for step in range(40):
        now = start + step * 5 * 3600  # every 5 hours, from 8 submitters in turn
        who = f"s{step % 8}"
        recent = [t for w, t in accepted if t >= now - DAY]
        mine = [t for w, t in accepted if w == who and t >= now - DAY]
        expected = ("submitter", min(mine)) if len(mine) >= 2 else ("board", min(recent)) if len(recent) >= 3 \
            else None
        assert store.reserve(f"sub{step}", who, now, since=now - DAY, limit=2, board_limit=3) == expected
        if expected is None:
            accepted.append((who, now))
    assert 0 < len(accepted) < 40


def test_the_board_wide_quota_is_a_setting(tmp_path, hidden_split, capsys):
    with pytest.raises(ValueError, match="board_daily_limit must be an integer >= 1"):
        PrivatePolicy(board_daily_limit=0)
    assert PrivatePolicy().board_daily_limit == 10
    # the documented bound (docs/leaderboard.md): 10 x 53.3 = 533 bits per day about the whole split
    policy = PrivatePolicy()
    assert round(policy.bits_per_submission(8), 1) == 53.3
    assert round(policy.bits_per_submission(8) * policy.board_daily_limit) == 533
    common = ["serve", "--check", "--bootstrap", "0", "--no-baselines", "--store", str(tmp_path / "store"), "--data",
              str(hidden_split.public), "--private-data", str(hidden_split.private), "--private-labels",
              str(hidden_split.labels)]
    assert main([*common, "--private-board-daily-limit", "0"]) == 2
    assert "board_daily_limit must be an integer >= 1, got 0" in capsys.readouterr().err
