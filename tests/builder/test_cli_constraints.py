"""Issue #44, quiet edge cases: constraints every builder step shares, declared once in builder.cli -- every float
option refuses nan and inf (``nan <= 0`` is False: a NaN passed every range check), every ``--limit`` refuses a
negative count (a Python slice would drop the last rows) -- and ``generate --backoff`` refuses a negative delay."""

from __future__ import annotations

import pytest

from builder.cli import build_parser, main


def _options(kind: str) -> list[tuple[str, str]]:
    from builder.cli import count, finite_float

    parser = build_parser()
    steps = next(a for a in parser._actions if a.dest == "step").choices
    wanted = {"float": finite_float, "limit": count}[kind]
    return [(step, action.option_strings[0]) for step, sub in steps.items() for action in sub._actions
            if action.type is wanted]


def _exit_code(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as stop:
        return int(stop.code)


def test_every_float_option_of_every_step_refuses_nan_and_inf(tmp_path, capsys):
    options = _options("float")
    assert ("internals", "--temperature") in options and ("generate", "--backoff") in options
    for step, flag in options:
        for value in ("nan", "inf", "-inf"):
            assert _exit_code([step, "--out", str(tmp_path), f"{flag}={value}"]) == 2
            assert f"argument {flag}: must be a finite number, got '{value}'" in capsys.readouterr().err


def test_every_limit_refuses_a_negative_count(tmp_path, capsys):
    options = _options("limit")
    assert {step for step, _ in options} >= {"generate", "internals", "replay", "import-mushroom"}
    for step, flag in options:
        assert _exit_code([step, "--out", str(tmp_path), f"{flag}=-1"]) == 2
        assert "argument --limit: must be an integer >= 0, got '-1'" in capsys.readouterr().err


@pytest.mark.parametrize("flag, value", [("--backoff", "-1"), ("--workers", "0"), ("--max-attempts", "0")])
def test_generate_refuses_a_negative_backoff_before_any_work(tmp_path, capsys, flag, value):
    (tmp_path / "questions.jsonl").write_text('{"question_id": "q", "lang": "en", "prompt": "?", "wiki_url": "u"}\n')
    assert main(["generate", "--out", str(tmp_path), "--model", "m", "--engine", "openai", "--base-url",
                 "http://127.0.0.1:9/v1", flag, value]) == 2
    assert flag in capsys.readouterr().err
    assert not (tmp_path / "generations.jsonl").exists() and not (tmp_path / "configs.jsonl").exists()
