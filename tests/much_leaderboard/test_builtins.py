"""Issue #43: KTC, the best row of ``much run`` on the sample, is among the board's built-in baselines where its
token-neighbour statistics exist (the embedded sample ships SmolLM2's), added once; data without statistics gets
the other built-ins and no error."""

from __future__ import annotations

import datasets
import pytest

pytest.importorskip("gradio")

import much_dataset  # noqa: E402
from much_dataset import schema, synthetic  # noqa: E402
from much_leaderboard import BASELINES, EvaluationData, Leaderboard  # noqa: E402


def test_ktc_is_a_default_built_in_added_once_where_its_statistics_exist(tmp_path):
    assert "ktc" in BASELINES
    part = much_dataset.load("sample", split="test").select(range(60))  # the sample's rows: its statistics apply
    board = Leaderboard(tmp_path / "store", data=EvaluationData(dataset=part, n_resamples=50))
    (outcome,) = board.add_baselines(("ktc",))
    assert outcome.status == "accepted", outcome.message
    (row,) = board.store.rows()
    assert row["kind"] == "baseline" and row["signal"].startswith("ktc_") and "built-in" in row["form"]["method"]
    # issue 57: one name per method -- the board's KTC row is named as much run's table names it, not "KTC"
    assert row["form"]["method"] == "KTC-4-0.3 (built-in baseline)"
    assert board.add_baselines(("ktc",)) == []  # a restart adds nothing (the stored name is KTC's config name)


def test_data_without_neighbour_statistics_gets_no_ktc_and_no_error(tmp_path):
    rows = synthetic.make_rows(40, seed=1)
    data = EvaluationData(dataset=datasets.Dataset.from_list(rows, features=schema.features()), n_resamples=50)
    board = Leaderboard(tmp_path / "store", data=data)
    outcomes = board.add_baselines(("max_likelihood", "ktc"))
    assert [o.status for o in outcomes] == ["accepted"]
    assert [r["signal"] for r in board.store.rows()] == ["max_likelihood"]
