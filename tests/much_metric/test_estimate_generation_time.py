"""Generation-time measurement (docs/reference-behaviour.md#generation-time-estimate design) and
scripts/tools/estimate_generation_time.py, with a tiny randomly
initialised Llama model and the real SmolLM2 tokenizer (the full SmolLM2 model loads in ~17 s: not in tests)."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import numpy as np
import pytest

from tests import assets
from tests.much_metric._baselines_helpers import one_torch_thread

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "tools" / "estimate_generation_time.py"
_SPEC = importlib.util.spec_from_file_location("estimate_generation_time", SCRIPT)
estimate_generation_time = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(estimate_generation_time)
extrapolate = estimate_generation_time.extrapolate
measure_generation = estimate_generation_time.measure_generation
pick_questions = estimate_generation_time.pick_questions


@pytest.fixture(autouse=True)
def _one_torch_thread():
    with one_torch_thread():
        yield


@pytest.fixture(scope="module")
def tiny_llm():
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = assets.smollm2_tokenizer()
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, eos_token_id=tokenizer.eos_token_id)
    return LlamaForCausalLM(config).eval(), tokenizer


def test_pick_questions_is_seeded_and_distinct():
    prompts = [f"q{i % 40}" for i in range(100)]  # 40 distinct questions, repeated as in MUCH (8 answers each)
    picked = pick_questions(prompts)
    assert len(picked) == math.ceil(0.05 * 40) == len(set(picked))
    assert picked == pick_questions(prompts)  # RandomState(42)
    assert len(pick_questions(prompts, n_questions=7)) == 7
    with pytest.raises(ValueError, match="cannot time 41"):
        pick_questions(prompts, n_questions=41)
    with pytest.raises(ValueError, match="no prompt"):
        pick_questions([])


def test_measure_generation_counts_tokens_and_rates(tiny_llm):
    model, tokenizer = tiny_llm
    result = measure_generation(model, tokenizer, ["What is the capital of France?", "Who wrote Hamlet?"],
                                max_new_tokens=4, progress=False)
    assert result["n_questions_timed"] == 2
    assert 2 <= result["generated_tokens"] <= 8  # at most max_new_tokens each, at least one
    assert result["timed_seconds"] > 0
    assert result["seconds_per_question"] == pytest.approx(result["timed_seconds"] / 2)
    assert result["seconds_per_token"] == pytest.approx(result["timed_seconds"] / result["generated_tokens"])
    assert result["device"].startswith("cpu")
    assert extrapolate(result, n_samples=10, n_tokens=100) == pytest.approx(100 * result["seconds_per_token"])
    assert extrapolate(result, n_samples=10, n_tokens=100, mode="questions") == pytest.approx(
        10 * result["seconds_per_question"])
    with pytest.raises(ValueError, match="mode"):
        extrapolate(result, n_samples=1, n_tokens=1, mode="words")


def test_script_writes_a_file_much_run_reads(tiny_llm, tmp_path, monkeypatch):
    from much_dataset import synthetic
    from much_metric import models
    from much_metric.baselines.runtime import generation_time

    rows = synthetic.make_rows(20, seed=1)
    (tmp_path / "rows").mkdir()
    for split, part in (("train", rows[:10]), ("test", rows[10:])):
        (tmp_path / "rows" / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in part))
    monkeypatch.setattr(models, "load_causal_lm", lambda name, device=None: tiny_llm)
    spec = importlib.util.spec_from_file_location("estimate_generation_time", SCRIPT)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    out = tmp_path / "generation_time.json"
    assert script.main(["--source", str(tmp_path), "--n-questions", "2", "--max-new-tokens", "3",
                        "--out", str(out)]) == 0
    record = json.loads(out.read_text())
    n_tokens = sum(len(r["output_tokens"]) for r in rows)
    assert record["n_dataset_samples"] == 20 and record["n_dataset_tokens"] == n_tokens
    assert record["generation_seconds"] == pytest.approx(record["seconds_per_token"] * n_tokens)
    # much run extrapolates the same rate to whatever it evaluates.
    estimate = generation_time(str(out), data_source=str(tmp_path), n_samples=5, n_tokens=50)
    assert estimate.seconds == pytest.approx(record["seconds_per_token"] * 50)
    assert np.isfinite(estimate.seconds)

