"""What a reader sees in the terminal: tables within 120 columns, one name per method, the floors explained, plain
``--help`` text, a progress line before the monitor's long loads, no "PyTorch was not found" in the light install."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from much_metric.cli import COMMANDS, build_parser, main
from much_metric.cli._text import TABLE_WIDTH, plain_text, text_table

ROOT = Path(__file__).resolve().parents[3]
KTC_STORED = "ktc_RYxmoyp1awYParfCjjxgnQ"  # the stored name of KTC's default (nu=4, tau=0.3)


def _table_lines(out: str) -> list[str]:
    """The header, rule and rows of every text table in ``out`` (a rule is a line of dash runs)."""
    lines = out.splitlines()
    found = []
    for k, line in enumerate(lines):
        if re.fullmatch(r"-+(  -+)*", line):
            found.append(lines[k - 1])
            for row in lines[k:]:
                if not row.strip():
                    break
                found.append(row)
    return found


def test_text_table_splits_wide_tables_and_repeats_the_names():
    rows = [[f"method {k}", "product", *(f"0.{k}00 [0.{k}10, 0.{k}90]" for _ in range(9))] for k in range(3)]
    header = ["method", "aggregator", *(f"metric {j}" for j in range(9))]
    out = text_table(rows, header, keep=2)
    assert max(len(line) for line in out.splitlines()) <= TABLE_WIDTH
    blocks = out.split("\n\n")
    assert len(blocks) > 1 and all(block.startswith("method    aggregator") for block in blocks)
    cells = [cell for block in blocks for cell in re.findall(r"metric \d", block.splitlines()[0])]
    assert cells == [f"metric {j}" for j in range(9)]  # every column once, in order
    assert text_table([["a", "b"]], ["x", "y"]) == "x  y\n-  -\na  b"  # a narrow table is unchanged


@pytest.fixture(scope="module")
def evaluate_output(tmp_path_factory):
    """``much evaluate`` on two signal files of the sample: KTC's stored name and per-token noise."""
    import much_dataset
    from much_metric.signals import write_signals

    folder = tmp_path_factory.mktemp("signals")
    data = much_dataset.load("sample", split="test")
    rng = np.random.default_rng(0)
    for name in (KTC_STORED, "token_noise"):
        write_signals(folder / f"{name}.jsonl",
                      {name: {g: rng.random(len(t)).tolist()
                              for g, t in zip(data["generation_id"], data["output_tokens"], strict=True)}})
    return folder


