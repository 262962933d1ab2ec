"""Submissions that need the model's internals: declared in the archive (submission.json), stored with the entry
(re-derived from the archive when re-scored), shown as what the method needs, and filtered on."""

from __future__ import annotations

import json
import shutil

import pytest

from much_leaderboard import Leaderboard
from much_leaderboard._app import _board_html
from much_leaderboard._table import render_submission, table_rows
from tests.much_leaderboard._helpers import jsonl_bytes, make_zip, sample_signal, valid_archive


def _archive(signals, name: str, internals: list[str]) -> bytes:
    return make_zip({f"{name}.jsonl": jsonl_bytes(signals, name),
                     "submission.json": json.dumps({"internals": internals}).encode()})


@pytest.fixture(scope="module")
def board(tmp_path_factory, evaluation, signals):
    board = Leaderboard(tmp_path_factory.mktemp("internals") / "store", data=evaluation)
    board.add_baselines(("token_likelihood",))
    # the form says probabilities only: the archive's declaration wins
    assert board.submit(_archive(signals, "attention_method", ["attention"]),
                        {"method": "attn", "needs": ["probabilities only"]}).status == "accepted"
    assert board.submit(_archive(sample_signal(seed=2), "probe_method", ["hidden_states", "attention"]),
                        {"method": "probe"}).status == "accepted"
    assert board.submit(valid_archive(sample_signal(seed=3), name="plain"), {"method": "plain"}).status == "accepted"
    board.refresh_ranking()
    return board


def test_the_declaration_is_stored_with_the_entry(board):
    stored = {r["signal"]: r["metrics"]["internals"] for r in board.store.rows()}
    assert stored == {"token_likelihood": [], "attention_method": ["attention"],
                      "probe_method": ["attention", "hidden_states"], "plain": []}


def test_filter_by_internals_and_the_needs_shown(board):
    rows = board.store.rows()
    needing = table_rows(rows, board.ranking(), internals=True)
    assert sorted(r["signal"] for r in needing) == ["attention_method", "probe_method"]
    by_signal = {r["signal"]: r for r in needing}
    assert by_signal["attention_method"]["needs"] == ["attention weights"]  # not "probabilities only"
    assert by_signal["probe_method"]["needs"] == ["attention weights", "hidden states"]
    assert by_signal["probe_method"]["internals"] == ["attention", "hidden_states"]
    without = table_rows(rows, board.ranking(), internals=False)
    assert sorted(r["signal"] for r in without) == ["plain", "token_likelihood"]
    assert len(table_rows(rows, board.ranking())) == 4
    # the form's "needs" filter sees the declared internals too
    assert [r["signal"] for r in table_rows(rows, board.ranking(), needs=["hidden states"])] == ["probe_method"]
    # the app's filter control (the same table, rendered)
    page = _board_html(board, "all", "ROC-AUC", ["built-in baselines", "submissions"], [], "needs internals")
    assert "attention_method" in page and "probe_method" in page and "plain" not in page
    page = _board_html(board, "all", "ROC-AUC", ["built-in baselines", "submissions"], [], "no internals")
    assert "attention_method" not in page and "plain" in page
    submission = by_signal["attention_method"]["submission"]
    assert "needs: attention weights" in render_submission(board.store, submission)


def test_a_recovered_entry_re_derives_the_declaration_from_its_archive(board, tmp_path, evaluation):
    """A pending entry (a killed process, or one pulled from the hub mirror) is re-scored from its archive: the
    declaration comes back with it, whatever the stored form said."""
    source = next(r for r in board.store.rows() if r["signal"] == "probe_method")
    data = board.store.archive_path(source["submission"]).read_bytes()
    fresh = Leaderboard(tmp_path / "store", data=evaluation)
    fresh.store.add_pending(data, {"method": "probe", "authors": "", "link": "", "needs": []})
    [outcome] = fresh.recover()
    assert outcome.status == "accepted"
    [row] = fresh.store.rows()
    assert row["metrics"]["internals"] == ["attention", "hidden_states"]
    assert [r["signal"] for r in table_rows(fresh.store.rows(), fresh.ranking(), internals=True)] == ["probe_method"]
    shutil.rmtree(tmp_path / "store")
