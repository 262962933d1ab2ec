"""The issue's "done when": ``much run --source sample --signals lmpolygraph:MaximumClaimProbability,
uqlm:sequence_probability,token_likelihood --stopword-handling exclude`` prints three rows, LM-Polygraph's (a
claim-level signal) with Token Likelihood's ROC-AUC.

The command runs in-process (``much_metric.cli.main``): the peers come in through the installed ``much.baselines``
entry points either way, and the test process has already imported them."""

from __future__ import annotations

import json
import re

import pytest

from much_metric.cli import main
from tests.peers.conftest import require

require("lm_polygraph")
require("uqlm")

SIGNALS = "lmpolygraph:MaximumClaimProbability,uqlm:sequence_probability,token_likelihood"


def _much(args, tmp_path, capsys, monkeypatch) -> tuple[int, str, str]:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.slow
def test_much_run_prints_the_peers_beside_token_likelihood(tmp_path, capsys, monkeypatch):
    out = tmp_path / "signals"
    # The peers' claims are their non-stopword tokens (all of them for a claim of stopwords only): the tokens Token
    # Likelihood's claims keep under --stopword-handling exclude, so its row and MaximumClaimProbability's match.
    code, stdout, stderr = _much(["run", "--source", "sample", "--signals", SIGNALS, "--no-progress", "--bootstrap",
                                  "200", "--stopword-handling", "exclude", "--out", str(out),
                                  "--json", str(tmp_path / "table.json")], tmp_path, capsys, monkeypatch)
    assert code == 0, stderr
    printed = {}
    for label in ("Token Likelihood", "LM-Polygraph MaximumClaimProbability", "UQLM sequence_probability"):
        line = next(line for line in stdout.splitlines() if line.startswith(label + " "))
        printed[label] = re.findall(r"\d\.\d{3} \[", line)[0]  # the ROC-AUC column, first metric with interval
    assert printed["LM-Polygraph MaximumClaimProbability"] == printed["Token Likelihood"]
    rows = {row["signal_name"]: row for row in json.loads((tmp_path / "table.json").read_text())["results"]}
    # the peers' signals are claim-level: one value per claim, under <name>@claim, scored without an aggregator
    mcp, sp = "lmpolygraph:MaximumClaimProbability@claim", "uqlm:sequence_probability@claim"
    assert list(rows) == ["token_likelihood", mcp, sp]
    assert rows[mcp]["aggregator"] is None and rows["token_likelihood"]["aggregator"] == "product"
    assert abs(rows[mcp]["roc_auc"] - rows["token_likelihood"]["roc_auc"]) < 1e-5
    assert rows[sp]["roc_auc"] != rows["token_likelihood"]["roc_auc"]  # length-normalised
    # Timed and written like every method: signal files and timings.json, and a rerun computes nothing.
    timings = json.loads((out / "timings.json").read_text())
    assert timings[mcp]["seconds"] > 0
    assert timings[sp]["n_samples"] == 606
    assert (out / f"{mcp}.parquet").is_file()


def test_a_refused_estimator_fails_before_any_work(tmp_path, capsys, monkeypatch):
    code, stdout, stderr = _much(["run", "--source", "sample", "--signals", "token_likelihood,lmpolygraph:PTrueClaim",
                                  "--no-progress"], tmp_path, capsys, monkeypatch)
    assert code == 2
    assert "PTrueClaim needs the generating model" in stderr
    assert "Method" not in stdout  # no table: refused before computing anything
