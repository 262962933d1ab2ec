"""The scripts are not run by the suite (benchmarks, data makers, tools); their imports of the toolkit are.

A public name that moves (a module renamed, a name left out of an ``__all__``) must not leave a benchmark that fails
on its first line. Every ``from much_metric... / much_dataset... / builder... / much_leaderboard... import X`` in
benchmarks/, scripts/ (its data/ and tools/ folders included) and app.py must resolve against the installed code.
(tests/test_architecture.py holds them to the public surface; tests/test_repository.py checks their layout.)
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted([*(ROOT / "benchmarks").glob("*.py"), *(ROOT / "scripts").rglob("*.py")]) + [ROOT / "app.py"]
OURS = ("much_metric", "much_dataset", "builder", "much_leaderboard")


def _imports(path: Path) -> list[tuple[int, str, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and node.module.split(".")[0] in OURS:
            found.extend((node.lineno, node.module, alias.name) for alias in node.names)
    return found


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_toolkit_import_of_a_script_resolves(path):
    missing = []
    for line, module_name, name in _imports(path):
        module = importlib.import_module(module_name)
        if not hasattr(module, name):
            try:
                importlib.import_module(f"{module_name}.{name}")
            except ModuleNotFoundError:
                missing.append(f"{path.name}:{line}: from {module_name} import {name}")
    assert not missing, "\n".join(missing)


def test_the_check_sees_imports():
    assert any(module == "much_metric.baselines.registry" for _, module, _ in _imports(ROOT / "benchmarks" /
                                                                                     "bench_learned.py"))
    assert len(SCRIPTS) > 30 and ROOT / "scripts" / "data" / "make_sample.py" in SCRIPTS


def test_run_peer_tests_shows_progress_through_its_install(tmp_path):
    """Issue #43: the script printed nothing through a 54-minute install (pip -q). With a fake python3 / pip that
    record their calls: one line per stage, before the stage starts, and pip without -q (its own progress lines)."""
    import os
    import subprocess

    bin_dir, venv, calls = tmp_path / "bin", tmp_path / "venv", tmp_path / "calls.txt"
    bin_dir.mkdir()
    fake_pip = f'#!/bin/sh\necho "pip $*" >> {calls}\necho "Collecting fake-package"\n'
    fake_python = f'#!/bin/sh\necho "python $*" >> {calls}\n'
    (bin_dir / "python3").write_text(
        f'#!/bin/sh\nmkdir -p "$3/bin"\nprintf %s \'{fake_pip}\' > "$3/bin/pip"\n'
        f'printf %s \'{fake_python}\' > "$3/bin/python"\nchmod +x "$3/bin/pip" "$3/bin/python"\n')
    (bin_dir / "python3").chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", VENV=str(venv),
               MUCH_WHEEL_CACHE=str(tmp_path / "wheels"))  # an empty wheel cache: the build from the index
    done = subprocess.run(["bash", str(ROOT / "scripts" / "run_peer_tests.sh")], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    stages = [line for line in lines if line.startswith("run_peer_tests: [")]
    assert [s.split("] ", 1)[1].split(" ")[0] for s in stages] == ["creating", "installing", "installing", "installed"]
    assert lines.index(stages[1]) < lines.index("Collecting fake-package")  # said before pip runs, pip's lines shown
    pip_calls = [line for line in calls.read_text().splitlines() if line.startswith("pip install")]
    assert len(pip_calls) == 2 and not any(" -q" in call for call in pip_calls), pip_calls
    assert "stage peers-tests:" in done.stdout
