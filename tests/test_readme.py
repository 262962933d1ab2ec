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


def test_readme_extension_examples_build_a_baseline_and_a_metric():
    """The "Adding a method or a metric" snippets define objects that work with the registry and the metric code."""
    import numpy as np

    from much_dataset import synthetic
    from much_metric.baselines import token_arrays
    from much_metric.scoring import Curves

    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)[1:]
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, str(README), "exec"), namespace)
    (baseline,) = namespace["BASELINES"]
    arrays = token_arrays(synthetic.make_rows(4, seed=0))
    scores = baseline.compute(arrays)
    assert scores.shape == (arrays.n_tokens,) and np.all((scores >= 0) & (scores <= 1))
    metric = namespace["TPR_AT_FPR_5"]
    tps, fps = np.array([[0.0, 2, 3, 4]]), np.array([[0.0, 0, 1, 10]])
    assert metric.function(Curves.from_counts(tps, fps))[0] == 0.5  # FPR 0.1 > 0.05 excludes the recall-0.75 point
