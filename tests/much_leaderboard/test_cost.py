"""The board's rows carry cost (issue #48): measured for what the server computes itself (its built-in baselines),
declared -- and labelled so -- for uploads (``submission.json``'s ``"cost"``, or what the submitter's ``much run
--out`` recorded)."""

from __future__ import annotations

import json

import pytest

from much_leaderboard import Leaderboard
from much_leaderboard._table import render_submission, render_table, table_rows
from tests.much_leaderboard._helpers import jsonl_bytes, make_zip, sample_signal


@pytest.fixture(scope="module")
def board(tmp_path_factory, evaluation, signals):
    board = Leaderboard(tmp_path_factory.mktemp("cost") / "store", data=evaluation)
    board.add_baselines(("token_likelihood",))
    declared = {"cost": {"declared": {"seconds_per_claim": 0.0042, "machine": "1 x A100", "note": "5 samples"}}}
    assert board.submit(make_zip({"declared.jsonl": jsonl_bytes(signals, "declared"),
                                  "submission.json": json.dumps(declared).encode()}),
                        {"method": "with cost"}).status == "accepted"
    assert board.submit(make_zip({"silent.jsonl": jsonl_bytes(sample_signal(seed=2), "silent")}),
                        {"method": "without cost"}).status == "accepted"
    board.refresh_ranking()
    return board


def test_rows_carry_measured_or_declared_cost(board):
    rows = {row["signal"]: row for row in table_rows(board.store.rows(), board.ranking())}
    measured = rows["token_likelihood"]["cost"]
    assert measured["source"] == "measured" and 0 < measured["seconds_per_claim"] < 1
    assert "CPUs" in measured["machine"]
    assert rows["declared"]["cost"] == {"seconds_per_claim": 0.0042, "machine": "1 x A100", "note": "5 samples",
                                        "source": "declared"}
    assert rows["silent"]["cost"] is None
    page = render_table(list(rows.values()), langs=board.data.langs)
    assert "cost per claim" in page and "4.2 ms/claim (declared: 1 x A100)" in page and "not declared" in page
    assert "/claim (measured: " in page
    detail = render_submission(board.store, rows["declared"]["submission"])
    assert "4.2 ms/claim (declared: 1 x A100) -- 5 samples" in detail


def test_an_upload_s_recorded_cost_is_shown_as_declared(board, tmp_path):
    """A file written by the submitter's `much run --out` records a cost: their machine, their word."""
    from much_metric.signals import COST_KEY, SignalCost, machine_record, write_signal_metadata, write_signals

    path = tmp_path / "recorded.parquet"
    write_signals(path, {"recorded": sample_signal(seed=3)["max_likelihood"]})
    write_signal_metadata(path, {COST_KEY: SignalCost(wall_seconds=1.0, cpu_seconds=1.0, n_samples=606,
                                                      n_tokens=59839, n_claims=10320,
                                                      machines=(machine_record(),)).to_dict()})
    outcome = board.submit(make_zip({"recorded.parquet": path.read_bytes()}), {"method": "recorded"})
    assert outcome.status == "accepted", outcome.message
    row = next(r for r in board.store.rows() if r["submission"] == outcome.submission)
    assert row["metrics"]["cost"]["source"] == "declared"
    assert row["metrics"]["cost"]["seconds_per_claim"] == 1.0 / 10320
    assert row["metrics"]["cost"]["note"] == "recorded by the submitter's much run"
