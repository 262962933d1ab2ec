"""Issue #44, inputs overwritten: the output rules cover every input a ``much`` command reads, packs and detector
folders included: ``--json P/manifest.json`` with ``--internals P`` (the pack would no longer load) and
``--json DET/config.json`` with ``--signals learned:DET`` are refused in one line, exit 2, nothing changed."""

from __future__ import annotations

import pytest

import much_dataset
from much_metric.cli import main
from tests.much_metric.baselines._packs import write_random_pack


@pytest.fixture(scope="module")
def pack(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pack")
    write_random_pack(folder, much_dataset.load("sample", config="en", split="test"))
    return folder


def _snapshot(folder):
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _refused(capsys, argv, *phrases):
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    for phrase in phrases:
        assert phrase in err, err


@pytest.mark.parametrize("command", ["run", "evaluate"])
def test_json_over_the_manifest_of_the_internals_pack_is_refused(pack, capsys, tmp_path, command):
    before = _snapshot(pack)
    argv = ["--source", "sample", "--config", "en", "--bootstrap", "0", "--internals", str(pack),
            "--json", str(pack / "manifest.json")]
    argv = ["run", *argv, "--signals", "rauq", "--no-progress"] if command == "run" else \
        ["evaluate", *argv, "--scores", str(tmp_path)]
    _refused(capsys, argv, "--json", "manifest.json", "--internals", "nothing was written")
    assert _snapshot(pack) == before
    much_dataset.load_internals(pack)  # still a pack


def test_json_over_a_file_of_a_detector_folder_is_refused(tmp_path, capsys):
    detector = tmp_path / "det"
    detector.mkdir()
    (detector / "config.json").write_text('{"format": "much-learned-detector"}')
    before = _snapshot(detector)
    _refused(capsys, ["run", "--source", "sample", "--no-nli", "--signals", f"learned:{detector}", "--bootstrap", "0",
                      "--json", str(detector / "config.json")], "config.json", "--signals learned:")
    assert _snapshot(detector) == before


def test_train_out_writing_over_its_internals_pack_files_is_refused(tmp_path, capsys):
    """``much train --out D`` writes config.json / weights / training_rows.json / card.md in D: a pack folder whose
    files include one of them is an input it would overwrite."""
    pack = tmp_path / "pack"
    pack.mkdir()
    (pack / "manifest.json").write_text("{}")
    (pack / "card.md").write_text("the pack's own notes")
    _refused(capsys, ["train", "--source", "sample", "--internals", str(pack), "--detector", "probe", "--out",
                      str(pack)], "card.md", "--internals")
    assert (pack / "card.md").read_text() == "the pack's own notes"
