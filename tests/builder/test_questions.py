"""questions step on the vendored Mu-SHROOM files: languages, dedup by question ID, idempotent reruns."""

from __future__ import annotations

import json

import pytest

from builder.cli import main
from builder.configs import question_id
from builder.questions import questions_from_rows, read_mushroom
from builder.store import read_store
from tests import assets


def _row(lang="EN", prompt="Who?", url="https://en.wikipedia.org/wiki/X", **extra):
    return {"id": extra.pop("id", "r1"), "lang": lang, "model_input": prompt, "wikipedia_url": url, **extra}


def test_dedup_keeps_first_occurrence_and_rejects_other_languages():
    rows = [_row(), _row(id="r2"), _row(lang="IT"), _row(lang="FR", prompt="Qui ?"), _row(prompt="Who else?")]
    questions, rejected = questions_from_rows(rows)
    assert rejected == 1
    assert [q["prompt"] for q in questions] == ["Who?", "Qui ?", "Who else?"]
    assert questions[1]["lang"] == "fr"  # lowercased
    assert questions[0]["question_id"] == question_id("en", "Who?", "https://en.wikipedia.org/wiki/X")


def test_same_prompt_other_url_is_another_question():
    questions, _ = questions_from_rows([_row(), _row(url="https://en.wikipedia.org/wiki/Y")])
    assert len(questions) == 2


def test_missing_field_names_the_row_and_field():
    with pytest.raises(ValueError, match=r"'tst-en-9'.*'wikipedia_url'"):
        questions_from_rows([{"id": "tst-en-9", "lang": "EN", "model_input": "q"}])


def test_real_mushroom_files(tmp_path):
    assets.require("mushroom")
    rows = list(read_mushroom([assets.MUSHROOM_DIR]))
    assert len(rows) == 606
    assert main(["questions", "--out", str(tmp_path)]) == 0
    stored = list(read_store(tmp_path / "questions.jsonl"))
    expected = {(r["lang"].lower(), r["model_input"], r["wikipedia_url"]) for r in rows}
    assert {(q["lang"], q["prompt"], q["wiki_url"]) for q in stored} == expected
    assert len({q["question_id"] for q in stored}) == len(stored) == len(expected)
    assert {q["lang"] for q in stored} == {"en", "fr", "es", "de"}
    # Rerun (idempotent) and a source with duplicated rows add nothing.
    duplicated = tmp_path / "dup.jsonl"
    duplicated.write_text("".join(json.dumps(r) + "\n" for r in rows[:50] * 2))
    assert main(["questions", "--out", str(tmp_path)]) == 0
    assert main(["questions", "--out", str(tmp_path), "--source", str(duplicated)]) == 0
    assert len(list(read_store(tmp_path / "questions.jsonl"))) == len(stored)


def test_missing_source_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no Mu-SHROOM JSONL"):
        main(["--traceback", "questions", "--out", str(tmp_path), "--source", str(tmp_path / "nope")])
