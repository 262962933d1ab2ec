"""Issue #43's small things on ``much evaluate``: ``--rank`` orders the metric table too; the stopword setting has
one name on the terminal and on the page (``stopword_handling``); the report says when the runtime share's generation
time is an estimate."""

from __future__ import annotations

import json
import re

import pytest

from much_metric.cli import main

pytest.importorskip("matplotlib")


@pytest.fixture(scope="module")
def signals(tmp_path_factory):
    out = tmp_path_factory.mktemp("signals")
    assert main(["run", "--source", "sample", "--signals", "max_likelihood,token_entropy_24,token_likelihood",
                 "--bootstrap", "0", "--no-progress", "--out", str(out)]) == 0
    return out


def test_rank_orders_the_metric_table_and_the_page_names_the_settings(signals, tmp_path, capsys):
    capsys.readouterr()
    report, metrics = tmp_path / "report.html", tmp_path / "metrics.json"
    assert main(["evaluate", "--source", "sample", "--scores", str(signals), "--rank", "roc_auc", "--bootstrap", "0",
                 "--report", str(report), "--json", str(metrics)]) == 0
    printed = capsys.readouterr().out
    table = printed[printed.index("\nmethod "):].strip().split("\n\n")[0]
    order = [line.split("  ")[0] for line in table.splitlines()[2:] if not line.startswith(("[", " "))]
    values = {row["signal_name"]: row["roc_auc"] for row in json.loads(metrics.read_text())["results"]}
    by_label = {"Max Likelihood": "max_likelihood", "Token Entropy-24": "token_entropy_24",
                "Token Likelihood": "token_likelihood"}
    ranked = sorted(by_label, key=lambda label: -values[by_label[label]])
    assert order == ranked and ranked != sorted(by_label)  # ranked, and not the files' (alphabetical) order
    # One name for the stopword setting: the terminal and the page both say stopword_handling.
    assert "stopword_handling=null" in printed and "stopwords=" not in printed
    page = report.read_text()
    assert "stopword_handling=null" in page and "Stopword mask" not in page
    # The runtime share's denominator is the default estimate (no --generation-time): the page says so.
    assert re.search(r"relative to an LLM generation time of [\d,]+ s, an estimate, not a measurement", page)


def test_a_given_generation_time_is_not_called_an_estimate(signals, tmp_path, capsys):
    report = tmp_path / "report.html"
    assert main(["evaluate", "--source", "sample", "--scores", str(signals), "--rank", "roc_auc", "--bootstrap", "0",
                 "--generation-time", "1234", "--report", str(report)]) == 0
    page = report.read_text()
    assert "generation time of 1,234 s (given)" in page and "an estimate" not in page
