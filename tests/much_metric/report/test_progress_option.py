"""Issue 57: progress on every long command, and ``--no-progress`` everywhere: ``much evaluate``'s scoring (and
spans) bars follow ``EvaluationOptions.progress``; much run's signals bar gives no remaining-time estimate from
signals of very different cost."""

from __future__ import annotations

import io

import numpy as np
import pytest

import much_dataset
from much_metric.report import EvaluationOptions, evaluate_signals


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("progress", [True, False])
def test_the_scoring_bar_follows_the_progress_option(progress, monkeypatch):
    rows = much_dataset.load("sample", split="test").select(range(20))
    rng = np.random.default_rng(0)
    signals = {"noise": {r["generation_id"]: rng.random(len(r["output_tokens"])) for r in rows}}
    terminal = _Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    evaluate_signals(rows, signals, evaluation=EvaluationOptions(bootstrap=None, progress=progress))
    assert ("scoring" in terminal.getvalue()) is progress


def test_every_long_command_takes_no_progress():
    from much_metric.cli import build_parser

    parser = build_parser()
    for argv in (["evaluate", "--source", "sample", "--scores", "x"], ["segment", "--input", "x", "--tokenizer", "y"],
                 ["run"], ["train", "--source", "sample", "--out", "x"],
                 ["neighbours", "--tokenizer", "y", "--out", "x"], ["monitor", "--model", "smollm2", "--prompt", "hi"]):
        assert parser.parse_args([*argv, "--no-progress"]).no_progress is True


def test_the_signals_bar_has_no_remaining_time_estimate(capsys):
    from much_metric.cli import main

    assert main(["run", "--source", "sample", "--signals", "max_likelihood,token_likelihood", "--bootstrap", "0"]) == 0
    err = capsys.readouterr().err
    bar = [line for line in err.replace("\r", "\n").splitlines() if line.startswith("signals")]
    assert bar and all("<" not in line and "elapsed" in line for line in bar)


def _export_folder(folder, rows):
    import json

    (folder / "rows").mkdir(parents=True)
    for split, part in (("train", rows[:2]), ("test", rows[2:])):
        with open(folder / "rows" / f"{split}.jsonl", "w", encoding="utf-8") as handle:
            handle.writelines(json.dumps(row) + "\n" for row in part)


def test_no_progress_silences_the_libraries_bars_too(tmp_path, capsys):
    """``much run --no-progress`` on a local folder printed datasets' "Generating test split" bars (they print even
    into a pipe); --no-progress turns the libraries' bars off for the command and restores them after. The run
    without it, on other rows (datasets caches a folder it has built), is the control."""
    import datasets

    from much_metric.cli import main

    sample = much_dataset.load("sample", split="test")
    capsys.readouterr()  # the sample's own first load may print its bars
    for name, start, flags in (("quiet", 0, ["--no-progress"]), ("control", 10, [])):
        _export_folder(tmp_path / name, [dict(row) for row in sample.select(range(start, start + 8))])
        assert main(["run", "--source", str(tmp_path / name), "--split", "test", "--signals", "max_likelihood",
                     "--bootstrap", "0", *flags]) == 0
        assert ("Generating" in capsys.readouterr().err) is not bool(flags), name
        assert datasets.is_progress_bar_enabled()


@pytest.mark.parametrize("progress", [True, False])
def test_the_spans_bar_follows_the_progress_option(progress, monkeypatch):
    """much evaluate --spans ran minutes with no output (issue 57): a bar per method on a terminal, none with
    --no-progress (EvaluationOptions.progress, passed to evaluate_spans)."""
    from much_metric.models import load_tokenizer
    from much_metric.report import evaluate_spans

    rows = much_dataset.load("sample", split="test").select(range(12))
    rng = np.random.default_rng(1)
    signals = {"noise": {r["generation_id"]: rng.random(len(r["output_tokens"])) for r in rows}}
    table = evaluate_signals(rows, signals, evaluation=EvaluationOptions(bootstrap=None, progress=False))
    columns = rows.select_columns(["lang", "prompt", "output", "output_tokens", "token_chunks"]).to_dict()
    terminal = _Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    spans = evaluate_spans(table, columns, load_tokenizer("smollm2"), progress=progress)
    assert "noise (product)" in spans["methods"]
    assert ("spans" in terminal.getvalue()) is progress
