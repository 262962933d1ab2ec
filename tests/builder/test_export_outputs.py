"""Issue #31, data loss in the builder: ``export --folder`` replaces only a folder that an earlier export wrote
(never a folder holding other files, never ``--out`` itself), and ``replay`` refuses a ``--source`` that is its own
output. Each refusal is one line, exit 2, before any work, and nothing is deleted."""

from __future__ import annotations

import json
import os

import pytest

from builder.cli import main
from tests.builder.test_export import _artifacts

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")


def _snapshot(folder):
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _refused(capsys, argv, *phrases):
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    for phrase in phrases:
        assert phrase in err, err


def test_export_into_a_folder_holding_other_files_is_refused(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    _artifacts(out)
    folder = tmp_path / "mine"
    (folder / "sub").mkdir(parents=True)
    (folder / "thesis.tex").write_text("years of work")
    (folder / "sub" / "data.csv").write_text("1,2\n")
    before = _snapshot(folder)
    _refused(capsys, ["export", "--out", str(out), "--folder", str(folder)], "--folder", "did not write",
             "thesis.tex", "nothing was deleted")
    assert _snapshot(folder) == before
    assert not (out / "rows").exists()  # refused before any work


def test_export_folder_equal_to_out_is_refused_and_the_artifacts_kept(tmp_path, capsys):
    _artifacts(tmp_path)
    before = _snapshot(tmp_path)
    _refused(capsys, ["export", "--out", str(tmp_path), "--folder", str(tmp_path)], "holds the input --out")
    assert _snapshot(tmp_path) == before
    _refused(capsys, ["export", "--out", str(tmp_path), "--folder", str(tmp_path.parent)], "holds the input --out")
    assert _snapshot(tmp_path) == before


def test_export_folder_that_is_a_link_is_refused(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    _artifacts(out)
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    _refused(capsys, ["export", "--out", str(out), "--folder", str(tmp_path / "link")], "symbolic link")
    assert (tmp_path / "link").is_symlink()


def test_export_replaces_its_own_earlier_folder_and_an_empty_one(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    _artifacts(out)
    folder = tmp_path / "published"
    folder.mkdir()  # empty: allowed
    assert main(["export", "--out", str(out), "--folder", str(folder)]) == 0
    first = _snapshot(folder)
    assert "README.md" in first and any(name.endswith(".parquet") for name in first)
    assert main(["export", "--out", str(out), "--folder", str(folder)]) == 0  # a rerun replaces its own files
    assert _snapshot(folder) == first
    capsys.readouterr()


@pytest.mark.parametrize("extra", ["notes.txt", "data/en/extra.parquet", "data/xx/test-00000-of-00001.parquet"])
def test_one_foreign_file_in_an_earlier_export_is_enough_to_refuse(tmp_path, capsys, extra):
    out = tmp_path / "out"
    out.mkdir()
    _artifacts(out)
    folder = tmp_path / "published"
    assert main(["export", "--out", str(out), "--folder", str(folder)]) == 0
    (folder / extra).parent.mkdir(parents=True, exist_ok=True)
    (folder / extra).write_text("mine")
    before = _snapshot(folder)
    capsys.readouterr()
    _refused(capsys, ["export", "--out", str(out), "--folder", str(folder)], extra)
    assert _snapshot(folder) == before


def test_replay_source_equal_to_its_own_output_is_refused(tmp_path, capsys):
    rows = [{"generation_id": f"g{i}", "output_tokens": [1, 2]} for i in range(2)]
    own = tmp_path / "replay.jsonl"
    own.write_text("".join(json.dumps(r) + "\n" for r in rows))
    before = own.read_bytes()
    _refused(capsys, ["replay", "--out", str(tmp_path), "--source", str(own), "--model", "no-such-model"],
             "--out", "replay.jsonl", "is the input --source")
    assert own.read_bytes() == before


def test_questions_source_equal_to_its_own_output_is_refused(tmp_path, capsys):
    own = tmp_path / "questions.jsonl"
    own.write_text(json.dumps({"question_id": "q1", "question": "Who?"}) + "\n")
    before = own.read_bytes()
    _refused(capsys, ["questions", "--out", str(tmp_path), "--source", str(own)], "is the input --source")
    assert own.read_bytes() == before


def test_import_mushroom_source_equal_to_one_of_its_outputs_is_refused(tmp_path, capsys):
    own = tmp_path / "generations.jsonl"
    own.write_text("{}\n")
    _refused(capsys, ["import-mushroom", "--out", str(tmp_path), "--source", str(own)], "is the input --source")
    assert own.read_text() == "{}\n"
