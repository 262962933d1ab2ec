"""``python -m builder``: the same error contract as ``much`` (one line, exit 2, ``--traceback`` for more), and a
failure that is not about one item stops the step at once instead of being recorded for every item."""

from __future__ import annotations

import json

import pytest

from builder.cli import main
from tests import assets


def _one_error_line(err: str, step: str) -> str:
    lines = [line for line in err.replace("\r", "\n").splitlines() if line.strip() and "%|" not in line]  # no bars
    assert len(lines) == 1, err
    assert lines[0].startswith(f"builder {step}: error: ")
    assert "Traceback" not in err
    return lines[0]


def test_model_that_cannot_load_stops_import_mushroom_at_once(tmp_path, capsys, monkeypatch):
    """"At once": one load attempt and no per-row failure (not 20 of each), checked by what the step does."""
    from builder import _llm

    assets.require("mushroom")
    attempts = []
    real_load = _llm.load_model
    monkeypatch.setattr(_llm, "load_model", lambda *a, **k: attempts.append(a) or real_load(*a, **k))
    out = tmp_path / "out"
    code = main(["import-mushroom", "--out", str(out), "--source", str(assets.MUSHROOM_DIR),
                 "--observer", str(tmp_path / "no-such-model.gguf"), "--limit", "20"])
    assert code == 2
    line = _one_error_line(capsys.readouterr().err, "import-mushroom")
    assert "cannot load" in line and "no-such-model.gguf" in line
    assert not (out / "labels.mushroom.failures.jsonl").exists()  # not 20 per-row failures
    assert len(attempts) == 1


def test_tokenizer_that_cannot_load_stops_segment(tmp_path, capsys):
    generation = {"generation_id": "g0", "generation_config": "cfg", "output": "Paris.", "output_tokens": [1, 2]}
    (tmp_path / "generations.jsonl").write_text(json.dumps(generation) + "\n")
    (tmp_path / "configs.jsonl").write_text(json.dumps({"generation_config": "cfg", "model_name": "smol",
                                                        "model_source": str(tmp_path / "missing.gguf")}) + "\n")
    assert main(["segment", "--out", str(tmp_path)]) == 2
    assert "cannot load" in _one_error_line(capsys.readouterr().err, "segment")
    assert not (tmp_path / "segments.failures.jsonl").exists()


@pytest.mark.parametrize("shard", ["5/2", "x", "1/0", "3/3"])
def test_bad_shard_is_one_line_exit_2(tmp_path, capsys, shard):
    (tmp_path / "generations.jsonl").write_text(json.dumps({"generation_id": "g0"}) + "\n")
    assert main(["segment", "--out", str(tmp_path), "--shard", shard]) == 2
    assert "shard" in _one_error_line(capsys.readouterr().err, "segment").lower()


def test_corrupt_artifact_is_one_line_exit_2_and_traceback_on_request(tmp_path, capsys):
    (tmp_path / "generations.jsonl").write_text("not json\n" + json.dumps({"generation_id": "g0"}) + "\n")
    argv = ["segment", "--out", str(tmp_path)]
    assert main(argv) == 2
    _one_error_line(capsys.readouterr().err, "segment")
    with pytest.raises(Exception):  # noqa: B017 - whatever the error, --traceback re-raises it
        main(["--traceback", *argv])


def test_empty_artifact_is_one_line_exit_2(tmp_path, capsys):
    (tmp_path / "generations.jsonl").write_text("")
    (tmp_path / "segments.jsonl").write_text("not json\n")
    code = main(["export", "--out", str(tmp_path)])
    assert code == 2
    _one_error_line(capsys.readouterr().err, "export")


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_export_folder_follows_the_umask(tmp_path, umask):
    """``much/`` and everything in it get the modes a plain mkdir/open give under the umask (mkdtemp gives 0700)."""
    import os
    import stat

    from tests.builder.test_export import _artifacts

    _artifacts(tmp_path)
    previous = os.umask(umask)
    try:
        assert main(["export", "--out", str(tmp_path)]) == 0
    finally:
        os.umask(previous)
    folder = tmp_path / "much"
    paths = [folder, *folder.rglob("*")]
    assert len(paths) > 3
    for path in paths:
        expected = (0o777 if path.is_dir() else 0o666) & ~umask
        assert stat.S_IMODE(path.stat().st_mode) == expected, path


def test_a_step_runs_from_any_folder_with_the_checkout_on_the_path(tmp_path):
    """docs/development.md#install: `python -m builder` from another folder, the checkout on PYTHONPATH: the files
    read from the checkout (data/mushroom/) are found, and --out is relative to the current folder."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run([sys.executable, "-m", "builder", "questions", "--out", "relative-out"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "relative-out" / "questions.jsonl").stat().st_size > 0
    assert "unique" in done.stdout
