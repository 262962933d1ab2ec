"""Speed of the baselines, ours vs the straightforward per-token implementation, in the same run.

1. Token Likelihood + Max Likelihood + Token Entropy (delta 24) on a MUCH-sized synthetic split (4,873 samples,
   ~24.5 tokens each), from a typed ``datasets.Dataset``: ours (vectorised over the split) vs a per-token Python
   loop (scipy entropy per token, as the reference). Target: ours < 0.2 s in total.
2. CCP (delta 10, sigma 8) with a tiny randomly initialised DeBERTa-v2 NLI classifier on real Mu-SHROOM answers
   (Llama-3 tokenizer): ours (all pairs of the split, de-duplicated, length-sorted, batched) vs the reference's
   structure (one padded NLI batch per token, holding that token's candidate pairs). Same inputs, both warmed up,
   best of 5; the CCP values are checked equal. Ours runs with the library's batching defaults unless
   ``--batch-size`` / ``--max-batch-tokens`` are given. Target ratio >= 5x on CPU. On a CPU the NLI forward passes are
   compute-bound from ~10 pairs per batch on, so batching buys less there than on a GPU; on a shared, oversubscribed
   machine use ``--threads 1`` (2 spinning torch threads crawl when other processes hold the cores).

    python benchmarks/bench_baselines.py [--samples 4873] [--ccp-samples 24] [--threads 2]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]  # this checkout's packages; the shared modules beside the scripts
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
from nli_reference import mushroom_rows, reference_ccp, tiny_nli  # noqa: E402


def _best(fn, repeat: int) -> tuple[float, object]:
    best, result = math.inf, None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def bench_probability(n_samples: int, repeat: int) -> None:
    import datasets
    from scipy.stats import entropy

    from much_dataset import schema, synthetic
    from much_metric.baselines import max_likelihood, token_arrays, token_entropy, token_likelihood

    rows = synthetic.make_rows(n_samples, seed=0, mean_tokens=24.5)
    data = datasets.Dataset.from_list(rows, features=schema.features())
    n_tokens = sum(len(r[schema.OUTPUT_TOKENS]) for r in rows)

    def ours():
        arrays = token_arrays(data)  # included: reading the split's Arrow buffers is part of the job
        return token_likelihood(arrays), max_likelihood(arrays), token_entropy(arrays, delta=24)

    def loop():
        columns = data.select_columns([schema.OUTPUT_TOKENS, schema.LOGITS_TOKEN_IDS, schema.LOGITS_VALUES])
        tl, ml, te = [], [], []
        for row in columns:
            a, b, c = [], [], []
            for token, ids, probs in zip(row[schema.OUTPUT_TOKENS], row[schema.LOGITS_TOKEN_IDS],
                                         row[schema.LOGITS_VALUES], strict=True):
                a.append(1 - probs[ids.index(token)])
                b.append(1 - max(probs))
                c.append(entropy(sorted(probs, reverse=True)[:24]) / math.log(24))
            tl.append(a)
            ml.append(b)
            te.append(c)
        return tl, ml, te

    ours_seconds, ours_values = _best(ours, repeat)
    loop_seconds, loop_values = _best(loop, 1)
    for mine, theirs in zip(ours_values, loop_values, strict=True):
        for a, b in zip(mine, theirs, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    print(f"[probability] {n_samples:,} samples, {n_tokens:,} tokens: TL+MxL+TE24 ours {ours_seconds:.3f}s "
          f"(best of {repeat}; target < 0.2 s: {'OK' if ours_seconds < 0.2 else 'MISSED'}), per-token loop "
          f"{loop_seconds:.2f}s, ratio {loop_seconds / ours_seconds:.0f}x")
    return {"samples": n_samples, "tokens": n_tokens, "ours_s": ours_seconds, "loop_s": loop_seconds}


def bench_ccp(n_samples: int, batch_size: int | None, max_batch_tokens: int | None) -> None:
    from much_metric.baselines import NliBatching, NliScorer, ccp

    model, tokenizer = tiny_nli()
    rows = mushroom_rows(tokenizer, n_samples)
    n_tokens = sum(len(r["output_tokens"]) for r in rows)
    # Library defaults unless asked: the comparison is with what a user gets.
    options = {key: value for key, value in (("batch_size", batch_size), ("max_batch_tokens", max_batch_tokens))
               if value is not None}
    scorer = NliScorer(model, tokenizer, progress=False, batching=NliBatching(**options))
    # Warm-up (first tokenizer call, first forward, decode caches) so that neither side pays it; best of 5.
    reference_ccp(rows[:1], model, tokenizer, delta=10, sigma=8)
    ccp(rows[:1], nli=scorer, tokenizer=tokenizer, delta=10, sigma=8)
    ours_seconds, ours = _best(lambda: ccp(rows, nli=scorer, tokenizer=tokenizer, delta=10, sigma=8), 5)
    loop_seconds, theirs = _best(lambda: reference_ccp(rows, model, tokenizer, delta=10, sigma=8), 5)
    worst = max(float(np.max(np.abs(np.asarray(a) - np.asarray(b)))) for a, b in zip(ours, theirs, strict=True))
    ratio = loop_seconds / ours_seconds
    print(f"[ccp_10_8] tiny DeBERTa-v2 NLI, {n_samples} Mu-SHROOM answers, {n_tokens:,} tokens: ours "
          f"{ours_seconds:.2f}s, per-token batches (reference structure) {loop_seconds:.2f}s, ratio {ratio:.1f}x "
          f"(target >= 5x: {'OK' if ratio >= 5 else 'MISSED'}); max |difference| {worst:.1e}; NLI batches of <= "
          f"{scorer.batch_size} pairs / {scorer.max_batch_tokens:,} padded tokens, "
          f"{'each text tokenized once' if scorer.pair_template is not None else 'plain pair encoding'}")
    return {"samples": n_samples, "tokens": n_tokens, "ours_s": ours_seconds, "loop_s": loop_seconds,
            "ratio": ratio, "max_abs_diff": worst}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=4873, help="synthetic split size for TL/MxL/TE (4,873)")
    parser.add_argument("--ccp-samples", type=int, default=24, help="real answers for the CCP comparison (24)")
    parser.add_argument("--batch-size", type=int, default=None,
                        help="NLI pairs per batch of ours (default: the library's, NliScorer)")
    parser.add_argument("--max-batch-tokens", type=int, default=None,
                        help="NLI padded tokens per batch of ours (default: the library's, NliScorer)")
    parser.add_argument("--repeat", type=int, default=5, help="best of N for the vectorised timings")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    args = parser.parse_args(argv)
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, cpu count {os.cpu_count()}")
    bench_probability(args.samples, args.repeat)
    bench_ccp(args.ccp_samples, args.batch_size, args.max_batch_tokens)
    return 0


if __name__ == "__main__":
    sys.exit(main())
