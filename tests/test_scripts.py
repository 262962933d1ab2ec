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
