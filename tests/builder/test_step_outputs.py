"""Issue #44, inputs overwritten: every builder step declares what it reads (``READS``) and writes in ``--out``
(``WRITES``), and :mod:`builder.cli` refuses an input that is one of the files the step writes, before any work
(one line, exit 2, the input unchanged)."""

from __future__ import annotations

import json

import pytest

from builder.cli import STEPS, build_parser, main


def _refused(capsys, argv, *phrases):
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    for phrase in phrases:
        assert phrase in err, err


def test_verify_source_equal_to_its_report_is_refused(tmp_path, capsys):
    report = tmp_path / "verify.json"
    report.write_text('{"generation_id": "a", "output_tokens": [1]}\n')
    before = report.read_bytes()
    _refused(capsys, ["verify", "--out", str(tmp_path), "--source", str(report), "--model", "no-such-model"],
             "--out", "verify.json", "the input --source", "nothing was written")
    assert report.read_bytes() == before


@pytest.mark.parametrize("name", ["manifest.json", "shards/abc.safetensors"])
def test_internals_source_inside_the_pack_it_writes_is_refused(tmp_path, capsys, name):
    source = tmp_path / "pack" / name
    source.parent.mkdir(parents=True)
    source.write_text(json.dumps({"generation_id": "a"}) + "\n")
    before = source.read_bytes()
    _refused(capsys, ["internals", "--out", str(tmp_path / "pack"), "--source", str(source), "--model", "x"],
             name, "the input --source")
    assert source.read_bytes() == before


def test_an_input_folder_holding_a_written_file_is_refused(tmp_path, capsys):
    """``--source`` a folder whose files include one the step writes (Mu-SHROOM folders are read whole)."""
    (tmp_path / "generations.jsonl").write_text("{}\n")
    _refused(capsys, ["import-mushroom", "--out", str(tmp_path), "--source", str(tmp_path)],
             "generations.jsonl", "a file of the input --source")


def test_every_step_with_an_input_option_declares_what_it_writes():
    """A step that reads a --source or a model and writes in --out declares both (the rule is not opt-in by
    accident)."""
    import importlib

    parser = build_parser()
    steps = next(a for a in parser._actions if a.dest == "step").choices
    for step, module_name in STEPS.items():
        module = importlib.import_module(f"builder.{module_name}")
        options = {a.dest for a in steps[step]._actions}
        if "source" in options:
            assert getattr(module, "WRITES", ()), f"builder {step} reads --source but declares no WRITES"
            assert "source" in getattr(module, "READS", ()), step
