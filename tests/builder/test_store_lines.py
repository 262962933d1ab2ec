"""Lines of a builder artifact that no kill can produce (#22): garbage, a JSON value that is not an object, a record
without its key. Each is a clear error naming the file and the line and saying how to repair -- never a traceback
from deep inside the store."""

from __future__ import annotations

import pytest

from builder.errors import BuilderError
from builder.store import JsonlStore, read_store

GOOD = '{"generation_id": "a"}\n'
AFTER = '{"generation_id": "b"}\n'


@pytest.mark.parametrize(("line", "what"), [
    ("not json at all", "not JSON"),
    ("[1, 2, 3]", "a JSON list, not an object"),
    ("42", "a JSON int, not an object"),
    ('"text"', "a JSON str, not an object"),
    ("null", "a JSON NoneType, not an object"),
    ('{"generation_id": "c", "n": 1' + "0" * 5000 + "}", "not JSON"),  # past Python's int-parsing limit
])
def test_a_line_that_is_not_a_record_is_named(tmp_path, line, what):
    path = tmp_path / "x.jsonl"
    path.write_text(GOOD + line + "\n" + AFTER, encoding="utf-8")
    for read in (lambda: JsonlStore(path), lambda: list(read_store(path))):
        with pytest.raises(BuilderError) as caught:
            read()
        message = str(caught.value)
        assert f"{path}:2: " in message and what in message
        assert "delete that line" in message


def test_a_record_without_its_key_is_named(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text(GOOD + '{"id": "c", "output": "x"}\n' + AFTER, encoding="utf-8")
    with pytest.raises(BuilderError, match=r"x\.jsonl:2: the record has no 'generation_id'.*delete that line"):
        JsonlStore(path)
    assert [r.get("generation_id") for r in read_store(path)] == ["a", None, "b"]  # keyless reading is the step's


@pytest.mark.parametrize("line", ["[1, 2]", '{"id": "c"}', "not json"])
def test_a_bad_line_appended_by_another_process_is_named_on_refresh(tmp_path, line):
    path = tmp_path / "x.jsonl"
    store = JsonlStore(path)
    assert store.append({"generation_id": "a"})
    with path.open("a", encoding="utf-8") as handle:  # another (foreign) writer
        handle.write(line + "\n")
    with pytest.raises(BuilderError, match=r"x\.jsonl:2: .*delete that line"):
        store.refresh()


def test_the_file_is_left_untouched(tmp_path):
    path = tmp_path / "x.jsonl"
    text = GOOD + "[1]\n" + AFTER
    path.write_text(text, encoding="utf-8")
    with pytest.raises(BuilderError):
        JsonlStore(path)
    assert path.read_text(encoding="utf-8") == text
