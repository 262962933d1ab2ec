"""``much segment`` input cases (#22): token ids in the wrong order (same decoded length) are refused by comparing
content, a negative or out-of-vocabulary id is a clean one-line error, and ``--input -`` reads standard input."""

from __future__ import annotations

import io
import json

import pytest

from much_dataset.schema import GENERATION_ID, OUTPUT, OUTPUT_TOKENS, TOKEN_CHUNKS
from much_metric.cli import main
from much_metric.segmentation import segment

TEXT = "Paris is the capital of France. It is large."


@pytest.fixture(scope="module")
def tokenizer():
    from much_metric.models import load_tokenizer

    return load_tokenizer("smollm2")


def _run(tmp_path, records, capsys, *extra):
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    code = main(["segment", "--input", str(source), "--tokenizer", "smollm2", "--output", str(tmp_path / "o.jsonl"),
                 *extra])
    return code, capsys.readouterr().err


def test_tokens_in_the_wrong_order_are_refused(tmp_path, capsys, tokenizer):
    ids = list(tokenizer.encode(TEXT, add_special_tokens=False))
    swapped = [ids[1], ids[0], *ids[2:]]
    assert len(tokenizer.decode(swapped)) == len(TEXT) and tokenizer.decode(swapped) != TEXT
    code, err = _run(tmp_path, [{GENERATION_ID: "g-7", OUTPUT: TEXT, OUTPUT_TOKENS: swapped}], capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith("much segment: error: ") and "'g-7'" in err and "output_tokens" in err
    assert "character 0" in err and not (tmp_path / "o.jsonl").exists()


def test_tokens_in_the_right_order_still_segment(tmp_path, capsys, tokenizer):
    ids = list(tokenizer.encode(TEXT, add_special_tokens=False))
    code, err = _run(tmp_path, [{GENERATION_ID: "g", OUTPUT: TEXT, OUTPUT_TOKENS: ids}], capsys)
    assert code == 0, err
    row = json.loads((tmp_path / "o.jsonl").read_text(encoding="utf-8"))
    assert row[TOKEN_CHUNKS] == segment(TEXT, tokenizer, ids)


@pytest.mark.parametrize(("bad", "what"), [(-1, "-1"), (10**30, "1000000000000000000000000000000"),
                                           (49152, "49152"), (True, "True")])
def test_an_id_outside_the_vocabulary_is_a_clean_error(tmp_path, capsys, tokenizer, bad, what):
    ids = list(tokenizer.encode(TEXT, add_special_tokens=False))
    ids[3] = bad
    code, err = _run(tmp_path, [{GENERATION_ID: "g-9", OUTPUT: TEXT, OUTPUT_TOKENS: ids}], capsys)
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert "'g-9'" in err and "output_tokens" in err and "token 3" in err and what in err


def test_input_dash_reads_standard_input(tmp_path, capsys, monkeypatch, tokenizer):
    ids = list(tokenizer.encode(TEXT, add_special_tokens=False))
    line = json.dumps({GENERATION_ID: "g", OUTPUT: TEXT, OUTPUT_TOKENS: ids}) + "\n"
    monkeypatch.setattr("sys.stdin", io.StringIO(line))
    assert main(["segment", "--input", "-", "--tokenizer", "smollm2"]) == 0
    out = capsys.readouterr().out
    assert json.loads(out) == {GENERATION_ID: "g", TOKEN_CHUNKS: segment(TEXT, tokenizer, ids)}
    monkeypatch.setattr("sys.stdin", io.StringIO("not json\n"))
    assert main(["segment", "--input", "-", "--tokenizer", "smollm2"]) == 2
    assert "much segment: error: <stdin>:1: not valid JSON" in capsys.readouterr().err
