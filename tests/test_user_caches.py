"""The test suite leaves the user's Hugging Face caches alone (~/.cache/huggingface, i.e. HF_HOME).

A representative part of the suite -- building dataset folders and loading them with ``datasets``, loading the
embedded sample, ``much run`` on it, ``much_metric.load_metric()`` -- runs in a child pytest whose HOME is a fresh
temporary folder and whose environment names no Hugging Face cache, so that every default points into that HOME.
Afterwards that HOME must hold no Hugging Face cache: tests/conftest.py's private caches took every write.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

_REPRESENTATIVE = [
    "tests/much_dataset/test_card.py",
    "tests/much_metric/cli/test_cli_run.py::test_run_on_the_embedded_sample",
    "tests/test_user_caches.py::test_loads_metric_and_sample_in_process",
]


def _listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")) if folder.exists() else []


def test_loads_metric_and_sample_in_process():
    """Run by the child pytest below: the in-process loads whose caches default to the user's HF_HOME."""
    import much_dataset
    import much_metric

    metric = much_metric.load_metric()
    data = much_dataset.load("sample", split="test").select(range(20))
    result = metric.compute(predictions=[[0.5] * len(t) for t in data["output_tokens"]], references=data["labels"],
                            token_chunks=data["token_chunks"])
    assert result["n_samples"] == 20


@pytest.mark.slow
def test_suite_leaves_the_user_hf_cache_untouched(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HF_", "HUGGINGFACE_", "TRANSFORMERS_", "XDG_CACHE"))}
    env.update(HOME=str(home), PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1")
    before = _listing(home)
    completed = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *_REPRESENTATIVE],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=900,
    )
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-2000:]
    assert " passed" in completed.stdout and " skipped" not in completed.stdout
    after = _listing(home)
    hf = [p for p in after if p.startswith(os.path.join(".cache", "huggingface"))]
    assert before == [] and hf == [], f"the tests wrote into the user's Hugging Face cache: {hf[:10]}"
