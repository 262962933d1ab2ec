"""Issue 57 on the commands: ``much run`` and ``much evaluate`` print a paired Δ column against a reference method
(the best row by default, ``--baseline NAME`` otherwise), say which, write it to ``--json`` and the report, and
print AP beside PR-AUC in the first table; ranks tie where the shown values tie (the terminal leaderboard and the
board)."""

from __future__ import annotations

import json
import re

import pytest

from much_metric.cli import main


@pytest.fixture(scope="module")
def signals(tmp_path_factory):
    out = tmp_path_factory.mktemp("signals")
    assert main(["run", "--source", "sample", "--signals", "max_likelihood,token_entropy_24,token_likelihood",
                 "--bootstrap", "0", "--no-progress", "--out", str(out)]) == 0
    return out


def _header_line(printed: str, first: str) -> str:
    return next(line for line in printed.splitlines() if line.startswith(first))


def test_much_run_prints_ap_and_the_delta_column_against_the_best_row(signals, capsys):
    capsys.readouterr()
    assert main(["run", "--source", "sample", "--signals", "max_likelihood,token_entropy_24,token_likelihood",
                 "--bootstrap", "40", "--no-progress", "--out", str(signals)]) == 0
    printed = capsys.readouterr().out
    first = _header_line(printed, "Method             Segmentation")
    assert "PR-AUC" in printed and "AP" in printed.split("Operating points")[0]
    assert "Δ ROC-AUC vs ref." in printed.split("Operating points")[0]
    assert "the best row by ROC-AUC (default; --baseline NAME names another)" in " ".join(printed.split())
    assert re.search(r"Max Likelihood +.*ref\.", printed)  # the sample's best ROC-AUC of the three
    assert re.search(r"Token Entropy-24 .*[+-]0\.\d{3} \[[+-]0\.\d{3}, [+-]0\.\d{3}\] p=0\.\d{3}", printed)
    assert first


def test_much_evaluate_names_its_baseline_in_the_table_the_json_and_the_page(signals, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    capsys.readouterr()
    out, page = tmp_path / "metrics.json", tmp_path / "report.html"
    assert main(["evaluate", "--source", "sample", "--scores", str(signals), "--bootstrap", "40",
                 "--baseline", "Token Likelihood", "--json", str(out), "--report", str(page)]) == 0
    printed = capsys.readouterr().out
    assert "ref. = Token Likelihood (product), named by --baseline" in " ".join(printed.split())
    deltas = json.loads(out.read_text())["deltas"]
    assert deltas["baseline"] == "token_likelihood (product)" and deltas["chosen"] == "named"
    entropy = deltas["rows"]["token_entropy_24 (product)"]
    assert entropy["b"] == pytest.approx(deltas["rows"]["token_likelihood (product)"]["a"])
    html = page.read_text()
    assert "Δ ROC-AUC vs ref." in html and "named by --baseline" in html


def test_an_unknown_baseline_exits_2_with_a_suggestion(signals, capsys):
    capsys.readouterr()
    assert main(["evaluate", "--source", "sample", "--scores", str(signals), "--bootstrap", "0",
                 "--baseline", "max_likelihod"]) == 2
    assert "did you mean 'Max Likelihood (product)'" in " ".join(capsys.readouterr().err.split())
    assert main(["run", "--source", "sample", "--signals", "max_likelihood,token_likelihood", "--bootstrap", "0",
                 "--baseline", "token_likelihod", "--no-progress"]) == 2
    assert "did you mean 'Token Likelihood'" in " ".join(capsys.readouterr().err.split())


def test_ranks_tie_where_the_shown_values_tie():
    from much_metric.cli._evaluate_tables import format_rank
    from much_metric.report import RankedMethod, Ranking
    from much_metric.scoring.engine import shown_ranks

    assert shown_ranks([0.6234, 0.6231, 0.61, float("nan")]).tolist() == [1, 1, 3, 4]
    rows = tuple(RankedMethod(method=name, value=value, interval=None, rank=rank, rank_probability=None,
                              per_lang={}, lang_gap=float("nan"), lang_best=None, lang_worst=None, seconds=None,
                              relative_runtime=None)
                 for name, value, rank in (("a", 0.6234, 1), ("b", 0.6231, 2), ("c", 0.5, 3)))
    board = Ranking(metric="roc_auc", rows=rows, p_values=None, rank_probabilities=None, n_samples=10,
                    n_claims=20, n_resamples=0)
    lines = format_rank(board, []).splitlines()
    assert [line.split()[0] for line in lines[3:6]] == ["1", "1", "3"]


def test_the_board_ranks_tie_where_the_shown_values_tie():
    from much_leaderboard._table import table_rows

    def row(name, value):
        return {"kind": "baseline", "form": {"method": name}, "submission": name, "signal": name, "submitted": 0,
                "metrics": {"overall": {"roc_auc": value}}}

    ranked = table_rows([row("a", 0.6234), row("b", 0.6231), row("c", 0.61)], {})
    assert [r["rank"] for r in ranked] == [1, 1, 3]


def test_the_ranking_gives_each_row_its_paired_difference_to_the_first():
    import numpy as np

    from much_leaderboard._table import render_table
    from much_metric.scoring import Bootstrap, paired_bootstrap, rank_claim_scores

    rng = np.random.default_rng(0)
    sample = np.repeat(np.arange(40), 5)
    hallucinated = rng.random(200) < 0.4
    scores = {"good": hallucinated + rng.normal(0, 0.8, 200), "weak": hallucinated + rng.normal(0, 2.0, 200)}
    board = rank_claim_scores(scores, hallucinated, sample, 40, metric="roc_auc",
                              bootstrap=Bootstrap(n_resamples=200, random_state=1))
    first, second = board["rows"]
    expected = paired_bootstrap(scores[second["method"]], scores[first["method"]], hallucinated, sample, 40,
                                n_resamples=200, random_state=1)["roc_auc"]
    assert second["versus_best"]["difference"] == pytest.approx(expected["difference"])
    assert second["versus_best"]["interval"] == pytest.approx(expected["interval"])
    assert second["versus_best"]["p_value"] == pytest.approx(expected["p_value"])
    row = {"key": "s/x", "submission": "s", "signal": "x", "kind": "baseline", "method": "x", "label": "x",
           "needs": [], "metrics": {"roc_auc": 0.6}, "p_rank": 0.5, "per_lang": {}, "lang_gap": None,
           "seconds": None, "relative_runtime": None, "coverage": 1.0, "submitted": 0, "rank": 2,
           "versus_best": {"difference": -0.0123, "interval": [-0.03, 0.004], "p_value": 0.43}}
    assert "Δ #1 -0.012 p=0.43<br>[-0.030, +0.004]" in render_table([row], langs=[])
