"""Measure LLM generation time on this machine and extrapolate it to a dataset
(docs/reference-behaviour.md#generation-time-estimate design).

The paper reports every UQ runtime relative to the time the LLM took to generate the answers. The reference's
``evaluate-generation-time`` loads each model, generates the first question once untimed (warm-up), times the
generation of ``ceil(0.05 N)`` questions drawn without replacement with ``RandomState(42)`` and extrapolates to
the ``N`` questions. :func:`measure_generation` does the same for one model, with the MUCH prompt and sampling
settings (docs/reference-behaviour.md#prompt, #sampling: system prompt, seed reset before each question, temperature,
top-p 0.9, top-k 20,
raw logits captured), and records both rates -- seconds per question and seconds per generated token -- so that
the estimate can be extrapolated by questions (the reference) or by output tokens (better when the timed model is
not the one that wrote the dataset's answers, as for the embedded sample).

``scripts/tools/estimate_generation_time.py`` is the command-line front end.
"""

from __future__ import annotations

import math
import platform
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["SYSTEM_PROMPT", "pick_questions", "measure_generation", "extrapolate"]

#: MUCH's system prompt (docs/reference-behaviour.md#prompt, ``brief=True``).
SYSTEM_PROMPT = ("You are a helpful assistant. Always answer questions directly. Your answers should be very concise "
                 "and precise.")


def pick_questions(prompts: Sequence[str], *, fraction: float = 0.05, n_questions: int | None = None,
                   seed: int = 42) -> list[str]:
    """Distinct prompts, then ``n_questions`` (default ``ceil(fraction * n)``) drawn without replacement."""
    unique = list(dict.fromkeys(prompts))
    if not unique:
        raise ValueError("no prompt to time")
    count = n_questions if n_questions is not None else math.ceil(fraction * len(unique))
    if not 1 <= count <= len(unique):
        raise ValueError(f"cannot time {count} questions out of {len(unique)} distinct prompts")
    picked = np.random.RandomState(seed).choice(len(unique), size=count, replace=False)
    return [unique[i] for i in picked]


def _encode(tokenizer: Any, prompt: str):
    chat = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": prompt}]
    if getattr(tokenizer, "chat_template", None):
        text = tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
        return tokenizer(text, add_special_tokens=False, return_tensors="pt")
    return tokenizer(f"{SYSTEM_PROMPT}\n\n{prompt}\n", return_tensors="pt")


def measure_generation(
    model: Any,
    tokenizer: Any,
    questions: Sequence[str],
    *,
    temperature: float = 1.0,
    max_new_tokens: int = 500,
    seed: int = 1234,
    warmup: bool = True,
    progress: bool = True,
) -> dict[str, Any]:
    """Time sampling answers to ``questions`` (one at a time, batch size 1, as MUCH was generated).

    Returns a dict with ``n_questions_timed``, ``timed_seconds``, ``generated_tokens`` (EOS included),
    ``seconds_per_question``, ``seconds_per_token`` and the settings. The warm-up generation (first question,
    untimed) absorbs one-off costs (kernel selection, caches), as in the reference.
    """
    import torch
    from tqdm.auto import tqdm

    if not questions:
        raise ValueError("no question to time")
    device = next(model.parameters()).device
    options = dict(do_sample=True, temperature=temperature, top_p=0.9, top_k=20, max_new_tokens=max_new_tokens,
                   return_dict_in_generate=True, output_logits=True, pad_token_id=tokenizer.pad_token_id
                   if tokenizer.pad_token_id is not None else tokenizer.eos_token_id)

    def generate(prompt: str):
        inputs = _encode(tokenizer, prompt).to(device)
        torch.manual_seed(seed)
        np.random.seed(seed)
        with torch.inference_mode():
            out = model.generate(**inputs, **options)
        return out.sequences.shape[1] - inputs["input_ids"].shape[1]

    if warmup:
        generate(questions[0])
    total, tokens = 0.0, 0
    for prompt in tqdm(questions, desc="timing generation", unit="question", disable=not progress):
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        tokens += generate(prompt)
        if device.type == "cuda":
            torch.cuda.synchronize()
        total += time.perf_counter() - start
    return {
        "n_questions_timed": len(questions),
        "timed_seconds": total,
        "generated_tokens": int(tokens),
        "seconds_per_question": total / len(questions),
        "seconds_per_token": total / max(tokens, 1),
        "temperature": temperature,
        "max_new_tokens": max_new_tokens,
        "seed": seed,
        "device": _describe(device),
    }


def _describe(device: Any) -> str:
    import torch

    if device.type == "cuda":
        return f"cuda ({torch.cuda.get_device_name(device)})"
    return f"cpu ({platform.processor() or platform.machine()}, {torch.get_num_threads()} torch threads)"


def extrapolate(measurement: dict[str, Any], *, n_samples: int, n_tokens: int, mode: str = "tokens") -> float:
    """Estimated generation time of a dataset: per-token rate x its output tokens, or per-question x samples."""
    if mode == "tokens":
        return measurement["seconds_per_token"] * n_tokens
    if mode == "questions":
        return measurement["seconds_per_question"] * n_samples
    raise ValueError(f"mode must be 'tokens' or 'questions', got {mode!r}")
