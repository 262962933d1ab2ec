"""Parameter checks go through ``much_dataset.params`` (issue 56): the hand-written number checks
(``isinstance(v, bool) or not isinstance(v, int) ...``, the pattern ``check_param`` replaces) and the bare
``raise TypeError`` of the three packages are counted and held -- a new one fails here; replace it with
``check_param``/``InvalidParameterError`` (a ``ValueError``: the CLI reports it as the user's mistake, exit 2),
then lower the ceiling."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("much_dataset", "much_metric", "builder")
#: The one place the pattern is written: the constraints themselves.
ALLOWED = {"much_dataset/params.py"}
#: Ceilings at today's counts (before this round: 37 such checks and 47 bare TypeErrors by this counter).
MAX_HAND_WRITTEN_CHECKS = 27
MAX_BARE_TYPE_ERRORS = 31


def _isinstance_of(node: ast.AST, kind: str | None = None) -> bool:
    return (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance" and len(node.args) == 2
            and (kind is None or getattr(node.args[1], "id", None) == kind))


def _files() -> list[tuple[str, ast.AST]]:
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if relative not in ALLOWED:
                found.append((relative, ast.parse(path.read_text(encoding="utf-8"))))
    return found


def hand_written_checks() -> list[str]:
    """``isinstance(x, bool) or not isinstance(x, ...)``: a number check written by hand, by place."""
    return [f"{name}:{node.lineno}" for name, tree in _files() for node in ast.walk(tree)
            if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or)
            and any(_isinstance_of(value, "bool") for value in node.values)
            and any(isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.Not) and _isinstance_of(value.operand)
                    for value in node.values)]


def bare_type_errors() -> list[str]:
    """``raise TypeError(...)``: reported by the commands as a bug (exit 1) even when the user's value is wrong."""
    return [f"{name}:{node.lineno}" for name, tree in _files() for node in ast.walk(tree)
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call)
            and getattr(node.exc.func, "id", None) == "TypeError"]


def test_hand_written_parameter_checks_do_not_grow():
    found = hand_written_checks()
    assert len(found) <= MAX_HAND_WRITTEN_CHECKS, (
        f"{len(found)} hand-written number checks (ceiling {MAX_HAND_WRITTEN_CHECKS}); use much_dataset.params."
        f"check_param: {found}")


def test_bare_type_errors_do_not_grow():
    found = bare_type_errors()
    assert len(found) <= MAX_BARE_TYPE_ERRORS, (
        f"{len(found)} bare `raise TypeError` (ceiling {MAX_BARE_TYPE_ERRORS}); a user's wrong value raises "
        f"much_dataset.params.InvalidParameterError: {found}")


def test_the_counter_sees_the_pattern():
    tree = ast.parse("if isinstance(n, bool) or not isinstance(n, int) or n < 1:\n    raise TypeError('n')\n")
    assert [node for node in ast.walk(tree) if isinstance(node, ast.BoolOp)
            and any(_isinstance_of(v, "bool") for v in node.values)]
