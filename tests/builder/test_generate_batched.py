"""generate's exact batched path (issue 55): at batch 8 every row is what batch 1 (the reference: the global RNG
reseeded before each question) draws -- same tokens, probabilities within SAME_PROBABILITIES -- with prompts of
different lengths in one batch and rows that end (EOS) before the others; the CPU default; a killed batched run
resumes without duplicating or changing rows; verify re-forwards the batched rows."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from builder import _llm
from builder.cli import build_parser, main
from builder.configs import GenerationConfig
from builder.generate import default_batch_size
from builder.generation import hf as gen
from builder.store import read_store
from much_dataset import schema
from tests._floats import SAME_PROBABILITIES
from tests.builder import _smollm

REPO = Path(__file__).resolve().parents[2]
BATCH = ("--batch-size", "4")  # the kill test's batches: several in its 16 questions
PROMPTS = ["What is the capital of Australia?", "Quelle est la capitale de la France ?", "Say yes.",
           "Who wrote the novel War and Peace, and in which year was it first published?",
           "Reply with one word: hello.", "What is 2+2?", "Wer war Albert Einstein?", "Name a colour."]
QUESTIONS = [{"question_id": f"q{i}", "lang": "en", "prompt": prompt, "wiki_url": f"https://en.wikipedia.org/wiki/{i}"}
             for i, prompt in enumerate(PROMPTS)]


@pytest.fixture(scope="module")
def llm():
    return _smollm.smollm2()


def _assert_same_rows(batched: list[dict], alone: list[dict]) -> None:
    for mine, theirs in zip(batched, alone, strict=True):
        name = mine["question_id"]
        assert mine[schema.OUTPUT_TOKENS] == theirs[schema.OUTPUT_TOKENS], name
        assert mine[schema.LOGITS_TOKEN_IDS] == theirs[schema.LOGITS_TOKEN_IDS], name
        assert mine["finished"] == theirs["finished"], name
        for values, reference in zip(mine[schema.LOGITS_VALUES], theirs[schema.LOGITS_VALUES], strict=True):
            assert np.allclose(values, reference, rtol=0, atol=SAME_PROBABILITIES), name


@pytest.mark.slow
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_a_batch_of_eight_is_what_batch_one_draws(llm, temperature):
    config = GenerationConfig(model_name="smol", temperature=temperature, max_new_tokens=16)
    batched = gen.generate_batch(llm, config, QUESTIONS)
    alone = [gen.generate_batch(llm, config, [question])[0] for question in QUESTIONS]  # the reference, reseeded
    lengths = [len(llm.tokenizer.encode(_llm.build_prompt(llm.tokenizer, q["prompt"]))) for q in QUESTIONS]
    assert len(set(lengths)) > 1  # the batch is left-padded
    ended = [len(r[schema.OUTPUT_TOKENS]) for r in batched if r["finished"]]
    assert ended and min(ended) < max(len(r[schema.OUTPUT_TOKENS]) for r in batched)  # a row stops before others
    _assert_same_rows(batched, alone)
    # a row does not depend on its batch: the same question at another place in another batch
    again = gen.generate_batch(llm, config, QUESTIONS[5:] + QUESTIONS[:2])
    _assert_same_rows(again, alone[5:] + alone[:2])


@pytest.mark.slow
def test_the_candidates_come_from_the_raw_logits_when_the_model_changes_the_scores(llm, monkeypatch):
    """A model whose generation config adds its own processor (a repetition penalty) before the sampler: the batch
    still stores batch 1's candidates (generate's raw logits), not the penalised scores the sampler receives; and a
    seeded batch asks generate for no logits (it keeps one step's, not batch x steps x vocabulary)."""
    config = GenerationConfig(model_name="smol", temperature=1.0, max_new_tokens=12)
    monkeypatch.setattr(llm.model.generation_config, "repetition_penalty", 1.5)
    asked = []
    original = llm.model.generate
    monkeypatch.setattr(llm.model, "generate", lambda **kwargs: asked.append(kwargs["output_logits"])
                        or original(**kwargs))
    batched = gen.generate_batch(llm, config, QUESTIONS[:4])
    alone = [gen.generate_batch(llm, config, [question])[0] for question in QUESTIONS[:4]]
    assert asked == [False, True, True, True, True]
    _assert_same_rows(batched, alone)
    # the control: the penalised scores the sampler sees are not the raw logits (else this test proves nothing)
    seen = []
    monkeypatch.setattr(gen.SeededSampler, "__call__", lambda self, ids, scores: seen.append(
        bool((scores.float() != self.raw_logits).any())) or torch.full_like(scores, 0.0))
    gen.generate_batch(llm, GenerationConfig(model_name="smol", max_new_tokens=3), QUESTIONS[:2])
    assert any(seen[1:])


def test_generate_batches_64_questions_on_a_cpu_by_default():
    assert default_batch_size("hf", "cpu") == gen.HF_QUESTIONS_PER_BATCH == 64
    assert default_batch_size("hf", "cuda") == 1  # batch 1 draws from the GPU's RNG there
    assert default_batch_size("vllm", "cpu") == 1
    args = build_parser().parse_args(["generate", "--out", "o", "--model", "m"])
    assert args.batch_size is None  # resolved per engine and device; --batch-size 1 is the reference
    assert build_parser().parse_args(["generate", "--out", "o", "--model", "m", "--batch-size", "1"]).batch_size == 1


def _argv(out: Path, *extra: str) -> list[str]:
    return ["generate", "--out", str(out), "--model", _smollm.gguf_path(), "--model-name", "smol",
            "--temperature", "0.7", "--max-new-tokens", "8", "--device", "cpu", *extra]


def _rows(out: Path) -> list[dict]:
    return list(read_store(out / "generations.jsonl"))


@pytest.mark.slow
def test_a_killed_batched_run_resumes_without_duplicating_or_changing_rows(llm, tmp_path, monkeypatch):
    """SIGKILL after the first batch of 4 is stored, resume (batches of 4: the run has several): every question
    once, each row the one the reference (batch 1) draws; then verify re-forwards the batched rows and passes."""
    # distinct prompts: the same prompt draws the same row (same seed), and a row's id hashes its content
    questions = [{**q, "question_id": f"{q['question_id']}-{copy}", "prompt": f"{'Briefly: ' * copy}{q['prompt']}"}
                 for copy in range(2) for q in QUESTIONS]
    batched, reference = tmp_path / "batched", tmp_path / "reference"
    for out in (batched, reference):
        out.mkdir()
        (out / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in questions))
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    worker = subprocess.Popen([sys.executable, "-m", "builder", *_argv(batched, *BATCH)], cwd=REPO, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 1500  # a guard only: a loaded CPU takes minutes to load the GGUF
        while time.time() < deadline and worker.poll() is None:
            if (batched / "generations.jsonl").is_file() and len(_rows(batched)) >= int(BATCH[1]):
                break
            time.sleep(0.1)
        assert worker.poll() is None, "the run ended before it could be killed"
        worker.send_signal(signal.SIGKILL)
    finally:
        worker.wait()
    assert int(BATCH[1]) <= len(_rows(batched)) < len(questions)
    monkeypatch.setattr(_llm, "load_model", lambda *a, **k: llm)  # the module's model: no second load
    assert main(_argv(batched, *BATCH)) == 0
    assert main(_argv(reference, "--batch-size", "1")) == 0
    resumed, alone = _rows(batched), {r["question_id"]: r for r in _rows(reference)}
    assert sorted(r["question_id"] for r in resumed) == sorted(alone)  # each question once
    _assert_same_rows(resumed, [alone[r["question_id"]] for r in resumed])
    assert main(["verify", "--out", str(tmp_path / "verify"), "--source", str(batched / "generations.jsonl"),
                 "--model", _smollm.gguf_path(), "--temperature", "0.7", "--rows", str(len(questions))]) == 0
    report = json.loads((tmp_path / "verify" / "verify.json").read_text())
    assert report["rows"] == len(questions)
