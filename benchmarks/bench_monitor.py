"""Overhead of real-time claim monitoring: SmolLM2 on CPU, batch 1, greedy, the same answers with and without
:class:`much_metric.monitor.ClaimMonitor` in one run.

Each prompt is generated alternately without and with the monitor, ``--repeats`` times; the best (minimum) wall time
of each side is kept (least disturbed by other processes). Both sides must produce the same tokens. Prints the
added wall time and the shares of the capture (softmax + top-24), the segmenter and the scorer in it.

    python benchmarks/bench_monitor.py [--max-new-tokens 64] [--repeats 3] [--method token_entropy_24]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

PROMPTS = ("Who wrote Les Misérables?", "What is the capital of Australia?", "When was Marie Curie born?",
           "Quelle est la capitale de la France ?")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--method", default="token_entropy_24")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (1: least noise on a shared box)")
    args = parser.parse_args()

    import torch

    from much_dataset.schema import chat_messages
    from much_metric.models import load_causal_lm
    from much_metric.monitor import ClaimMonitor

    torch.set_num_threads(args.threads)
    model, tokenizer = load_causal_lm("smollm2", device="cpu")
    monitor = ClaimMonitor(tokenizer, args.method)
    kwargs = {"do_sample": False, "max_new_tokens": args.max_new_tokens, "pad_token_id": tokenizer.eos_token_id}
    plain_best, monitored_best, shares, n_tokens = 0.0, 0.0, {"capture": 0.0, "segmenter": 0.0, "scorer": 0.0}, 0
    for prompt in PROMPTS:
        ids = torch.tensor([tokenizer.encode(tokenizer.apply_chat_template(chat_messages(prompt), tokenize=False,
                                                                           add_generation_prompt=True),
                                             add_special_tokens=False)])
        mask = torch.ones_like(ids)
        with torch.inference_mode():
            model.generate(ids, attention_mask=mask, **kwargs)  # warm-up
        plain, monitored = [], []
        for _ in range(args.repeats):
            started = time.perf_counter()
            with torch.inference_mode():
                out = model.generate(ids, attention_mask=mask, **kwargs)
            plain.append(time.perf_counter() - started)
            monitor.timings = {"capture": 0.0, "segmenter": 0.0, "scorer": 0.0}
            started = time.perf_counter()
            claims = list(monitor.generate(model, ids, attention_mask=mask, **kwargs))
            monitored.append(time.perf_counter() - started)
            if monitor.token_ids != out[0, ids.shape[1]:].tolist():
                raise SystemExit(f"{prompt!r}: the monitored generation differs from the plain one")
        best = min(range(args.repeats), key=monitored.__getitem__)
        plain_best += min(plain)
        monitored_best += monitored[best]
        n_tokens += len(monitor.token_ids)
        for key in shares:
            shares[key] += monitor.timings[key]  # of the last repeat (all repeats do the same work)
        print(f"{prompt[:40]:40s} {len(monitor.token_ids):4d} tokens {len(claims):3d} claims  plain "
              f"{min(plain):7.3f} s  monitored {monitored[best]:7.3f} s  ratio {monitored[best] / min(plain):.4f}")
    ratio = monitored_best / plain_best
    method = args.method if not args.method.startswith("learned:") else f"learned:{Path(args.method[8:]).name}"
    print(f"\nSmolLM2-135M (GGUF dequantised, float32), CPU, batch 1, greedy, {n_tokens} tokens, {method}, "
          f"torch threads {args.threads}, best of {args.repeats}")
    print(f"generate without monitor: {plain_best:.3f} s; with monitor: {monitored_best:.3f} s; "
          f"ratio {ratio:.4f} (added {100 * (ratio - 1):+.2f}% wall time)")
    for key, value in shares.items():
        print(f"  {key:9s} {1000 * value:8.2f} ms = {100 * value / plain_best:.2f}% of generation time, "
              f"{1e6 * value / n_tokens:.1f} us/token")


if __name__ == "__main__":
    main()
