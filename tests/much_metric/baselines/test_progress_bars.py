"""Issue #43: nested progress bars (a signal's blocks under the signals bar) printed a stray ``ESC [A`` on every line
when stderr was a file or a pipe; on a terminal they still redraw in place."""

from __future__ import annotations

import io
import sys

import pytest

import much_dataset
from much_metric.baselines import ResourceOptions, SignalOptions, compute_signals

CURSOR_UP = "\x1b[A"


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture(scope="module")
def rows():
    return much_dataset.load("sample", split="test").select(range(6))


def _run(rows, stream, monkeypatch) -> str:
    monkeypatch.setattr(sys, "stderr", stream)
    # KTC needs neighbour statistics, so it is computed block by block (3 blocks of 2): a nested bar.
    compute_signals(rows, ["ktc", "max_likelihood"], resources=ResourceOptions(), progress=True,
                    options=SignalOptions(block_size=2))
    return stream.getvalue()


def test_no_cursor_moves_when_stderr_is_not_a_terminal(rows, monkeypatch):
    printed = _run(rows, io.StringIO(), monkeypatch)
    assert "signals" in printed  # the outer bar still shows progress
    assert CURSOR_UP not in printed


def test_a_terminal_still_gets_the_nested_bar(rows, monkeypatch):
    printed = _run(rows, _Terminal(), monkeypatch)
    assert "KTC" in printed and CURSOR_UP in printed
