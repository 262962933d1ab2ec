"""Issue 57: ``export --help`` describes the judge default as ``export`` applies it (gpt-4o, else the first judge
``filter`` compared, else the only one)."""

from __future__ import annotations

import pytest

from builder.errors import BuilderError
from builder.export import _pick_judge


def _judge_help() -> str:
    from builder.cli import build_parser

    parser = build_parser()
    export = parser._subparsers._group_actions[0].choices["export"]
    action = next(a for a in export._actions if "--judge" in a.option_strings)
    return " ".join(action.help.split())


def test_the_help_names_each_rule_the_default_applies():
    judges = {"gpt-4.1": {}, "llama": {}}
    text = _judge_help()
    assert _pick_judge({**judges, "gpt-4o": {}}, None) == "gpt-4o" and "gpt-4o" in text
    assert _pick_judge(judges, None, filtered_by=["llama", "gpt-4.1"]) == "llama"
    assert "first judge `filter` compared" in text
    assert _pick_judge({"llama": {}}, None) == "llama" and "else the only judge" in text
    with pytest.raises(BuilderError):
        _pick_judge(judges, None)