def test_evaluate_tables_fit_120_columns_and_name_ktc_once(evaluate_output, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert main(["evaluate", "--source", "sample", "--scores", str(evaluate_output), "--by", "lang", "--bootstrap",
                 "50", "--rank", "roc_auc", "--calibrate-on", "0.5"]) == 0
    out = capsys.readouterr().out
    tables = _table_lines(out)
    assert len(tables) > 20
    too_wide = [line for line in tables if len(line) > TABLE_WIDTH]
    assert not too_wide, too_wide[:3]
    assert KTC_STORED not in out
    assert out.count("KTC-4-0.3") >= 3  # results table, leaderboard, calibration
    assert "[floor: length]" in out
    legend = out[out.index("[floor: random] = "):]
    legend = legend[:legend.index("\n\n")]
    assert max(len(line) for line in legend.splitlines()) <= TABLE_WIDTH
    flat = " ".join(legend.split())
    assert "PR-AUC = (1 + prevalence) / 2" in flat and "can beat every method" in flat
    assert "[floor: length] = the claim's number of non-stopword tokens" in flat and "product aggregator" in flat


def _parsers():
    parser = build_parser()
    yield "much", parser
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    for name, child in sub.choices.items():
        yield f"much {name}", child
        for action in child._actions:
            if action.__class__.__name__ == "_SubParsersAction":
                for leaf, grandchild in action.choices.items():
                    yield f"much {name} {leaf}", grandchild


@pytest.mark.parametrize(("name", "parser"), list(_parsers()), ids=lambda value: value if isinstance(value, str)
                         else "")
def test_help_is_plain_text(name, parser):
    text = parser.format_help()
    for markup in ("``", ":mod:", ":func:", ":class:", ":data:", ":meth:"):
        assert markup not in text, f"{name} --help shows {markup!r}"
    assert not re.search(r"\S::\s*$", text, re.M), f"{name} --help shows a reST '::'"


def test_every_command_is_checked_and_plain_text_rules():
    assert {name.split()[1] for name, _ in list(_parsers())[1:]} == set(COMMANDS)
    assert plain_text("See :func:`~much_metric.scoring.score` and ``--source``.\nExamples::\n") == \
        "See score and --source.\nExamples:\n"
    assert plain_text(":mod:`much_metric.cli._preflight`") == "much_metric.cli._preflight"


def test_top_level_help_says_how_to_score_and_the_evaluate_error():
    text = " ".join(build_parser().format_help().split())
    assert "much_metric.score(" in text and "much install-metric" in text and "Couldn't find a module script" in text


@pytest.mark.parametrize("terminal", [True, False])
def test_monitor_says_what_it_loads_before_the_model(terminal, monkeypatch, capsys):
    import much_metric.cli.monitor as monitor

    seen = {}

    def load(args):
        seen["stderr"] = capsys.readouterr().err  # what the user saw when the slow load began
        raise ValueError("stop here")

    monkeypatch.setattr(monitor, "_load_model", load)
    monkeypatch.setattr(monitor.sys.stderr, "isatty", lambda: terminal, raising=False)
    assert main(["monitor", "--model", "smollm2", "--prompt", "hi"]) == 2
    if terminal:
        assert "much monitor: loading the model smollm2 on cpu ..." in seen["stderr"]
    else:  # piped: nothing but the one error line
        assert seen["stderr"] == "" and capsys.readouterr().err.count("\n") == 1
    assert capsys.readouterr().out == ""  # progress goes to stderr only


def test_monitor_no_progress_silences_its_lines_and_the_model_loading_bars(monkeypatch, capsys):
    """Issue 57: --no-progress on every long command; much monitor had none, and transformers' "Loading weights" bar
    printed even into a pipe. With it, nothing is said on a terminal and the library's bars are off while the model
    loads, then restored."""
    from transformers.utils import logging as transformers_logging

    import much_metric.cli.monitor as monitor

    seen = {}

    def load(args):
        seen["stderr"] = capsys.readouterr().err
        seen["bars"] = transformers_logging.is_progress_bar_enabled()
        raise ValueError("stop here")

    monkeypatch.setattr(monitor, "_load_model", load)
    monkeypatch.setattr(monitor.sys.stderr, "isatty", lambda: True, raising=False)
    assert transformers_logging.is_progress_bar_enabled()
    assert main(["monitor", "--model", "smollm2", "--prompt", "hi", "--no-progress"]) == 2
    assert seen == {"stderr": "", "bars": False}
    assert transformers_logging.is_progress_bar_enabled()  # restored for the rest of the process
    assert main(["monitor", "--model", "smollm2", "--prompt", "hi"]) == 2
    assert "loading the model" in seen["stderr"] and seen["bars"] is True


_NO_TORCH = """
import importlib.util, logging, sys
_find = importlib.util.find_spec
importlib.util.find_spec = lambda name, *a, **k: None if name.split(".")[0] == "torch" else _find(name, *a, **k)
# transformers now sees the light install: no torch
{body}
"""


def _without_torch(body: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1")
    env.pop("TRANSFORMERS_NO_ADVISORY_WARNINGS", None)
    return subprocess.run([sys.executable, "-c", _NO_TORCH.format(body=body)], env=env, capture_output=True,
                          text=True, timeout=300)


def test_light_install_prints_no_torch_notice_and_keeps_other_warnings():
    control = _without_torch("import transformers")
    assert "PyTorch was not found" in control.stderr  # the harness reproduces the light install's notice
    ours = _without_torch(
        "from much_metric.models import load_tokenizer\n"
        "load_tokenizer('smollm2')\n"
        "logger = logging.getLogger('transformers')\n"
        "assert logger.filters == [], logger.filters  # the filter lived only while transformers was imported\n"
        "logger.warning('PyTorch was not found (a later message)')\n"
    )
    assert ours.returncode == 0, ours.stderr
    assert "PyTorch was not found. Models won't be available" not in ours.stderr
    assert "a later message" in ours.stderr  # nothing global was switched off


def test_cli_prints_no_torch_notice(tmp_path):
    """A command that imports evaluate (and so transformers) in the light install: no notice."""
    done = _without_torch("from much_metric.cli import main\n"
                          f"sys.exit(main(['install-metric', '--modules-cache', {str(tmp_path)!r}]))")
    assert done.returncode == 0, done.stderr
    assert "installed" in done.stdout and "PyTorch was not found" not in done.stderr
