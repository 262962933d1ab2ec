"""``python -m builder --help``: each step's line is the first sentence of its module docstring, whole (issue #43:
the lines were cut at the end of the docstring's first line, mid-sentence: "collect the MUCH questions from
Mu-SHROOM (...) into")."""

from __future__ import annotations

import importlib
import re

from builder.cli import STEPS, build_parser, step_summary


def test_every_step_line_is_a_whole_first_sentence():
    parser = build_parser()
    (subparsers,) = [action for action in parser._actions if action.choices and "questions" in action.choices]
    helps = {choice.dest: choice.help for choice in subparsers._choices_actions}
    assert set(helps) == set(STEPS)
    for step, module in STEPS.items():
        doc = importlib.import_module(f"builder.{module}").__doc__
        first = re.sub(r"``([^`]+)``", r"\1", " ".join(doc.strip().split("\n\n")[0].split()))
        summary = helps[step]
        assert summary.endswith(".") and summary.count("(") == summary.count(")"), (step, summary)
        assert first.removeprefix(f"{step}: ").startswith(summary), (step, summary)
        assert not summary.startswith(f"{step}:"), summary
    assert helps["questions"].endswith("into questions.jsonl.")


def test_a_full_stop_inside_e_g_does_not_end_the_sentence():
    assert step_summary("x: one, e.g. two. Three.", "x") == "one, e.g. two."
    assert step_summary("no full stop at all", "x") == "no full stop at all"
