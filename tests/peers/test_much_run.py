"""The issue's "done when": ``much run --source sample --signals lmpolygraph:MaximumClaimProbability,
uqlm:sequence_probability,token_likelihood`` prints three rows, LM-Polygraph's with Token Likelihood's ROC-AUC."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.peers.conftest import require

require("lm_polygraph")
require("uqlm")

REPO = Path(__file__).resolve().parents[2]
SIGNALS = "lmpolygraph:MaximumClaimProbability,uqlm:sequence_probability,token_likelihood"


def _much(args, tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO),
           "HF_DATASETS_CACHE": str(tmp_path / "datasets_cache")}
    return subprocess.run([sys.executable, "-m", "much_metric", *args], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=900)


@pytest.mark.slow
def test_much_run_prints_the_peers_beside_token_likelihood(tmp_path):
    out = tmp_path / "signals"
    result = _much(["run", "--source", "sample", "--signals", SIGNALS, "--no-progress", "--bootstrap", "200",
                    "--out", str(out), "--json", str(tmp_path / "table.json")], tmp_path)
    assert result.returncode == 0, result.stderr
    printed = {}
    for label in ("Token Likelihood", "LM-Polygraph MaximumClaimProbability", "UQLM sequence_probability"):
        line = next(line for line in result.stdout.splitlines() if line.startswith(label + " "))
        printed[label] = re.findall(r"\d\.\d{3} \[", line)[0]  # the ROC-AUC column, first metric with interval
    assert printed["LM-Polygraph MaximumClaimProbability"] == printed["Token Likelihood"]
    rows = {row["signal_name"]: row for row in json.loads((tmp_path / "table.json").read_text())["results"]}
    assert list(rows) == ["token_likelihood", "lmpolygraph:MaximumClaimProbability", "uqlm:sequence_probability"]
    assert abs(rows["lmpolygraph:MaximumClaimProbability"]["roc_auc"] - rows["token_likelihood"]["roc_auc"]) < 1e-5
    assert rows["uqlm:sequence_probability"]["roc_auc"] != rows["token_likelihood"]["roc_auc"]  # length-normalised
    # Timed and written like every method: signal files and timings.json, and a rerun computes nothing.
    timings = json.loads((out / "timings.json").read_text())
    assert timings["lmpolygraph:MaximumClaimProbability"]["seconds"] > 0
    assert timings["uqlm:sequence_probability"]["n_samples"] == 606
    assert (out / "lmpolygraph:MaximumClaimProbability.parquet").is_file()


def test_a_refused_estimator_fails_before_any_work(tmp_path):
    result = _much(["run", "--source", "sample", "--signals", "token_likelihood,lmpolygraph:PTrueClaim",
                    "--no-progress"], tmp_path)
    assert result.returncode == 2
    assert "PTrueClaim needs the generating model" in result.stderr
    assert "Method" not in result.stdout  # no table: refused before computing anything
