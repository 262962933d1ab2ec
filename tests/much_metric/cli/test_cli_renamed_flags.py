"""``much run`` / ``much evaluate`` / ``much train`` flags named after the keyword they set (``--random-state`` ->
``random_state``, ``--stopword-handling``, ``--file-format``); the old names still work as hidden aliases that say,
on stderr, which name replaces them."""

from __future__ import annotations

import json

import pytest

from much_metric.cli import build_parser, main

#: (command, old flag, new flag, value, attribute it sets)
RENAMED = [
    ("run", "--seed", "--random-state", "7", "random_state"),
    ("run", "--stopwords", "--stopword-handling", "exclude", "stopword_handling"),
    ("run", "--format", "--file-format", "jsonl", "file_format"),
    ("evaluate", "--seed", "--random-state", "7", "random_state"),
    ("evaluate", "--stopwords", "--stopword-handling", "exclude", "stopword_handling"),
    ("train", "--stopwords", "--stopword-handling", "exclude", "stopword_handling"),
]


def _parse(command: str, *extra: str):
    required = ["--source", "sample"] + {"evaluate": ["--scores", "signals.jsonl"], "train": ["--out", "runs/x"]}.get(
        command, [])
    return build_parser().parse_args([command, *required, *extra])


@pytest.mark.parametrize(("command", "old", "new", "value", "attribute"), RENAMED)
def test_old_flag_sets_the_same_keyword_and_warns(capsys, command, old, new, value, attribute):
    expected = int(value) if attribute == "random_state" else value
    assert getattr(_parse(command, new, value), attribute) == expected
    assert capsys.readouterr().err == ""  # the new name is silent
    assert getattr(_parse(command, old, value), attribute) == expected
    err = capsys.readouterr().err
    assert f"warning: {old} is deprecated" in err and f"use {new}" in err


@pytest.mark.parametrize(("command", "old", "new", "value", "attribute"), RENAMED)
def test_old_flag_is_hidden_from_help_and_keeps_its_checks(capsys, command, old, new, value, attribute):
    parser = build_parser()
    with pytest.raises(SystemExit):
        parser.parse_args([command, "--help"])
    text = capsys.readouterr().out
    assert new in text and f"{old} " not in text and f"{old}\n" not in text
    defaults = _parse(command)
    assert getattr(defaults, attribute) == {"random_state": 0, "stopword_handling": "null",
                                            "file_format": "parquet"}[attribute]
    if attribute != "random_state":
        with pytest.raises(SystemExit):  # the alias keeps the new flag's choices
            _parse(command, old, "neither")


def test_much_run_with_the_old_seed_prints_the_same_table_as_random_state(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    common = ["run", "--source", "sample", "--split", "test", "--signals", "max_likelihood", "--bootstrap", "40",
              "--no-progress", "--no-nli"]
    assert main([*common, "--random-state", "5", "--json", str(tmp_path / "new.json")]) == 0
    new = capsys.readouterr()
    assert main([*common, "--seed", "5", "--json", str(tmp_path / "old.json")]) == 0
    old = capsys.readouterr()
    assert "--seed is deprecated" in old.err and "--seed" not in new.err
    assert json.loads((tmp_path / "old.json").read_text())["results"][0]["intervals"] == \
        json.loads((tmp_path / "new.json").read_text())["results"][0]["intervals"]
    assert main([*common, "--random-state", "6", "--json", str(tmp_path / "other.json")]) == 0
    assert json.loads((tmp_path / "other.json").read_text())["results"][0]["intervals"] != \
        json.loads((tmp_path / "new.json").read_text())["results"][0]["intervals"]


@pytest.mark.parametrize("command", ["run", "evaluate", "train"])
def test_data_is_the_hidden_old_name_of_source(capsys, command):
    extra = {"evaluate": ["--scores", "signals.jsonl"], "train": ["--out", "runs/x"]}.get(command, [])
    new = build_parser().parse_args([command, "--source", "orailix/MUCH", *extra])
    assert new.source == "orailix/MUCH" and capsys.readouterr().err == ""
    old = build_parser().parse_args([command, "--data", "orailix/MUCH", *extra])
    assert old.source == "orailix/MUCH" and not hasattr(old, "data")
    err = capsys.readouterr().err
    assert "warning: --data is deprecated" in err and "use --source" in err
    with pytest.raises(SystemExit):
        build_parser().parse_args([command, "--help"])
    assert "--data" not in capsys.readouterr().out


def test_evaluate_without_source_names_the_flag(tmp_path, capsys):
    scores = tmp_path / "signals.jsonl"
    scores.write_text("")
    assert main(["evaluate", "--scores", str(scores)]) == 2
    assert "--source is required" in capsys.readouterr().err


def _options(parser):
    import argparse

    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    for command, sub in commands.choices.items():
        for action in sub._actions:
            longs = [o for o in action.option_strings if o.startswith("--") and o != "--help"]
            if longs:
                yield command, longs[0], action


def test_every_visible_flag_is_named_after_the_keyword_it_sets():
    """One name per concept: ``--x-y`` sets ``x_y`` in ``much``, ``python -m builder`` and ``much-leaderboard``;
    a flag that does not is a hidden alias of one that does (and says so when used). (Hidden flags named after
    their keyword, such as ``push --token`` that exists to be refused, pass as visible ones.)"""
    import argparse

    from builder.cli import build_parser as builder_parser
    from much_leaderboard._cli import build_parser as leaderboard_parser

    for parser in (build_parser(), builder_parser(), leaderboard_parser()):
        seen = list(_options(parser))
        assert len(seen) >= 10
        for command, flag, action in seen:
            if action.help == argparse.SUPPRESS and flag[2:].replace("-", "_") != action.dest:
                assert any(other.dest == action.dest and other.help != argparse.SUPPRESS
                           for where, _, other in seen if where == command), (command, flag)
                continue
            assert flag[2:].replace("-", "_") == action.dest, f"{parser.prog} {command} {flag} sets {action.dest}"
