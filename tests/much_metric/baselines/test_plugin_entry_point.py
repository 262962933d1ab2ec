"""A third-party baseline installed as a real package (pip, entry point ``much.baselines``) runs in ``much run``
exactly like a built-in: listed by ``--help``, same table, intervals and signal files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
PLUGIN = REPO / "tests" / "data" / "much_plugin_example"


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory):
    """The example plugin pip-installed into its own folder (no network: no build isolation, no dependencies)."""
    site = tmp_path_factory.mktemp("plugin_site")
    build = tmp_path_factory.mktemp("plugin_build")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--no-index",
         "--target", str(site), str(PLUGIN)],
        check=True, cwd=build, env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )
    assert list(site.glob("much_plugin_example-*.dist-info/entry_points.txt"))
    return site


def _much(args: list[str], site: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO)]), "HF_HUB_OFFLINE": "1",
           "HF_DATASETS_CACHE": str(tmp_path / "datasets_cache")}
    return subprocess.run([sys.executable, "-m", "much_metric", *args], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=600)


@pytest.mark.slow
def test_an_installed_plugin_is_listed_and_runs_like_a_builtin(plugin_site, tmp_path):
    help_text = _much(["run", "--help"], plugin_site, tmp_path)
    assert help_text.returncode == 0, help_text.stderr
    assert "top2_gap" in help_text.stdout and "example plugin" in help_text.stdout

    out = tmp_path / "signals"
    result = _much(["run", "--data", "sample", "--signals", "top2_gap,probability_margin", "--bootstrap", "30",
                    "--no-progress", "--out", str(out), "--json", str(tmp_path / "table.json")], plugin_site, tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Top-2 gap (plugin)" in result.stdout
    rows = {row["signal_name"]: row for row in json.loads((tmp_path / "table.json").read_text())["results"]}
    # The plugin computes the same formula as the built-in probability margin: identical metrics and intervals.
    plugin, builtin = rows["top2_gap"], rows["probability_margin"]
    for key in ("roc_auc", "pr_auc", "average_precision", "n_claims", "intervals"):
        assert plugin[key] == builtin[key], key
    assert (out / "top2_gap.parquet").is_file()

    evaluated = _much(["evaluate", "--data", "sample", "--scores", str(out / "top2_gap.parquet"), "--bootstrap", "0"],
                      plugin_site, tmp_path)
    assert evaluated.returncode == 0, evaluated.stderr
    assert f"{plugin['roc_auc']:.3f}" in evaluated.stdout


def test_a_plugin_that_fails_to_load_is_reported_when_asked_for(tmp_path):
    site = tmp_path / "site"
    dist = site / "broken_plugin-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[much.baselines]\nbroken_method = no_such_module:THING\n")
    code = ("from much_metric.baselines import resolve\n"
            "try:\n    resolve('broken_method')\nexcept ValueError as error:\n    print('ERR', error)\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO)])}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert "ERR" in out.stdout and "no_such_module" in out.stdout and "broken_method" in out.stdout
