"""Benchmark KTC and the neighbour counting, each against the obvious alternative in the same run.

1. KTC (nu=4, tau=0.3, delta=24) on a MUCH-sized split: the embedded sample's tokens tiled to --tokens (default
   100k, about a MUCH split), with the shipped SmolLM2 statistics: ``much_metric.baselines.methods.ktc`` (Taylor heat
   kernel, one batched eigvalsh per token, threads over blocks) vs a per-token loop (Python sets for the
   adjacency, scipy ``expm`` and ``eigvalsh``) timed on --loop-tokens tokens and extrapolated.
2. Neighbour counting on the same corpus and tokenizer (Mu-SHROOM text, SmolLM2, repeated --repeat times): batched
   Rust tokenisation + numpy counting vs a per-article ``tokenizer.encode`` + ``Counter`` loop (the reference's
   structure); tokens/s and the projected time for the reference's corpus (1.5 M articles x 4 languages).

    python benchmarks/bench_ktc.py [--tokens 100000] [--loop-tokens 2000] > benchmarks/ktc.txt
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: Mean tokens of a Wikipedia article with a Llama-3-class tokenizer; only used for the projection, stated as such.
TOKENS_PER_ARTICLE = 700


def bench_ktc(n_tokens: int, loop_tokens: int) -> None:
    from scipy.linalg import eigvalsh, expm

    import much_dataset
    from much_metric.baselines import token_arrays
    from much_metric.baselines.methods.ktc import KTC_DEFAULT, default_neighbours, ktc

    stats = default_neighbours("sample")
    base = token_arrays(much_dataset.load("sample", split="test"))
    reps = -(-n_tokens // base.n_tokens)
    arrays = base.select(np.tile(np.arange(base.n_samples), reps))
    print(f"KTC nu=4 tau=0.3 delta=24 on {arrays.n_tokens:,} tokens (the sample x {reps}), {os.cpu_count()} cores")
    ktc(base.select(range(20)), KTC_DEFAULT, neighbours=stats)  # warm-up (prefix ranges)
    best = min(_time(lambda: ktc(arrays, KTC_DEFAULT, neighbours=stats)) for _ in range(3))  # best of 3, each side
    print(f"  much_metric (vectorised):       {best:8.2f} s  ({arrays.n_tokens / best:,.0f} tokens/s)")

    top = stats.top(KTC_DEFAULT.nu)
    vocab = stats.vocabulary

    def per_token(ids, q):
        sets = [{int(x) for x in top[c] if x >= 0} for c in ids]
        a = np.ones((24, 24))
        for i in range(24):
            for j in range(i + 1, 24):
                s, t = vocab[ids[i]], vocab[ids[j]]
                m = min(len(s), len(t))
                if s[:m] == t[:m]:
                    v = 1.0
                elif not sets[i] or not sets[j]:
                    v = 1.0
                else:
                    v = 1 - len(sets[i] & sets[j]) / min(len(sets[i]), len(sets[j]))
                a[i, j] = a[j, i] = v
        k = expm(-KTC_DEFAULT.tau * (np.diag(a.sum(axis=0)) - a))
        k /= np.trace(k)
        r = np.sqrt(q)
        k = r[:, None] * k * r[None, :]
        lam = np.maximum(eigvalsh(k / np.trace(k)), 1e-5)
        return -(lam * np.log(lam)).sum() / np.log(24)

    ids, probs = arrays.candidate_ids[:loop_tokens, :24], arrays.probabilities[:loop_tokens, :24]
    loop = min(_time(lambda: [per_token(i, q) for i, q in zip(ids, probs, strict=True)])
               for _ in range(3)) * arrays.n_tokens / loop_tokens
    print(f"  per-token loop (sets, scipy):   {loop:8.2f} s  (best of 3 on {loop_tokens:,} tokens, extrapolated)")
    print(f"  ratio: {loop / best:.1f}x")

    # Where the time goes, one thread, on 4,096 tokens: the floor is the one batched eigvalsh per token.
    from much_metric.baselines.methods.ktc import heat_kernel_taylor, ktc_adjacency

    sorted_arrays = arrays.sorted_by_probability()
    ids = sorted_arrays.candidate_ids[:4096, :24]
    adjacency = ktc_adjacency(ids, stats, nu=KTC_DEFAULT.nu)
    kernel = heat_kernel_taylor(adjacency, KTC_DEFAULT.tau)
    parts = {
        "adjacency (neighbour overlaps, prefixes)": lambda: ktc_adjacency(ids, stats, nu=KTC_DEFAULT.nu),
        "heat kernel (batched Taylor products)": lambda: [heat_kernel_taylor(adjacency[i:i + 512], KTC_DEFAULT.tau)
                                                          for i in range(0, 4096, 512)],
        "eigvalsh of the normalised kernels": lambda: [np.linalg.eigvalsh(kernel[i:i + 512])
                                                       for i in range(0, 4096, 512)],
        "replaced: eigh (vectors) per token": lambda: [np.linalg.eigh(adjacency[i:i + 512])
                                                     for i in range(0, 4096, 512)],
    }
    print("  one thread, per token (best of 3 on 4,096 tokens):")
    for name, function in parts.items():
        print(f"    {name:42s} {min(_time(function) for _ in range(3)) / 4096 * 1e6:6.1f} us")
    # The alternatives to LAPACK's float64 eigvalsh for the floor: float32, and torch's batched call where installed.
    kernel32 = kernel.astype(np.float32)
    alternatives = {"eigvalsh in float32 (numpy)": lambda: [np.linalg.eigvalsh(kernel32[i:i + 512])
                                                           for i in range(0, 4096, 512)]}
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        kernel_t = torch.from_numpy(kernel)
        alternatives["eigvalsh in float64 (torch.linalg, batched)"] = lambda: torch.linalg.eigvalsh(kernel_t)
    for name, function in alternatives.items():
        print(f"    alternative: {name:29s} {min(_time(function) for _ in range(3)) / 4096 * 1e6:6.1f} us")
    if torch is not None:
        torch.set_num_threads(threads)
    floor = min(_time(parts["eigvalsh of the normalised kernels"]) for _ in range(3)) / 4096
    print(f"  LAPACK floor (eigvalsh alone) for {arrays.n_tokens:,} tokens on {os.cpu_count()} cores: "
          f"{floor * arrays.n_tokens / (os.cpu_count() or 1):.2f} s")


def bench_counting(repeat: int) -> None:
    from much_metric.baselines.neighbour_job import encode_documents, files_source, tokenizer_vocabulary
    from much_metric.baselines.neighbours import clip_top, count_pairs
    from much_metric.models import SMOLLM2, load_tokenizer

    tokenizer = load_tokenizer(SMOLLM2)
    files = sorted((ROOT / "data" / "mushroom").glob("mushroom.*-tst.v1.extra.jsonl"))
    docs = list(files_source(files, jsonl_fields=("model_input", "model_output_text")).documents()) * repeat
    vocab_size = len(tokenizer_vocabulary(tokenizer))
    print(f"\nNeighbour counting, SmolLM2 tokenizer, Mu-SHROOM text x {repeat}: {len(docs):,} documents")

    def ours():
        total = 0
        for start in range(0, len(docs), 10_000):
            ids, lengths = encode_documents(tokenizer, docs[start : start + 10_000])
            keys, counts = count_pairs(ids, lengths, vocab_size)
            clip_top(keys, counts, vocab_size, 64)
            total += ids.size
        return total

    def counter_loop(encoded_docs):
        neighbours = defaultdict(Counter)  # lazily, the cheapest form of the obvious loop
        for encoded in encoded_docs:
            for i in range(1, len(encoded) - 1):
                neighbours[encoded[i]][encoded[i - 1]] += 1
                neighbours[encoded[i]][encoded[i + 1]] += 1
        return neighbours

    n_tokens = ours()  # warm-up (the tokenizer's thread pool), then best of 3 on each side
    fast = min(_time(ours) for _ in range(3))
    slow = min(_time(lambda: counter_loop(tokenizer.encode(doc) for doc in docs)) for _ in range(3))
    print(f"  much_metric (encode_batch_fast + numpy): {fast:7.2f} s  {n_tokens / fast:12,.0f} tokens/s")
    print(f"  per-article encode + Counter loop:       {slow:7.2f} s  {n_tokens / slow:12,.0f} tokens/s")
    print(f"  ratio: {slow / fast:.1f}x")

    # The floor: tokenisation alone, each way; then counting alone on the same ids.
    batch_encode = _time(lambda: [encode_documents(tokenizer, docs[i:i + 10_000]) for i in range(0, len(docs), 10_000)])
    single_encode = _time(lambda: [tokenizer.encode(doc) for doc in docs])
    encoded = [tokenizer.encode(doc) for doc in docs]
    ids, lengths = encode_documents(tokenizer, docs)

    def count_only():
        keys, counts = count_pairs(ids, lengths, vocab_size)
        clip_top(keys, counts, vocab_size, 64)

    ours_count = min(_time(count_only) for _ in range(3))
    loop_count = _time(lambda: counter_loop(encoded))
    print(f"  tokenisation alone: batched {batch_encode:.2f} s, per article {single_encode:.2f} s "
          f"({single_encode / batch_encode:.1f}x): the floor of both sides")
    print(f"  counting alone (same ids): numpy {ours_count:.3f} s, Counter loop {loop_count:.3f} s, "
          f"ratio {loop_count / ours_count:.1f}x")
    projected = 4 * 1_500_000 * TOKENS_PER_ARTICLE
    print(f"  projection, 1.5M articles x 4 languages at ~{TOKENS_PER_ARTICLE} tokens/article ({projected / 1e9:.1f}"
          f"G tokens), on this machine ({os.cpu_count()} cores): {projected / (n_tokens / fast) / 3600:.1f} h "
          "(Counter loop: "
          f"{projected / (n_tokens / slow) / 3600:.1f} h); the reference README says 6-11 CPU hours (16 models x 2 "
          "positions, 12 processes)")


def _time(function) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=100_000)
    parser.add_argument("--loop-tokens", type=int, default=2_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.2f} (2 cores shared: timings inflate under load)")
    bench_ktc(args.tokens, args.loop_tokens)
    bench_counting(args.repeat)


if __name__ == "__main__":
    main()
