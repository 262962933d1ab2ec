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
CARD = ROOT / "much_metric" / "README.md"
EXTENDING = ROOT / "docs" / "extending.md"


def test_readme_python_example_runs(monkeypatch, tmp_path):
    """Both python blocks, in order, as a reader pastes them: the library route, then the evaluate route."""
    import warnings

    from much_metric.scoring import MissingStopwordMaskWarning

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_EVALUATE_OFFLINE", "1")
    monkeypatch.setenv("HF_MODULES_CACHE", str(tmp_path / "modules"))  # install_metric() writes here, not in ~
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    assert len(blocks) == 2, "expected the much_metric.score example and the evaluate example"
    assert "much_dataset.load(" in blocks[0] and "much_metric.score(" in blocks[0]
    assert "datasets.load_dataset(" not in "".join(blocks)  # the hub rows lack stopword_mask: the loader adds it
    namespace: dict = {}
    printed = []
    with warnings.catch_warnings():
        warnings.simplefilter("error", MissingStopwordMaskWarning)
        for block in blocks:
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                exec(compile(block, str(README), "exec"), namespace)
            printed.append(out.getvalue())
    roc_auc = float(re.search(r"ROC-AUC ([0-9.]+)", printed[0]).group(1))
    assert 0.5 < roc_auc < 1.0, printed  # token entropy beats chance on real Mu-SHROOM labels
    assert round(float(printed[1]), 4) == roc_auc  # the evaluate route gives the same number
    assert namespace["result"].n_claims == int(re.search(r"claims (\d+)", printed[0]).group(1))


def test_metric_card_leads_with_score_on_much_dataset_load_and_agrees_with_the_readme(monkeypatch, tmp_path):
    """much_metric/README.md: its first python block is much_metric.score on much_dataset.load (run as written on the
    embedded sample), the evaluate block comes after it and gives the same ROC-AUC, and the printed number is the
    front page's (same method, same split)."""
    import warnings

    from much_metric.scoring import MissingStopwordMaskWarning

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_EVALUATE_OFFLINE", "1")
    monkeypatch.setenv("HF_MODULES_CACHE", str(tmp_path / "modules"))
    text = CARD.read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert "much_dataset.load(" in blocks[0] and "much_metric.score(" in blocks[0], blocks[0]
    assert "evaluate.load(" in blocks[1] and text.index("much_metric.score(") < text.index("evaluate.load(")
    assert "datasets.load_dataset(" not in "".join(blocks)
    namespace: dict = {}
    printed = []
    with warnings.catch_warnings():
        warnings.simplefilter("error", MissingStopwordMaskWarning)
        for block in blocks[:2]:
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                exec(compile(block, str(CARD), "exec"), namespace)
            printed.append(out.getvalue())
    roc_auc = float(re.search(r"ROC-AUC ([0-9.]+)", printed[0]).group(1))
    assert 0.5 < roc_auc < 1.0
    assert round(float(printed[1]), 4) == roc_auc == round(namespace["same"]["roc_auc"], 4)
    corrected = namespace["corrected"]
    assert (corrected.aggregator, corrected.stopword_handling) == ("max", "exclude")
    assert corrected.roc_auc != namespace["result"].roc_auc
    front = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)[0]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(front, str(README), "exec"), {})
    assert out.getvalue() == printed[0].splitlines(keepends=True)[0]


