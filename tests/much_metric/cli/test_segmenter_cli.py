"""``much segment``: JSONL in, token_chunks out, equal to :func:`much_metric.segmentation.segment`."""

from __future__ import annotations

import json

from much_dataset.schema import GENERATION_ID, OUTPUT, OUTPUT_TOKENS, TOKEN_CHUNKS
from much_metric.cli import main
from much_metric.segmentation import segment
from tests import assets


def _write(path, records):
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")


def test_segment_command_writes_token_chunks(tmp_path):
    tokenizer = assets.llama3_tokenizer()
    texts = assets.mushroom_outputs()[:5]
    records = []
    for k, text in enumerate(texts):
        output = text + "<|eot_id|>"
        ids = tokenizer.encode(text, add_special_tokens=False) + [tokenizer.eos_token_id]
        records.append({GENERATION_ID: f"g{k}", OUTPUT: output, OUTPUT_TOKENS: ids if k % 2 == 0 else None})
    source, target = tmp_path / "in.jsonl", tmp_path / "out" / "chunks.jsonl"
    _write(source, records)
    code = main(["segment", "--input", str(source), "--tokenizer", str(assets.llama3_tokenizer_json()),
                 "--eos-token", "<|eot_id|>", "--compat", "0.2.1", "--output", str(target)])
    assert code == 0
    rows = [json.loads(line) for line in target.read_text(encoding="utf-8").splitlines()]
    assert [row[GENERATION_ID] for row in rows] == [record[GENERATION_ID] for record in records]
    for row, record in zip(rows, records, strict=True):
        expected = segment(record[OUTPUT], tokenizer, record[OUTPUT_TOKENS], compat="0.2.1")
        assert row[TOKEN_CHUNKS] == expected
        assert len(expected) > 1


def test_segment_command_names_the_bad_generation(tmp_path, capsys):
    tokenizer = assets.llama3_tokenizer()
    ids = tokenizer.encode("Paris is nice.", add_special_tokens=False)
    source = tmp_path / "in.jsonl"
    _write(source, [{GENERATION_ID: "ok", OUTPUT: "Paris is nice.", OUTPUT_TOKENS: ids},
                    {GENERATION_ID: "broken-7", OUTPUT: "Paris is nicer.", OUTPUT_TOKENS: ids}])
    assert main(["segment", "--input", str(source), "--tokenizer", str(assets.llama3_tokenizer_json()),
                 "--output", str(tmp_path / "out.jsonl")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("much segment: error: generation 'broken-7': field 'output_tokens'")
    assert "Traceback" not in err
    assert not (tmp_path / "out.jsonl").exists()
    _write(source, [{GENERATION_ID: "no-text", OUTPUT: None}])
    assert main(["segment", "--input", str(source), "--tokenizer", str(assets.llama3_tokenizer_json())]) == 2
    assert "generation 'no-text': field 'output' must be a string" in capsys.readouterr().err


def test_segment_checks_its_input_before_loading_the_tokenizer(tmp_path, capsys, monkeypatch):
    from much_metric.cli import segment as segment_command

    def no_tokenizer(*args, **kwargs):
        raise AssertionError("the tokenizer must not load before the input is checked")

    monkeypatch.setattr(segment_command, "load_tokenizer_argument", no_tokenizer)
    source = tmp_path / "in.jsonl"
    _write(source, [{GENERATION_ID: "a", OUTPUT: "fine"}, {GENERATION_ID: "b", OUTPUT: "x", OUTPUT_TOKENS: "1 2"}])
    assert main(["segment", "--input", str(source), "--tokenizer", "smollm2"]) == 2
    assert "in.jsonl:2: generation 'b': field 'output_tokens' must be a list" in capsys.readouterr().err
    assert main(["segment", "--input", str(tmp_path / "missing.jsonl"), "--tokenizer", "smollm2"]) == 2
    assert "--input" in capsys.readouterr().err
    source.write_text('{"generation_id": "a", "output": "x"}\n{not json\n', encoding="utf-8")
    assert main(["segment", "--input", str(source), "--tokenizer", "smollm2"]) == 2
    assert "in.jsonl:2: not valid JSON" in capsys.readouterr().err


def test_segment_rejects_a_malformed_tokenizer_file_in_one_line(tmp_path, capsys):
    source, bad = tmp_path / "in.jsonl", tmp_path / "tokenizer.json"
    _write(source, [{GENERATION_ID: "a", OUTPUT: "Paris is nice."}])
    bad.write_text("{broken", encoding="utf-8")
    assert main(["segment", "--input", str(source), "--tokenizer", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"much segment: error: --tokenizer {bad}: cannot load a tokenizer") and err.count("\n") == 1


def test_segment_knows_the_smollm2_alias_and_reproduces_the_sample(tmp_path, capsys):
    """`--tokenizer smollm2` (as `much run`): the packaged tokenizer re-segments the sample exactly."""
    import much_dataset

    data = much_dataset.load("sample", split="test").select(range(40))
    source = tmp_path / "in.jsonl"
    _write(source, [{GENERATION_ID: r[GENERATION_ID], OUTPUT: r[OUTPUT], OUTPUT_TOKENS: r[OUTPUT_TOKENS]}
                    for r in data])
    assert main(["segment", "--input", str(source), "--tokenizer", "smollm2"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [row[TOKEN_CHUNKS] for row in rows] == data[TOKEN_CHUNKS]


def test_segment_command_to_stdout_with_tokenizer_folder(tmp_path, capsys):
    source = tmp_path / "in.jsonl"
    _write(source, [{GENERATION_ID: "a", OUTPUT: "Le chat dort sur le tapis.<end_of_turn>"}])
    assert main(["segment", "--input", str(source), "--tokenizer", str(assets.gemma3_dir())]) == 0
    row = json.loads(capsys.readouterr().out)
    expected = segment("Le chat dort sur le tapis.<end_of_turn>", assets.gemma3_tokenizer())
    assert len(expected) > 1
    assert row == {GENERATION_ID: "a", TOKEN_CHUNKS: expected}
