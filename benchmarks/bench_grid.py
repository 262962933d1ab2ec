"""The table-7 grid (CCP delta {24, 10} x sigma {8, 5, 3}, SAR sigma {8, 5, 3}) with shared NLI work, vs each
configuration alone, in the same run, on CPU with a tiny randomly initialised DeBERTa-v2 NLI model and real
Mu-SHROOM answers (Llama-3 tokenizer, as benchmarks/bench_baselines.py).

Three schedules, values checked equal:

* **alone**: every configuration with a fresh scorer (its own de-duplicated, length-sorted, batched NLI call);
* **grid, sequential + cache** (what ``compute_signals`` / ``much run --signals table7`` does): the nine through one
  :class:`much_metric.baselines.nli_routing.NliCache`; each configuration's **marginal** time (what it added given
  the ones before it) and the pairs it sent to the model are printed next to the total;
* **grid, union**: the pairs of all nine collected first (a dry run with a recording scorer), scored in ONE
  de-duplicated, length-sorted, token-budget-batched call, then the nine computed from the cache.

Then the NLI **work** of each configuration -- distinct pairs, their tokens (the model's input size; a forward pass
costs about linearly in it at these lengths) and the padded tokens of its batches -- and the exact lower bound of the
grid's cost relative to the largest configuration: the grid must score every distinct pair of the union once, and
pairs of different sigma are different texts (docs/reference-behaviour.md#signals: premise = prefix_sigma + dec(t) +
suffix_sigma, hypothesis =
prefix_sigma + dec(c) + suffix_sigma, so a sigma-5 pair is neither a sigma-8 pair nor derivable from its output).

    python benchmarks/bench_grid.py [--samples 24] [--threads 1]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]  # this checkout's packages; the shared modules beside the scripts
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402

SIGMAS = (8, 5, 3)


def _configs():
    for sigma in SIGMAS:
        for delta in (24, 10):
            yield f"ccp_{delta}_{sigma}", ("ccp", {"delta": delta, "sigma": sigma})
    for sigma in SIGMAS:
        yield f"sar_{sigma}", ("sar", {"sigma": sigma})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=24)
    parser.add_argument("--threads", type=int, default=1, help="torch threads; 1 = timings in CPU time")
    parser.add_argument("--repeat", type=int, default=2, help="best of N for every timing")
    args = parser.parse_args(argv)

    import torch
    from nli_reference import mushroom_rows, tiny_nli

    from much_metric.baselines import NliScorer, token_arrays
    from much_metric.baselines.methods.ccp import ccp
    from much_metric.baselines.methods.sar import sar
    from much_metric.baselines.nli import token_budget_batches
    from much_metric.baselines.nli_routing import NliCache, NliPairRecorder

    torch.set_num_threads(args.threads)
    clock = time.process_time if args.threads == 1 else time.perf_counter
    model, tokenizer = tiny_nli()
    arrays = token_arrays(mushroom_rows(tokenizer, args.samples))
    functions = {"ccp": ccp, "sar": sar}
    configs = list(_configs())

    def scorer():
        return NliScorer(model, tokenizer, progress=False, name="tiny")

    def compute(name, nli):
        kind, params = dict(configs)[name]
        return functions[kind](arrays, nli=nli, tokenizer=tokenizer, **params)

    def best(fn):
        # Best of N of the process's CPU time: with one torch thread it is the work done, and far less sensitive
        # than wall time to the other processes of a shared machine.
        times, result = [], None
        for _ in range(args.repeat):
            start = clock()
            result = fn()
            times.append(clock() - start)
            if times[-1] == min(times):
                kept = result
        return min(times), kept

    compute("ccp_24_8", scorer())  # warm-up
    alone, alone_values = {}, {}
    for name, _ in configs:
        alone[name], alone_values[name] = best(lambda name=name: compute(name, scorer()))

    def sequential():
        cache = NliCache(scorer())
        marginal, sent = {}, {}
        for name, _ in configs:
            before = cache.misses
            start = clock()
            values = compute(name, cache)
            marginal[name] = clock() - start
            sent[name] = cache.misses - before
            for a, b in zip(values, alone_values[name], strict=True):
                np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7, err_msg=name)
        return marginal, sent, cache

    def union():
        recorder = NliPairRecorder(scorer())
        for name, _ in configs:
            compute(name, recorder)
        cache = recorder.prefetch()  # one call for the union of the nine
        for name, _ in configs:
            for a, b in zip(compute(name, cache), alone_values[name], strict=True):
                np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7, err_msg=name)
        return cache

    grid_sequential, (marginal, sent, cache) = best(sequential)
    grid_union, union_cache = best(union)

    # NLI work: distinct pairs per configuration and their tokens under the model's pair encoding.
    probe = scorer()
    pairs_of, recorder = {}, None
    for name, _ in configs:
        recorder = NliPairRecorder(probe)
        compute(name, recorder)
        pairs_of[name] = set(recorder.pairs())

    def work(pairs):
        pairs = list(pairs)
        encoded = probe._encode([p for p, _ in pairs], [h for _, h in pairs])
        lengths = encoded.pair_lengths
        order = np.argsort(lengths, kind="stable")
        batches = token_budget_batches(lengths, order, probe.batch_size, probe.max_batch_tokens)
        padded = sum(len(b) * int(lengths[b].max()) for b in batches)
        return len(pairs), int(lengths.sum()), padded

    works = {name: work(pairs) for name, pairs in pairs_of.items()}
    union_pairs = set().union(*pairs_of.values())
    grid_work = work(union_pairs)
    largest = max(alone, key=alone.get)
    heaviest = max(works, key=lambda name: works[name][1])
    total_alone = sum(alone.values())

    print(f"[grid] {arrays.n_samples} Mu-SHROOM answers, {arrays.n_tokens} tokens, tiny DeBERTa-v2 NLI on CPU, "
          f"{args.threads} torch thread(s), best of {args.repeat}, "
          f"{'process CPU time' if args.threads == 1 else 'wall time'}")
    print(f"  {'config':<10} {'alone':>7} {'marginal':>9} {'pairs sent':>11} {'distinct pairs':>15} "
          f"{'pair tokens':>12} {'padded tokens':>14}")
    for name, _ in configs:
        n_pairs, tokens, padded = works[name]
        print(f"  {name:<10} {alone[name]:6.2f}s {marginal[name]:8.2f}s {sent[name]:11,} {n_pairs:15,} "
              f"{tokens:12,} {padded:14,}")
    n_pairs, tokens, padded = grid_work
    print(f"  {'union':<10} {'':>7} {'':>9} {'':>11} {n_pairs:15,} {tokens:12,} {padded:14,}")
    print(f"  sum of the nine alone {total_alone:.2f}s; grid sequential+cache {grid_sequential:.2f}s "
          f"({cache.misses:,} pairs scored, {cache.hits:,} hits); grid union in one NLI call {grid_union:.2f}s "
          f"({union_cache.misses:,} pairs scored)")
    best_grid = min(grid_sequential, grid_union)
    print(f"  grid / largest single config ({largest}, {alone[largest]:.2f}s): sequential "
          f"{grid_sequential / alone[largest]:.2f}x, union {grid_union / alone[largest]:.2f}x "
          f"(target <= 1.3x: {'OK' if best_grid <= 1.3 * alone[largest] else 'MISSED'})")
    print(f"  exact lower bound (every distinct pair scored once): union {tokens:,} pair tokens / {heaviest} "
          f"{works[heaviest][1]:,} = {tokens / works[heaviest][1]:.2f}x; pairs {n_pairs:,} / "
          f"{works[heaviest][0]:,} = {n_pairs / works[heaviest][0]:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
