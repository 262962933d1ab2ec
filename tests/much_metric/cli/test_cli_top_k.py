"""``much run --top-k``, ``much run --top-k-grid`` and the cost columns (issue #48), end to end on the embedded
sample, as a user runs them."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

import much_dataset
from much_metric import score
from much_metric.baselines import resolve, token_arrays
from much_metric.baselines.registry import available
from much_metric.baselines.views import padded, top_k_view
from much_metric.cli import main


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def _run(args, capsys) -> str:
    assert main(args) == 0
    return capsys.readouterr().out


def test_top_k_scores_every_method_the_view_allows_and_lists_the_rest_with_their_need(tmp_path, capsys):
    report = tmp_path / "run.json"
    printed = _run(["run", "--source", "sample", "--top-k", "5", "--bootstrap", "0", "--no-progress", "--json",
                    str(report)], capsys)
    written = json.loads(report.read_text())
    scored = {row["signal_name"] for row in written["results"]}
    assert written["top_k"] == 5
    # every default of every registered method is either scored or listed with its need: nothing silently dropped
    defaults = {name for baseline in available().values() for name in baseline.defaults}
    notes = " ".join(printed.split("Every method that can run")[0].split())  # notes are wrapped at 120 columns
    listed = {name for name in defaults if resolve(name).display in notes}
    assert scored | listed >= defaults - {"nll"}  # NLL: scored, then left out of the product table with a note
    assert all(resolve(name).top_k <= 5 for name in scored)
    assert {"max_likelihood", "token_likelihood", "probability_margin"} <= scored
    assert "note: not scored on the top-5 view, needs top-24: " in printed
    assert "Token Entropy-24" in printed.split("needs top-24: ")[1].split("\n")[0]
    assert "needs an internals pack: RAUQ" in printed
    assert "Input view: top-5" in printed and "UQ cost/claim" in printed
    # the view gives those methods exactly their numbers on the stored data
    plain = tmp_path / "plain.json"
    _run(["run", "--source", "sample", "--signals", ",".join(sorted(scored)), "--bootstrap", "0", "--no-progress",
          "--json", str(plain)], capsys)
    drop = ("uq_seconds", "segmentation_seconds", "total_seconds", "cost")
    rows = {r["signal_name"]: {k: v for k, v in r.items() if k not in drop} for r in written["results"]}
    assert rows == {r["signal_name"]: {k: v for k, v in r.items() if k not in drop}
                    for r in json.loads(plain.read_text())["results"]}


def test_top_k_0_is_the_sampled_token_alone_and_a_named_signal_beyond_the_view_is_listed(capsys):
    printed = _run(["run", "--source", "sample", "--top-k", "0", "--signals", "token_likelihood,max_likelihood",
                    "--bootstrap", "0", "--no-progress"], capsys)
    assert "not scored on the top-0 view (the sampled token's probability alone), needs top-1: Max Likelihood" \
        in " ".join(printed.split())
    assert "\nToken Likelihood " in printed
    with pytest.raises(SystemExit):
        main(["run", "--top-k", "25"])
    assert main(["run", "--source", "sample", "--top-k", "3", "--signals", "token_entropy_24", "--no-progress"]) == 2
    assert "no signal asked for can run on the top-3 view: needs top-24" in capsys.readouterr().err


def test_the_degradation_table_with_intervals_and_its_report(tmp_path, capsys):
    report, page = tmp_path / "grid.json", tmp_path / "grid.html"
    printed = _run(["run", "--source", "sample", "--top-k-grid", "0,5", "--signals",
                    "token_likelihood,token_entropy_24", "--bootstrap", "200", "--no-progress", "--json", str(report),
                    "--report", str(page)], capsys)
    result = json.loads(report.read_text())
    assert result["top_ks"] == [0, 5, 24] and result["metrics"] == ["roc_auc", "prr"]
    likelihood, entropy = result["rows"]
    assert [c["how"] for c in likelihood["cells"]] == ["exact"] * 3
    assert all(c["deltas"]["roc_auc"] == 0 and c["intervals"]["roc_auc"] == [0, 0] for c in likelihood["cells"])
    assert [c["how"] for c in entropy["cells"]] == ["not run", "zero-filled", "exact"]
    assert entropy["cells"][0]["need"] == "needs top-1"
    # the zero-filled cell, recomputed by hand: token entropy of the padded top-5 view, scored by the metric
    data = much_dataset.load("sample", split="test")
    arrays = token_arrays(data)
    spec = resolve("token_entropy_24")
    on_view = score(arrays.split(spec.compute(padded(top_k_view(arrays, 5)), {}, {})), data["token_chunks"],
                    data["labels"], data["stopword_mask"])
    full = score(arrays.split(spec.compute(arrays, {}, {})), data["token_chunks"], data["labels"],
                 data["stopword_mask"])
    cell = entropy["cells"][1]
    assert cell["values"]["roc_auc"] == pytest.approx(on_view.roc_auc, abs=1e-12)
    assert cell["deltas"]["prr"] == pytest.approx(on_view.prr - full.prr, abs=1e-12)
    low, high = cell["intervals"]["roc_auc"]
    assert low <= cell["deltas"]["roc_auc"] <= high and low < high
    assert "ΔROC-AUC top-5" in printed and "needs top-1" in printed and "ΔPRR top-0" in printed
    html = page.read_text()
    assert "Input views: degradation" in html and html.count("data:image/png;base64,") == 1


def test_much_evaluate_prints_the_cost_each_file_records(tmp_path, capsys):
    out = tmp_path / "signals"
    _run(["run", "--source", "sample", "--signals", "max_likelihood,token_entropy_24", "--bootstrap", "0",
          "--no-progress", "--out", str(out)], capsys)
    from much_metric.signals import write_signals

    write_signals(tmp_path / "signals" / "mine.jsonl", [  # a file of the user's own: no cost recorded
        {"generation_id": g, "signal_name": "mine", "values": np.full(len(t), 0.5)}
        for g, t in zip(*much_dataset.load("sample", split="test").select_columns(["generation_id", "output_tokens"])
                        .to_dict().values(), strict=True)])
    page = tmp_path / "eval.html"
    printed = _run(["evaluate", "--source", "sample", "--scores", str(out), "--bootstrap", "0", "--report", str(page)],
                   capsys)
    # a wide table wraps into blocks; the block with the coverage holds the cost column beside it
    lines = {name: [line.rstrip() for line in printed.splitlines() if line.startswith(name + " ")]
             for name in ("Max Likelihood", "Token Entropy-24", "mine")}
    assert any(re.search(r"100\.0%\s+—(\s|$)", line) for line in lines["mine"]), lines["mine"]
    for name in ("Max Likelihood", "Token Entropy-24"):
        found = next(filter(None, (re.search(r"100\.0%\s+([0-9.]+) (ns|µs|ms)(\s|$)", line) for line in lines[name])),
                     None)
        assert found and float(found.group(1)) > 0, lines[name]
    assert "cost/claim = the wall time of computing the signal per claim" in " ".join(printed.split())
    html = page.read_text()
    assert "<h2>Cost per claim</h2>" in html and "Pareto front" in html
