"""generate: chat prompt, per-question reseeding, top-24 capture (checked against an independent forward pass)."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from builder import _llm
from builder.cli import main
from builder.configs import GenerationConfig
from builder.generation import hf as gen
from builder.generation.rows import generation_id
from builder.store import read_store
from much_dataset import schema
from tests import assets
from tests.builder import _smollm

QUESTIONS = [
    {"question_id": "q-en", "lang": "en", "prompt": "What is the capital of Australia?",
     "wiki_url": "https://en.wikipedia.org/wiki/Canberra"},
    {"question_id": "q-fr", "lang": "fr", "prompt": "Quelle est la capitale de la France ?",
     "wiki_url": "https://fr.wikipedia.org/wiki/Paris"},
]


def _reference_probabilities(logits: np.ndarray, temperature: float) -> np.ndarray:
    """softmax(logits / T) over the full vocabulary, in float64 (the straightforward version of the capture)."""
    scaled = logits.astype(np.float64) / temperature
    probs = np.exp(scaled - scaled.max(axis=1, keepdims=True))
    return probs / probs.sum(axis=1, keepdims=True)


# Two logits one float32 ulp apart can get equal float32 probabilities (or swap after the division by T), so
# their order in the float32 capture is a tie order, not an error. The comparison therefore checks the capture's
# ids through the float64 probabilities they point to: same values in the same order, up to float32 resolution.
# (seed 245, row 5: logits -1.6438863 and -1.6438860 swap at every temperature.)
_NEAR_TIE_RTOL = 2e-5


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**31 - 1), st.sampled_from([0.7, 1.0, 1.3]), st.integers(1, 6))
@example(245, 0.7, 6)
@example(820, 0.7, 6)
def test_top_candidates_matches_a_straightforward_implementation(seed, temperature, n):
    import torch

    rng = np.random.default_rng(seed)
    logits = rng.normal(0, 3, size=(n, 300)).astype(np.float32)  # continuous: near-ties only, no exact ties
    chosen = rng.integers(0, 300, size=n)
    chosen[0] = int(np.argmax(logits[0]))  # one top-1 token, the others anywhere (often below rank 24)
    ids, probs, ranks, chosen_probs = _llm.top_candidates(torch.from_numpy(logits), torch.from_numpy(chosen),
                                                          temperature=temperature)
    head_ids, head_probs, head_ranks, head_chosen = _llm.top_candidates(
        torch.from_numpy(logits), torch.from_numpy(chosen), temperature=temperature, extend=False)
    assert head_chosen == chosen_probs
    reference = _reference_probabilities(logits, temperature)
    for row in range(n):
        ref_sorted = np.sort(reference[row])[::-1]
        # The rank may move inside a group of near-tied probabilities, never beyond it.
        tied_with_chosen = np.isclose(ref_sorted, reference[row, chosen[row]], rtol=_NEAR_TIE_RTOL, atol=0)
        assert tied_with_chosen[ranks[row]]
        assert len(ids[row]) == max(24, ranks[row] + 1) and ids[row][ranks[row]] == chosen[row]
        assert len(set(ids[row])) == len(ids[row])
        np.testing.assert_allclose(reference[row, ids[row]], ref_sorted[: len(ids[row])], rtol=_NEAR_TIE_RTOL,
                                   atol=1e-7)
        np.testing.assert_allclose(probs[row], ref_sorted[: len(ids[row])], rtol=_NEAR_TIE_RTOL, atol=1e-7)
        assert all(a >= b for a, b in zip(probs[row], probs[row][1:], strict=False))
        assert chosen_probs[row] == probs[row][ranks[row]]
        # extend=False: the same head, never a tail; the rank is exact in the head and >= 24 outside it.
        assert head_ids[row] == ids[row][:24] and head_probs[row] == probs[row][:24]
        assert head_ranks[row] == ranks[row] if ranks[row] < 24 else head_ranks[row] >= 24


def test_chat_messages_are_the_papers():
    """The chat is the one docs/reference-behaviour.md#prompt quotes (the prompt is written once in the code:
    tests/test_copies.py)."""
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs" / "reference-behaviour.md").read_text(encoding="utf-8")
    system, brief = re.search(r'The chat is a system message "([^"]+)" followed, when\s+`brief`, by "([^"]+)"',
                              page).groups()
    messages = _llm.chat_messages("Q?")
    assert messages[0] == {"role": "system", "content": system + brief}
    assert messages[1] == {"role": "user", "content": "Q?"}
    assert _llm.chat_messages("Q?", brief=False)[0]["content"] == system


def test_llama_today_date_is_pinned():
    tokenizer = assets.llama3_tokenizer()
    # The Llama-3.1 template prints the current date on a line of its own; this one mimics it.
    template = ("{{- bos_token }}\n{{- '<|start_header_id|>system<|end_header_id|>\\n\\n' }}\n"
                "{{- 'Today Date: ' + strftime_now('%d %b %Y') + '\\n\\n' }}\n"
                "{%- for m in messages %}{{- m['role'] + ': ' + m['content'] + '\\n' }}{%- endfor %}")
    original = tokenizer.chat_template  # the tokenizer is cached for the whole session: restore it
    tokenizer.chat_template = template
    try:
        prompt = _llm.build_prompt(tokenizer, "Who?")
    finally:
        tokenizer.chat_template = original
    assert "Today Date: 10 Jun 2025\n\n" in prompt
    assert prompt.count("Today Date") == 1
    assert "user: Who?" in prompt and "system: You are a helpful assistant." in prompt


@pytest.fixture(scope="module")
def llm():
    return _smollm.smollm2()


def _forward_probs(llm, question: str, tokens: list[int], temperature: float) -> np.ndarray:
    import torch

    prompt = llm.tokenizer.encode(_llm.build_prompt(llm.tokenizer, question), add_special_tokens=False)
    with torch.inference_mode():
        logits = llm.model(input_ids=torch.tensor([prompt + tokens])).logits[0, len(prompt) - 1: -1]
    return torch.softmax(logits.double() / temperature, dim=-1).numpy()


@pytest.mark.slow
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_generated_probabilities_match_a_teacher_forced_pass(llm, temperature):
    config = GenerationConfig(model_name="smollm2", temperature=temperature, max_new_tokens=12)
    record = gen.generate_batch(llm, config, QUESTIONS[:1])[0]
    tokens = record[schema.OUTPUT_TOKENS]
    assert 1 <= len(tokens) <= 12
    assert record[schema.OUTPUT] == llm.tokenizer.decode(tokens, skip_special_tokens=False)
    assert record[schema.GENERATION_CONFIG] == config.id and record[schema.GENERATION_ID] == generation_id(record)
    full = _forward_probs(llm, QUESTIONS[0]["prompt"], tokens, temperature)
    for i, (ids, probs) in enumerate(zip(record[schema.LOGITS_TOKEN_IDS], record[schema.LOGITS_VALUES], strict=True)):
        assert len(ids) == len(probs) >= 24 and tokens[i] in ids  # top_k=20 sampling keeps it in the top 24
        np.testing.assert_allclose(probs, full[i, ids], rtol=1e-3, atol=1e-6)
        # They are the largest probabilities of the full vocabulary (up to float noise at the cut).
        assert min(probs) >= np.sort(full[i])[-25] - 1e-5
        assert sum(probs) < 1.0 + 1e-5


@pytest.mark.slow
def test_reseed_before_every_question(llm):
    config = GenerationConfig(model_name="smollm2", max_new_tokens=10)
    both = gen.generate_batch(llm, config, QUESTIONS[:1]) + gen.generate_batch(llm, config, QUESTIONS[1:])
    alone = gen.generate_batch(llm, config, QUESTIONS[1:])
    again = gen.generate_batch(llm, config, QUESTIONS[:1])
    assert both[1][schema.OUTPUT_TOKENS] == alone[0][schema.OUTPUT_TOKENS]
    assert both[0] == again[0]  # same RNG state -> same sample and same probabilities
    other_seed = gen.generate_batch(llm, GenerationConfig(model_name="smollm2", seed=7, max_new_tokens=10),
                                    QUESTIONS[:1])
    assert other_seed[0][schema.GENERATION_CONFIG] != both[0][schema.GENERATION_CONFIG]


@pytest.mark.slow
def test_batched_generation_rows_are_well_formed(llm):
    config = GenerationConfig(model_name="smollm2", max_new_tokens=10)
    records = gen.generate_batch(llm, config, QUESTIONS)
    eos = set(_llm.eos_token_ids(llm.model, llm.tokenizer))
    for record in records:
        tokens = record[schema.OUTPUT_TOKENS]
        assert not eos.intersection(tokens[:-1])  # trimmed at the first EOS: no padding kept
        assert len(record[schema.LOGITS_TOKEN_IDS]) == len(tokens)
        assert all(t in ids for t, ids in zip(tokens, record[schema.LOGITS_TOKEN_IDS], strict=True))


@pytest.mark.slow
def test_cli_run_is_resumable_and_records_failures(llm, tmp_path, monkeypatch):
    monkeypatch.setattr(_llm, "load_model", lambda *a, **k: llm)  # the module's model: no second load
    (tmp_path / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    argv = ["generate", "--out", str(tmp_path), "--model", "/models/smollm2.gguf", "--model-name", "smol",
            "--temperature", "0.7", "--max-new-tokens", "6"]
    assert main([*argv, "--limit", "1"]) == 0
    assert main(argv) == 0  # resumes: only the second question is generated
    assert main(argv) == 0  # nothing left
    rows = list(read_store(tmp_path / "generations.jsonl"))
    assert [r["question_id"] for r in rows] == ["q-en", "q-fr"]
    config = GenerationConfig(model_name="smol", temperature=0.7, max_new_tokens=6)
    [stored] = list(read_store(tmp_path / "configs.jsonl"))
    assert stored["generation_config"] == config.id and stored["model_source"] == "/models/smollm2.gguf"
    # the dtype the values were computed in (float32 on CPU) is recorded per row and per config; one config has one
    assert stored["dtype"] == "float32" and {r["dtype"] for r in rows} == {"float32"}
    assert main([*argv, "--dtype", "bfloat16"]) == 2
    # A failing question is recorded with its reason; the others go on.
    real = gen.generate_batch

    def flaky(llm_, config_, batch, **kwargs):
        if batch[0]["question_id"] == "q-en":
            raise RuntimeError("CUDA out of memory")
        return real(llm_, config_, batch, **kwargs)

    monkeypatch.setattr(gen, "generate_batch", flaky)
    assert main(["generate", "--out", str(tmp_path), "--model", "x.gguf", "--model-name", "smol2",
                 "--max-new-tokens", "4", "--batch-size", "1"]) == 1  # one question per call: one fails alone
    failures = list(read_store(tmp_path / "generations.failures.jsonl"))
    assert len(failures) == 1 and "CUDA out of memory" in failures[0]["reason"]
    assert len(list(read_store(tmp_path / "generations.jsonl"))) == 3


def test_generate_without_questions_is_a_clear_error(tmp_path, capsys):
    assert main(["generate", "--out", str(tmp_path), "--model", "m"]) == 2
    assert re.search("questions.jsonl is empty", capsys.readouterr().err)
