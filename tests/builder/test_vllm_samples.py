"""builder samples --engine vllm: n samples of an answer as ONE request (shared prefill) keep MUCH's sampler and
exact probabilities (a teacher-forced Hugging Face pass), and draw what one request per sample with its own seed
draws. Real vLLM on CPU, float32; run by scripts/run_vllm_tests.sh in its own venv (a skip elsewhere)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests._tools import require_module

require_module("vllm", "vllm", "vLLM is tested by scripts/run_vllm_tests.sh in its own venv")

from much_dataset import schema  # noqa: E402
from much_dataset.samples import load_samples, sample_seed  # noqa: E402
from tests.builder import _smollm  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
os.environ.setdefault("VLLM_CPU_CI_ENV", "1")  # eager instead of inductor: minutes less per engine start
N, MAX_NEW = 4, 24
ANSWERS = [  # questions written for this test
    {"generation_id": "v-en", "generation_config": "cfg", "question_id": "q1", "lang": "en",
     "wiki_url": "https://en.wikipedia.org/wiki/Ob_River", "prompt": "Into which sea does the Ob river flow?"},
    {"generation_id": "v-it", "generation_config": "cfg", "question_id": "q2", "lang": "fr",
     "wiki_url": "https://fr.wikipedia.org/wiki/Viaduc_de_Millau", "prompt": "Qui a conçu le viaduc de Millau ?"},
]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return _smollm.safetensors_folder(tmp_path_factory.mktemp("smollm2-safetensors"))


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("answers")
    (folder / "generations.jsonl").write_text("".join(json.dumps(a) + "\n" for a in ANSWERS))
    return folder


def _samples(model_dir: Path, source: Path, pack: Path, temperature: float, *extra: str) -> Path:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE",
                                                                                            "1")}
    cmd = [sys.executable, "-m", "builder", "samples", "--source", str(source), "--out", str(pack), "--model",
           str(model_dir), "--model-name", "smol", "--engine", "vllm", "--n", str(N), "--max-new-tokens", str(MAX_NEW),
           "--temperature", str(temperature), "--dtype", "float32", *extra]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    return pack


def _teacher_forced_worst(model_dir: Path, rows: list[dict], temperature: float) -> float:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from builder._llm import build_prompt

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    worst = 0.0
    for row in rows:
        prompt = tokenizer.encode(build_prompt(tokenizer, row[schema.PROMPT], brief=True), add_special_tokens=False)
        tokens = row[schema.OUTPUT_TOKENS]
        with torch.inference_mode():
            logits = model(input_ids=torch.tensor([prompt + tokens])).logits[0, len(prompt) - 1:-1].double()
        probs = torch.softmax(logits / temperature, dim=-1).numpy()
        for t, (token, ids, values) in enumerate(zip(tokens, row[schema.LOGITS_TOKEN_IDS], row[schema.LOGITS_VALUES],
                                                     strict=True)):
            assert len(ids) == schema.TOP_K and token in ids[:20]  # MUCH's sampler: inside the stored top 20
            worst = max(worst, float(np.abs(probs[t, ids] - np.asarray(values, dtype=np.float64)).max()))
    return worst


@pytest.mark.slow
def test_n_per_request_samples_are_exact_and_those_of_their_own_seeds(model_dir, source, tmp_path):
    packs = {t: _samples(model_dir, source, tmp_path / f"pack-{t}", t) for t in (1.0, 0.7)}
    for temperature, pack in packs.items():
        rows = load_samples(pack, dataset=ANSWERS, cache_dir=tmp_path / "cache").to_list()
        assert len(rows) == len(ANSWERS) * N
        assert [r["sampling"]["seed"] for r in rows] == [sample_seed(1234, i) for _ in ANSWERS for i in range(N)]
        assert len({tuple(r["output_tokens"]) for r in rows}) > len(ANSWERS)  # indices draw different answers
        worst = _teacher_forced_worst(model_dir, rows, temperature)
        print(f"\nvllm samples (n per request) at T={temperature}: max |p - teacher-forced| = {worst:.3g}")
        assert worst <= 5e-5
    # one request per sample, each with its own seed, draws the same samples as the n-per-request run
    alone = _samples(model_dir, source, tmp_path / "alone", 0.7, "--no-share-prefill", "--limit", "1")
    shared = load_samples(packs[0.7], dataset=ANSWERS[:1], cache_dir=tmp_path / "cache").to_list()
    single = load_samples(alone, dataset=ANSWERS[:1], cache_dir=tmp_path / "cache").to_list()
    assert [r["output_tokens"] for r in single] == [r["output_tokens"] for r in shared]
    assert np.allclose(np.concatenate([np.ravel(r["logits_values"]) for r in single]),
                       np.concatenate([np.ravel(r["logits_values"]) for r in shared]), atol=5e-5)
