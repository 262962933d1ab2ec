"""A claim-level method through the CLI on the embedded sample and its samples pack (the issue's case: Samples
ROUGE-1 was printed at three values by ``much evaluate --aggregator all``, one per aggregator that changed it): ``much
run`` gives it one ROC-AUC whatever ``--aggregator`` says, and ``much evaluate --aggregator all`` prints it once,
marked claim-level, with that same number."""

from __future__ import annotations

import json

import pytest

from much_metric.cli import main
from much_metric.scoring import AGGREGATORS


@pytest.fixture(scope="module")
def signals(tmp_path_factory):
    out = tmp_path_factory.mktemp("signals")
    runs = {}
    for aggregator in AGGREGATORS:  # the first computes, the others read the file back
        report = out.parent / f"{out.name}-{aggregator}.json"
        assert main(["run", "--source", "sample", "--tokenizer", "smollm2", "--samples", "sample", "--signals",
                     "sample_rouge1,token_likelihood", "--out", str(out), "--aggregator", aggregator,
                     "--bootstrap", "0", "--no-progress", "--json", str(report)]) == 0
        runs[aggregator] = {row["signal_name"]: row for row in json.loads(report.read_text())["results"]}
    return out, runs


def test_much_run_scores_a_claim_level_signal_once_whatever_the_aggregator(signals, capsys):
    out, runs = signals
    capsys.readouterr()
    assert sorted(p.name for p in out.glob("*.parquet")) == ["sample_rouge1@claim.parquet", "token_likelihood.parquet"]
    claim = {aggregator: rows["sample_rouge1@claim"] for aggregator, rows in runs.items()}
    for metric in ("roc_auc", "pr_auc", "average_precision", "prr"):
        assert len({row[metric] for row in claim.values()}) == 1, metric
    assert all(row["aggregator"] is None for row in claim.values())
    # the token-level method beside it does change with the aggregator: the runs did differ
    assert len({rows["token_likelihood"]["roc_auc"] for rows in runs.values()}) == len(AGGREGATORS)


def test_much_evaluate_aggregator_all_prints_a_claim_level_signal_once(signals, capsys, tmp_path):
    out, runs = signals
    capsys.readouterr()
    report = tmp_path / "report.html"
    assert main(["evaluate", "--source", "sample", "--scores", str(out), "--aggregator", "all",
                 "--bootstrap", "0", "--report", str(report)]) == 0
    printed = capsys.readouterr().out
    first_table = printed.split("\n\n")[0]
    rows = [line for line in first_table.splitlines() if line.startswith("Samples ROUGE-1")]
    assert len(rows) == 1, printed
    cells = rows[0].split()
    assert cells[2] == "claim-level" and cells[3] == f"{runs['product']['sample_rouge1@claim']['roc_auc']:.3f}"
    assert sum(line.startswith("Token Likelihood") for line in first_table.splitlines()) == len(AGGREGATORS)
    page = report.read_text(encoding="utf-8")  # the report: one results row, no "aggregators compared" figure
    assert page.count('<td class="name">Samples ROUGE-1</td>') == 1
    assert '<td class="name">Samples ROUGE-1</td><td>claim-level</td>' in page
    assert page.count('<td class="name">Token Likelihood</td>') == len(AGGREGATORS)
    assert "Samples ROUGE-1, all aggregators" not in page and "Token Likelihood, all aggregators" in page


def test_a_claim_level_method_written_one_value_per_token_is_refused_not_scored(tmp_path, capsys):
    """The carrier files of an older ``much run`` (a claim's value on one token, 0 elsewhere) change with the
    aggregator: ``much evaluate`` names the file and the command that writes the claim-level one."""
    import much_dataset
    from much_metric.signals import write_signals

    data = much_dataset.load("sample", split="test")
    write_signals(tmp_path / "sample_rouge1.parquet", {"sample_rouge1": {
        row["generation_id"]: [0.5] + [0.0] * (len(row["output_tokens"]) - 1) for row in data}})
    capsys.readouterr()
    assert main(["evaluate", "--source", "sample", "--scores", str(tmp_path), "--aggregator", "all",
                 "--bootstrap", "0"]) == 2
    err = capsys.readouterr().err
    assert "sample_rouge1 is a claim-level method" in err and "much run --signals sample_rouge1" in err
    assert "Samples ROUGE-1" not in capsys.readouterr().out
