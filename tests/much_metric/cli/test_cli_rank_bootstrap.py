"""``much evaluate --rank`` never prints an interval, P(rank) or p-value without enough bootstrap resamples (#22):
``--bootstrap 0`` ranks by the point values alone and says why the rest is missing; 1 to 39 resamples are refused."""

from __future__ import annotations

import numpy as np
import pytest

import much_dataset
from much_dataset import schema
from much_metric.cli import main
from much_metric.report import EvaluationOptions, evaluate_signals, rank_methods
from much_metric.scoring import MIN_RANK_RESAMPLES, Bootstrap
from much_metric.signals import write_signals


@pytest.fixture(scope="module")
def sample():
    return much_dataset.load("sample", split="test")


@pytest.fixture(scope="module")
def scores(sample, tmp_path_factory):
    folder = tmp_path_factory.mktemp("signals")
    rng = np.random.default_rng(0)
    records = []
    for gid, values in zip(sample[schema.GENERATION_ID], sample[schema.LOGITS_VALUES], strict=True):
        top = np.array([v[0] for v in values])
        records.append({"generation_id": gid, "signal_name": "max_likelihood", "values": 1 - top})
        records.append({"generation_id": gid, "signal_name": "noise", "values": rng.random(len(top))})
    write_signals(folder / "signals.parquet", records)
    return folder


def test_bootstrap_0_ranks_by_point_values_without_intervals(scores, capsys, tmp_path):
    report = tmp_path / "report.html"
    assert main(["evaluate", "--source", "sample", "--scores", str(scores), "--rank", "roc_auc",
                 "--bootstrap", "0", "--report", str(report)]) == 0
    page = report.read_text()
    assert "no bootstrap: ranked by the point values" in page and "p-values" not in page
    out = capsys.readouterr().out
    board = out[out.index("leaderboard by roc_auc"):]
    assert "no bootstrap" in board and f"at least {MIN_RANK_RESAMPLES}" in board
    header = next(line for line in board.split("\n")[1:] if not line.startswith("  "))  # after the wrapped title
    assert "P(rank)" not in header and "interval" not in header and "pairwise" not in board
    label = "Max Likelihood (product)"  # the registry's label of max_likelihood, as in every table
    lines = [line for line in board.split("\n") if label in line]
    assert lines and lines[0].split()[0] == "1"  # still ranked: the informative signal first
    assert "1.00" not in lines[0].split(label)[1].split()[1:]  # no P(rank) column


@pytest.mark.parametrize("count", ["1", "2", str(MIN_RANK_RESAMPLES - 1), "-1"])
def test_too_few_resamples_are_refused_before_loading(scores, capsys, monkeypatch, count):
    def forbidden(*args, **kwargs):
        raise AssertionError("data loaded before --bootstrap was checked")

    monkeypatch.setattr(much_dataset, "load", forbidden)
    assert main(["evaluate", "--source", "sample", "--scores", str(scores), "--rank", "roc_auc",
                 "--bootstrap", count]) == 2
    err = capsys.readouterr().err
    assert err.startswith("much evaluate: error: --bootstrap") and err.count("\n") == 1
    assert f"at least {MIN_RANK_RESAMPLES}" in err


def test_rank_methods_without_resamples_gives_no_interval(sample, scores):
    from much_metric.signals import read_signals

    table = evaluate_signals(sample, read_signals(scores),
                             evaluation=EvaluationOptions(aggregation=("product",), bootstrap=None))
    board = rank_methods(table, "roc_auc", bootstrap=None)
    assert [row.rank for row in board.rows] == [1, 2]
    assert board.rows[0].method == "max_likelihood (product)"
    assert all(row.interval is None and row.rank_probability is None for row in board.rows)
    assert board.p_values is None and board.rank_probabilities is None and board.n_resamples == 0
    # the point values are those of the bootstrapped leaderboard
    full = rank_methods(table, "roc_auc", bootstrap=Bootstrap(n_resamples=MIN_RANK_RESAMPLES))
    assert [r.value for r in full.rows] == [r.value for r in board.rows]
    for count in (1, MIN_RANK_RESAMPLES - 1):
        with pytest.raises(ValueError, match=f"at least {MIN_RANK_RESAMPLES}"):
            rank_methods(table, "roc_auc", bootstrap=Bootstrap(n_resamples=count))
