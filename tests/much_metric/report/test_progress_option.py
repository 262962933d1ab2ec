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
                 ["run"], ["train", "--source", "sample", "--out", "x"], ["neighbours", "--tokenizer", "y", "--out", "x"],
                 ["monitor", "--model", "smollm2", "--prompt", "hi"]):
        assert parser.parse_args([*argv, "--no-progress"]).no_progress is True


def test_the_signals_bar_has_no_remaining_time_estimate(capsys):
    from much_metric.cli import main

    assert main(["run", "--source", "sample", "--signals", "max_likelihood,token_likelihood", "--bootstrap", "0"]) == 0
    err = capsys.readouterr().err
    bar = [line for line in err.replace("\r", "\n").splitlines() if line.startswith("signals")]
    assert bar and all("<" not in line and "elapsed" in line for line in bar)
