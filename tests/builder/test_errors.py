"""Builder helpers raise; only builder.cli.main prints ``builder <step>: error: ...`` and returns 2."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from builder import errors
from builder.cli import main

BUILDER = Path(__file__).resolve().parents[2] / "builder"


def test_no_systemexit_outside_the_entry_point():
    offenders = []
    for path in sorted(BUILDER.glob("*.py")):
        if path.name in ("cli.py", "__main__.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Name) and node.id == "SystemExit":
                offenders.append(f"{path.name}:{node.lineno}")
    assert offenders == []


@pytest.mark.parametrize(("step", "made_by"), [("segment", "generate"), ("context", "generate"),
                                                ("annotate", "generate"), ("export", "generate")])
def test_out_typo_is_an_error_naming_the_missing_input(tmp_path, capsys, step, made_by):
    typo = tmp_path / "ouput"
    assert main([step, "--out", str(typo)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"builder {step}: error: missing input {typo / 'generations.jsonl'}")
    assert "check --out" in err and f"python -m builder {made_by}" in err
    assert not typo.exists()  # nothing created under the typo


def test_builder_error_is_a_value_error():
    assert issubclass(errors.BuilderError, ValueError)
    assert issubclass(errors.AuthenticationError, errors.BuilderError)
