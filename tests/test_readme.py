"""The README's code example runs as written, offline, on the embedded sample."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_python_example_runs(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_EVALUATE_OFFLINE", "1")
    block = re.search(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S).group(1)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block, str(README), "exec"), {})
    printed = out.getvalue()
    roc_auc = float(re.search(r"'roc_auc': (?:np\.float64\()?([0-9.]+)", printed).group(1))
    assert 0.5 < roc_auc < 1.0, printed  # token entropy beats chance on real Mu-SHROOM labels
