"""The README's code example runs as written, offline, on the embedded sample; its set-up commands and links hold.

The extension examples (a method file, a plugin, a metric) live in docs/extending.md and are checked here too.
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
EXTENDING = ROOT / "docs" / "extending.md"


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
    """docs/extending.md's snippets define objects that work with the registry and the metric code."""
    import numpy as np

    from much_dataset import synthetic
    from much_metric.baselines import token_arrays
    from much_metric.scoring import Curves

    blocks = re.findall(r"```python\n(.*?)```", EXTENDING.read_text(encoding="utf-8"), re.S)
    assert len(blocks) == 3, "expected the method file, the plugin module and the metric examples"
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, str(EXTENDING), "exec"), namespace)
    plugin = namespace["TOP2_GAP"]
    assert plugin.name == "top2_gap"
    (baseline,) = namespace["BASELINES"]
    arrays = token_arrays(synthetic.make_rows(4, seed=0))
    scores = baseline.compute(arrays)
    assert scores.shape == (arrays.n_tokens,) and np.all((scores >= 0) & (scores <= 1))
    metric = namespace["TPR_AT_FPR_5"]
    tps, fps = np.array([[0.0, 2, 3, 4]]), np.array([[0.0, 0, 1, 10]])
    assert metric.function(Curves.from_counts(tps, fps))[0] == 0.5  # FPR 0.1 > 0.05 excludes the recall-0.75 point


def test_readme_keeps_the_two_setup_commands():
    """The front page's two set-up commands, each alone in a bash block, exactly as the docs and CI expect them."""
    text = README.read_text(encoding="utf-8")
    bash_blocks = [block.strip() for block in re.findall(r"```bash\n(.*?)```", text, re.S)]
    assert "pip install . && much run --data sample" in bash_blocks
    assert "bash scripts/run_tests.sh" in bash_blocks
    assert (ROOT / "scripts" / "run_tests.sh").is_file()


def test_readme_links_point_to_existing_files_and_anchors():
    text = README.read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)#]+)(?:#([^)]+))?\)", text)
    assert len(links) >= 10, links
    for target, anchor in links:
        path = ROOT / target
        assert path.is_file(), f"README links to {target}, which does not exist"
        if anchor:
            assert f"{{#{anchor}}}" in path.read_text(encoding="utf-8"), f"no anchor #{anchor} in {target}"
