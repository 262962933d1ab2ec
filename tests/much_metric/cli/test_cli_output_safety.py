"""Issue #31, data loss: no ``much`` command writes an output over one of its inputs, over a link or a device, or
over a file another of its outputs writes; each is refused in one line before any work (exit 2), and a failed write
exits non-zero."""

from __future__ import annotations

import errno
import json
import os
import stat

import numpy as np
import pytest

from much_metric import fileio
from much_metric.cli import main


@pytest.fixture(scope="module")
def scores(tmp_path_factory):
    """A real signal file over the packaged sample: 1 - the largest candidate probability (max likelihood)."""
    import much_dataset
    from much_metric.signals._files import write_signals

    test = much_dataset.load("sample")["test"]
    rows = [{"generation_id": gid, "signal_name": "max_likelihood",
             "values": (1.0 - np.asarray([p[0] for p in probs], dtype=float)).tolist()}
            for gid, probs in zip(test["generation_id"], test["logits_values"], strict=True)]
    path = tmp_path_factory.mktemp("signals") / "max_likelihood.jsonl"
    write_signals(path, rows)
    return path


def _refused(capsys, argv, *phrases):
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    for phrase in phrases:
        assert phrase in err, err
    return err


@pytest.mark.parametrize("option", ["--json", "--report"])
def test_evaluate_output_equal_to_the_scores_file_is_refused(tmp_path, capsys, scores, option):
    copy = tmp_path / "scores.jsonl"
    copy.write_bytes(scores.read_bytes())
    _refused(capsys, ["evaluate", "--source", "sample", "--scores", str(copy), "--bootstrap", "0", option, str(copy)],
             f"{option} {copy}", "is the input --scores", "nothing was written")
    assert copy.read_bytes() == scores.read_bytes()


def test_evaluate_output_inside_a_scores_folder_over_a_signal_file_is_refused(tmp_path, capsys, scores):
    folder = tmp_path / "signals"
    folder.mkdir()
    (folder / scores.name).write_bytes(scores.read_bytes())
    _refused(capsys, ["evaluate", "--source", "sample", "--scores", str(folder), "--bootstrap", "0",
                      "--json", str(folder / scores.name)], "file of the input --scores")


@pytest.mark.parametrize("target", ["/dev/null", "/dev/full", "/proc/self/fd/1"])
def test_evaluate_json_through_a_link_to_a_device_is_refused_and_the_link_kept(tmp_path, capsys, scores, target):
    link = tmp_path / "table.json"
    link.symlink_to(target)
    _refused(capsys, ["evaluate", "--source", "sample", "--scores", str(scores), "--bootstrap", "0",
                      "--json", str(link)], "symbolic link", target)
    assert link.is_symlink() and os.readlink(link) == target


def test_evaluate_json_on_a_device_node_is_refused(tmp_path, capsys, scores):
    from tests.much_metric.test_fileio import device_copy

    device = device_copy(tmp_path)  # a copy of the full device: a regression never replaces the real /dev/full
    _refused(capsys, ["evaluate", "--source", "sample", "--scores", str(scores), "--bootstrap", "0",
                      "--json", str(device)], "is a device")
    assert stat.S_ISCHR(os.stat(device).st_mode)


def test_evaluate_reports_a_full_disk_and_exits_non_zero(tmp_path, capsys, scores, monkeypatch):
    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(fileio.os, "fsync", full)
    code = main(["evaluate", "--source", "sample", "--scores", str(scores), "--bootstrap", "0",
                 "--json", str(tmp_path / "table.json")])
    err = capsys.readouterr().err
    assert code == 2 and "No space left on device" in err, err
    assert not (tmp_path / "table.json").exists()


def test_segment_output_equal_to_the_input_is_refused(tmp_path, capsys):
    from much_metric.models import load_tokenizer

    text = "Paris is the capital of France."
    ids = list(load_tokenizer("smollm2").encode(text, add_special_tokens=False))
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps({"generation_id": "g", "output": text, "output_tokens": ids}) + "\n")
    before = source.read_bytes()
    _refused(capsys, ["segment", "--input", str(source), "--tokenizer", "smollm2", "--output", str(source)],
             "is the input --input")
    assert source.read_bytes() == before


def test_run_json_over_a_signal_file_of_out_is_refused(tmp_path, capsys):
    out = tmp_path / "signals"
    _refused(capsys, ["run", "--source", "sample", "--signals", "token_likelihood", "--bootstrap", "0",
                      "--out", str(out),
                      "--json", str(out / "token_likelihood.parquet"), "--no-progress"],
             "is a file that --out", "writes")
    _refused(capsys, ["run", "--source", "sample", "--signals", "token_likelihood", "--bootstrap", "0",
                      "--out", str(out),
                      "--json", str(out / "timings.json"), "--no-progress"], "is a file that --out")
    assert not out.exists()


def test_neighbours_output_equal_to_the_corpus_is_refused(tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("Paris is the capital of France.\nBerlin is the capital of Germany.\n")
    before = corpus.read_bytes()
    _refused(capsys, ["neighbours", "--tokenizer", "smollm2", "--files", str(corpus), "--out", str(tmp_path / "w"),
                      "--output", str(corpus), "--no-progress"], "is the input --files")
    assert corpus.read_bytes() == before and not (tmp_path / "w").exists()
