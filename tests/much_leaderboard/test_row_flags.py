"""The board's rows carry the flags ``much run`` / ``much evaluate`` print (issue #57): not above a floor (paired),
heavy ties, intervals over too few samples -- the same flags as :func:`much_metric.report.paired_deltas` on the
same signals, shown on the table with their legend and in ``GET /api/boards``."""

from __future__ import annotations

import numpy as np
import pytest

from much_leaderboard import Leaderboard
from much_leaderboard._private_pages import boards_json
from much_leaderboard._table import render_table, row_flags, table_rows
from tests.much_leaderboard._helpers import valid_archive


def _signals(dataset):
    """A good signal (max likelihood), noise (not above the floors) and a coarse one (two values: heavy ties)."""
    from much_metric.baselines import compute_signals

    ids = list(dataset["generation_id"])
    good = compute_signals(dataset, ["max_likelihood"], progress=False)["max_likelihood"].values
    rng = np.random.default_rng(7)
    good = {g: np.asarray(good[g], np.float64) for g in ids}
    return {"good": good,
            "noise": {g: rng.random(v.shape) for g, v in good.items()},
            "coarse": {g: (v > 0.5).astype(np.float64) for g, v in good.items()}}


@pytest.fixture(scope="module")
def flagged(tmp_path_factory, evaluation):
    board = Leaderboard(tmp_path_factory.mktemp("flags"), data=evaluation)
    signals = _signals(evaluation.dataset)
    for name, values in signals.items():
        outcome = board.submit(valid_archive({name: values}, name=name), {"method": name.title(), "authors": "a"})
        assert outcome.status == "accepted", outcome
    board.refresh_ranking()
    return board, signals


def test_the_boards_flags_are_much_evaluates_flags(flagged, evaluation):
    """Differential: each row's flags are those paired_deltas gives the same signals evaluated as much evaluate
    does (product aggregator, floors, the board's bootstrap)."""
    from much_metric.report import EvaluationOptions, evaluate_signals, paired_deltas

    board, signals = flagged
    table = evaluate_signals(evaluation.dataset, signals, evaluation=EvaluationOptions(
        aggregation="product", bootstrap=evaluation.bootstrap, progress=False))
    direct = paired_deltas(table, bootstrap=evaluation.bootstrap)
    ranking = board.ranking()
    for row in board.store.rows():
        key = f"{row['submission']}/{row['signal']}"
        assert ranking[key]["flags"] == direct.flags.get(f"{row['signal']} (product)", {})
    by_signal = {r["signal"]: ranking[f"{r['submission']}/{r['signal']}"]["flags"] for r in board.store.rows()}
    assert "floor" in by_signal["noise"] and "floor" not in by_signal["good"]
    assert "ties" in by_signal["coarse"] and "ties" not in by_signal["good"]


def test_the_table_and_the_api_show_the_flags_with_their_legend(flagged):
    board, _ = flagged
    stored = board.store.rows()
    rows = table_rows(stored, board.ranking())
    page = render_table(rows, langs=board.data.langs)
    for row in rows:
        cell = page.split(f'data-key="{row["key"]}"', 1)[1].split("</tr>", 1)[0]
        assert ("⚑" in cell) == bool(row["flags"])
        for text in row["flags"].values():
            assert text.replace("<", "&lt;") in cell
    assert "not above that floor" in page and "share one score" in page  # the legend of the shown flags
    public = {r["signal"]: r for r in boards_json(stored, None, None, None, board.ranking())["public"]}
    assert "floor" in public["noise"]["flags"] and "ties" in public["coarse"]["flags"]
    assert public["good"]["flags"] == {}


def test_a_filter_over_few_samples_flags_its_intervals():
    """A language or model filter shows intervals over its own samples: under MIN_INTERVAL_SAMPLES it is flagged."""
    from much_metric.report import DeltaColumn

    least = DeltaColumn.MIN_INTERVAL_SAMPLES
    few = {"roc_auc": 0.7, "n_samples": least - 1, "intervals": {"roc_auc": [0.6, 0.8]}}
    assert row_flags({"ties": "ties 40%"}, few) == {"ties": "ties 40%", "few": f"n={least - 1}"}
    assert row_flags(None, {**few, "n_samples": least}) == {}
    assert row_flags(None, {**few, "intervals": None}) == {}  # point values: nothing to over-read
    page = render_table([], langs=[])
    assert "⚑" not in page