def test_readme_quotes_evaluate_error_without_install(tmp_path):
    """The message the README quotes is the one evaluate gives for "much" before install_metric()."""
    import os
    import subprocess
    import sys

    quoted = re.search(r"evaluate's own message `(Couldn't find .*?)`", README.read_text(encoding="utf-8"), re.S)
    assert quoted, "README should quote evaluate's error for evaluate.load('much') before install_metric()"
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_EVALUATE_OFFLINE="1", HF_MODULES_CACHE=str(tmp_path / "modules"),
               HF_HOME=str(tmp_path / "hf"))
    done = subprocess.run([sys.executable, "-c", "import evaluate; evaluate.load('much')"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    message = " ".join(quoted.group(1).split())
    prefix, suffix = message.split("...")
    last = done.stderr.strip().splitlines()[-1]
    assert prefix in last and suffix in last, last


def test_readme_extension_examples_build_a_baseline_and_a_metric():
    """docs/extending.md's snippets define objects that work with the registry, the metric code and the detector
    kinds."""
    import numpy as np

    from much_dataset import synthetic
    from much_metric.baselines import token_arrays
    from much_metric.scoring import Curves

    blocks = re.findall(r"```python\n(.*?)```", EXTENDING.read_text(encoding="utf-8"), re.S)
    assert len(blocks) == 6, "expected the method file, the claim-level method, the plugin module, the detector " \
                             "kind's module and entry and the metric examples"
    namespace: dict = {}
    declared = []  # each method file's BASELINES, in page order
    for block in blocks:
        exec(compile(block, str(EXTENDING), "exec"), namespace)
        if "BASELINES" in namespace and namespace["BASELINES"] not in declared:
            declared.append(namespace["BASELINES"])
    plugin = namespace["TOP2_GAP"]
    assert plugin.name == "top2_gap"
    ((baseline,), (claim_level,)) = declared
    arrays = token_arrays(synthetic.make_rows(4, seed=0))
    scores = baseline.compute(arrays)
    assert scores.shape == (arrays.n_tokens,) and np.all((scores >= 0) & (scores <= 1))
    assert claim_level.level == "claim"
    per_claim = claim_level.compute(arrays)
    assert len(per_claim) == arrays.n_samples and all(np.all((v >= 0) & (v <= 1)) for v in per_claim)
    kind, module = namespace["WIDE"], namespace["WideModule"]
    assert kind.name == "wide" and kind.module == "my_kinds.wide:WideModule" and kind.defaults["width"] == 16
    built = module(len(kind.input_names), rng=np.random.default_rng(0), width=kind.defaults["width"])
    assert built.hidden.weight.shape == (16, len(kind.input_names))
    metric = namespace["TPR_AT_FPR_5"]
    tps, fps = np.array([[0.0, 2, 3, 4]]), np.array([[0.0, 0, 1, 10]])
    assert metric.function(Curves.from_counts(tps, fps))[0] == 0.5  # FPR 0.1 > 0.05 excludes the recall-0.75 point


def test_readme_keeps_the_two_setup_commands():
    """The front page's two set-up commands, each alone in a bash block, exactly as the docs and CI expect them."""
    text = README.read_text(encoding="utf-8")
    bash_blocks = [block.strip() for block in re.findall(r"```bash\n(.*?)```", text, re.S)]
    assert "pip install . && much run --source sample" in bash_blocks
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


def test_evaluating_page_leads_with_score_and_its_evaluate_block_runs(monkeypatch, tmp_path):
    """docs/evaluating.md: much_metric.score first; the evaluate block loads with much_dataset.load and runs."""
    import warnings

    from much_metric.scoring import MissingStopwordMaskWarning

    text = (ROOT / "docs" / "evaluating.md").read_text(encoding="utf-8")
    headings = re.findall(r"^## (.*)$", text, re.M)
    assert headings[0].startswith("With the library") and headings[1].startswith("With `evaluate`"), headings
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    evaluate_block = next(block for block in blocks if "evaluate.load(" in block)
    assert "datasets.load_dataset(" not in evaluate_block and "much_dataset.load(" in evaluate_block
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_EVALUATE_OFFLINE", "1")
    monkeypatch.setenv("HF_MODULES_CACHE", str(tmp_path / "modules"))
    out = io.StringIO()
    with warnings.catch_warnings(), contextlib.redirect_stdout(out):
        warnings.simplefilter("error", MissingStopwordMaskWarning)
        exec(compile(evaluate_block, "docs/evaluating.md", "exec"), {})
    assert 0.5 < float(re.search(r"'roc_auc': (?:np\.float64\()?([0-9.]+)", out.getvalue()).group(1)) < 1.0
