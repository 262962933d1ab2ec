"""Prose printed above the tables (``much run``'s header, ``note:`` lines of ``much evaluate``) fits in 120 columns
like the tables themselves, without losing or splitting a word."""

from __future__ import annotations

import pytest

from much_metric.cli import main
from much_metric.cli._text import TABLE_WIDTH, fit_line, fits_width

LONG_NOTE = ("note: Token Likelihood: 17 generation_ids of the signal file are not in the dataset and are ignored: "
             "'mushroom.en-val.0001', 'mushroom.en-val.0002', 'mushroom.en-val.0003', 'mushroom.en-val.0004', "
             "/a/very/long/path/that/is/never/split/" + "x" * 130)


def test_fit_line_wraps_prose_keeps_words_and_leaves_tables():
    lines = fit_line(LONG_NOTE).split("\n")
    assert len(lines) > 2
    assert all(len(line) <= TABLE_WIDTH for line in lines if "/" not in line)  # only the one word over 120 is wider
    assert all(line.startswith("  ") for line in lines[1:])
    assert " ".join(LONG_NOTE.split()) == " ".join(" ".join(lines).split())  # no word lost, none split
    row = "Token Likelihood  " + "0.618    " * 20
    assert fit_line(row) == row  # a table row (columns two spaces apart) is text_table's job
    assert fit_line("short note") == "short note"


def test_fits_width_wraps_each_printed_line_as_it_is_printed(capsys):
    @fits_width
    def command():
        print(LONG_NOTE[:300])
        print("partial ", end="")
        print("line", end="")
        return 3

    assert command() == 3
    out = capsys.readouterr().out
    assert out.endswith("partial line")
    assert max(len(line) for line in out.splitlines()) <= TABLE_WIDTH
    assert " ".join(out.split()) == " ".join((LONG_NOTE[:300] + "\npartial line").split())


@pytest.mark.slow
def test_much_run_prints_nothing_wider_than_120_columns(capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert main(["run", "--source", "sample", "--signals", "token_likelihood", "--bootstrap", "0",
                 "--no-progress"]) == 0
    out = capsys.readouterr().out
    too_wide = [line for line in out.splitlines() if len(line) > TABLE_WIDTH]
    assert too_wide == []
    header = " ".join(out[: out.index("\n\n")].split())  # the header and notes, re-joined
    assert header.startswith("Baselines on the embedded sample: Mu-SHROOM outputs scored with a small proxy model")
    assert "numbers are not comparable with the paper's (config=all, split=test, selection=all)" in header
    assert "LLM generation time:" in header and "scripts/tools/estimate_generation_time.py" in header


@pytest.mark.slow
def test_much_evaluate_notes_fit_120_columns(tmp_path, capsys, monkeypatch):
    """A signal file with generation_ids the dataset lacks: the note listing them is wrapped, none is lost."""
    import much_dataset
    from much_metric.signals import write_signals

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    data = much_dataset.load("sample", split="test")
    values = {g: [0.5] * len(t) for g, t in zip(data["generation_id"], data["output_tokens"], strict=True)}
    values.update({f"not-in-the-sample-{i:02d}": [0.5] for i in range(12)})
    write_signals(tmp_path / "token_noise.jsonl", {"token_noise": values})
    assert main(["evaluate", "--source", "sample", "--scores", str(tmp_path), "--bootstrap", "0"]) == 0
    out = capsys.readouterr().out
    assert [line for line in out.splitlines() if len(line) > TABLE_WIDTH] == []
    flat = " ".join(out.split())
    assert "12 generation_ids of the signal file are not in the dataset and are ignored:" in flat
    assert "'not-in-the-sample-09' (and 2 more)" in flat
