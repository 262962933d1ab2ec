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
    result = _much(["run", "--source", "sample", "--signals", "top2_gap,probability_margin", "--bootstrap", "40",
                    "--no-progress", "--out", str(out), "--json", str(tmp_path / "table.json")], plugin_site, tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Top-2 gap (plugin)" in result.stdout
    rows = {row["signal_name"]: row for row in json.loads((tmp_path / "table.json").read_text())["results"]}
    # The plugin computes the same formula as the built-in probability margin: identical metrics and intervals.
    plugin, builtin = rows["top2_gap"], rows["probability_margin"]
    for key in ("roc_auc", "pr_auc", "average_precision", "n_claims", "intervals"):
        assert plugin[key] == builtin[key], key
    assert (out / "top2_gap.parquet").is_file()

    evaluated = _much(["evaluate", "--source", "sample", "--scores", str(out / "top2_gap.parquet"), "--bootstrap", "0"],
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


def _python(code: str, site: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO)]), "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-W", "error::RuntimeWarning", "-c", code], env=env, capture_output=True,
                          text=True, timeout=300)


_RUN_TOP2_GAP = (
    "import numpy as np\n"
    "from much_dataset import synthetic\n"
    "from much_metric.baselines import available, resolve, token_arrays\n"
    "assert 'top2_gap' in available(), sorted(available())\n"
    "arrays = token_arrays(synthetic.make_rows(3, seed=1))\n"
    "scores = resolve('top2_gap').compute(arrays, {}, {})\n"
    "top = -np.sort(-arrays.probabilities, axis=1)\n"
    "np.testing.assert_allclose(scores, 1.0 - (top[:, 0] - top[:, 1]))\n"
    "print('OK', len(scores))\n"
)


@pytest.mark.parametrize("first", ["much_plugin_example", "much_metric.baselines", "much_metric"])
def test_an_installed_plugin_works_whichever_is_imported_first(plugin_site, first):
    """The README's plugin imports ``Baseline`` from ``much_metric.baselines``; importing the plugin before the
    package used to load the registry in the middle of the plugin's own import ("partially initialized module")."""
    result = _python(f"import {first}\n" + _RUN_TOP2_GAP, plugin_site)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("OK ")


def test_a_plugin_that_uses_the_registry_while_it_is_imported_is_not_marked_broken(tmp_path_factory):
    """A plugin whose module asks the registry for something at import time triggers discovery while it is being
    imported: its own entry point is retried on the next use of the registry, not recorded as broken."""
    source = tmp_path_factory.mktemp("eager_plugin_src")
    (source / "eager_plugin").mkdir()
    (source / "eager_plugin" / "__init__.py").write_text(
        "from much_metric.baselines import Baseline, available\n\n"
        "KNOWN_AT_IMPORT = sorted(available())\n\n"
        "def _ones(arrays):\n    import numpy as np\n    return np.ones(arrays.n_tokens)\n\n"
        "ONES = Baseline(name='eager_ones', compute=_ones, description='constant 1 (test plugin)')\n")
    (source / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=68"]\nbuild-backend = "setuptools.build_meta"\n\n'
        '[project]\nname = "eager-plugin"\nversion = "0.1.0"\n\n'
        '[project.entry-points."much.baselines"]\neager_ones = "eager_plugin:ONES"\n')
    site = tmp_path_factory.mktemp("eager_plugin_site")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--no-index",
         "--target", str(site), str(source)],
        check=True, cwd=tmp_path_factory.mktemp("eager_plugin_build"),
        env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )
    code = ("import eager_plugin\n"
            "from much_metric.baselines import available, resolve\n"
            "assert 'token_entropy_{delta}' in eager_plugin.KNOWN_AT_IMPORT\n"
            "assert 'eager_ones' in available()\n"
            "print('OK', resolve('eager_ones').signal)\n")
    result = _python(code, site)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "OK eager_ones"


def test_importing_the_baselines_package_discovers_nothing():
    """Importing ``much_metric.baselines`` imports the registry (and the :class:`Baseline` definition and the resource
    table, whose loaders are imported only when a run needs them) only: no method
    module, no entry point, no numpy-heavy
    helper; the methods are imported on the first use of the registry or of a function."""
    code = ("import sys\n"
            "import much_metric.baselines as b\n"
            "print(sorted(m for m in sys.modules if m.startswith('much_metric.baselines')))\n"
            "b.token_entropy\n"
            "print('much_metric.baselines.methods.probability' in sys.modules, "
            "'much_metric.baselines.methods.ccp' in sys.modules)\n"
            "b.available()\n"
            "print('much_metric.baselines.methods.ccp' in sys.modules)\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    lines = out.stdout.splitlines()
    assert lines[0] == ("['much_metric.baselines', 'much_metric.baselines._baseline', "
                        "'much_metric.baselines.registry', 'much_metric.baselines.resource_table']")
    assert lines[1:] == ["True False", "True"]
