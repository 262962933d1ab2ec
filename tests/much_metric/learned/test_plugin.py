"""Issue #32: the learned detectors are an in-house plugin of the baselines registry, registered through the same
entry point a third party declares; the baselines package never imports them (no cycle, hidden or not)."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

from much_metric.baselines import registry

ROOT = Path(__file__).resolve().parents[3]


def test_learned_signals_come_from_the_entry_point_declared_in_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    declared = project["entry-points"][registry.ENTRY_POINT_GROUP]
    assert declared == {"learned": "much_metric.learned.plugin:BASELINES"}
    assert registry._REGISTRY.origin("learned:{path}").startswith("entry point 'learned'")
    assert registry._REGISTRY.origin("learned_{name}").startswith("entry point 'learned'")


def test_no_module_of_the_baselines_package_imports_the_learned_package():
    """Function-level imports included: they hid the learned <-> baselines cycle before."""
    offenders = []
    for path in (ROOT / "much_metric" / "baselines").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            offenders += [f"{path.relative_to(ROOT)}:{node.lineno} {name}" for name in names
                          if name.startswith("much_metric.learned")]
    assert offenders == []
