"""Speed of every probability baseline (the group ``all-probability``) together, ours vs a per-token Python loop.

On a MUCH-sized synthetic split (4,873 samples, ~24.5 tokens each, 24 candidates: ~119k tokens) read from a typed
``datasets.Dataset``: ours = :func:`much_metric.baselines.token_arrays` once (reading the Arrow buffers is part of
the job) then every signal of ``all-probability`` through the registry, vectorised over the split. The loop = the
straightforward per-token implementations of ``probability_loops.py`` (one Python call per token and method), timed
on the first ``--loop-samples`` samples and scaled to the split by token count (the loop is linear in tokens; timing
it on all 119k tokens takes minutes on a shared machine). The loop's values are checked equal to ours on those samples.
Target: ours < 0.2 s for all of them together.

    python benchmarks/bench_probability_baselines.py [--samples 4873] [--loop-samples 400] [--repeat 5]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]  # this checkout's packages; the shared modules beside the scripts

import numpy as np  # noqa: E402


def _best(fn, repeat: int):
    best, result = math.inf, None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def _loops():
    """signal name -> per-token function(token, ids, probs), written from the formulas (probability_loops.py)."""
    import probability_loops as loop

    return {
        "token_likelihood": loop.token_likelihood,
        "max_likelihood": loop.max_likelihood,
        "token_entropy_24": lambda *a: loop.token_entropy(*a, delta=24),
        "nll": loop.nll,
        "probability_margin": loop.margin,
        "boosted_prob": loop.boosted,
        "tail_entropy_24": lambda *a: loop.tail_entropy(*a, delta=24),
        "renyi_entropy_0.5_24": lambda *a: loop.renyi(*a, alpha=0.5, delta=24),
        "renyi_entropy_2_24": lambda *a: loop.renyi(*a, alpha=2, delta=24),
        "self_certainty_24": lambda *a: loop.self_certainty(*a, delta=24),
        "ccp_no_nli_10": lambda *a: loop.ccp_no_nli(*a, delta=10),
        "ccp_no_nli_24": lambda *a: loop.ccp_no_nli(*a, delta=24),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=4873)
    parser.add_argument("--loop-samples", type=int, default=400, help="samples the per-token loop is timed on")
    parser.add_argument("--repeat", type=int, default=5, help="best of N for ours")
    args = parser.parse_args(argv)

    import datasets

    from much_dataset import schema, synthetic
    from much_metric.baselines import registry, token_arrays

    signals = registry.signal_groups()["all-probability"]
    loops = _loops()
    missing = [name for name in signals if name not in loops]
    if missing:
        raise SystemExit(f"no per-token loop for {missing}: add one to this script")
    rows = synthetic.make_rows(args.samples, seed=0, mean_tokens=24.5)
    data = datasets.Dataset.from_list(rows, features=schema.features())
    specs = [registry.resolve(name) for name in signals]

    def ours():
        arrays = token_arrays(data)
        return arrays, {spec.signal: spec.compute(arrays, {}, {}) for spec in specs}

    seconds, (arrays, values) = _best(ours, args.repeat)
    per_signal = {}
    for spec in specs:
        per_signal[spec.signal], _ = _best(lambda spec=spec: spec.compute(arrays, {}, {}), args.repeat)

    subset = data.select(range(args.loop_samples)).select_columns(
        [schema.OUTPUT_TOKENS, schema.LOGITS_TOKEN_IDS, schema.LOGITS_VALUES])

    def loop():
        out = {name: [] for name in signals}
        for row in subset:
            for token, ids, probs in zip(row[schema.OUTPUT_TOKENS], row[schema.LOGITS_TOKEN_IDS],
                                         row[schema.LOGITS_VALUES], strict=True):
                for name in signals:
                    out[name].append(loops[name](token, ids, probs))
        return out

    loop_seconds, loop_values = _best(loop, 1)
    n_loop = len(loop_values[signals[0]])
    for name in signals:
        # The dataset stores float32; both sides read the same float32 values.
        np.testing.assert_allclose(values[name][:n_loop], loop_values[name], rtol=1e-6, atol=1e-7, err_msg=name)
    scaled = loop_seconds * arrays.n_tokens / n_loop
    print(f"[all-probability] {len(signals)} signals on {arrays.n_samples:,} samples, {arrays.n_tokens:,} tokens x "
          f"{arrays.probabilities.shape[1]} candidates")
    print(f"  ours (token_arrays + every signal): {seconds:.3f}s best of {args.repeat} "
          f"(target < 0.2 s: {'OK' if seconds < 0.2 else 'MISSED'})")
    print(f"  per-token loop: {loop_seconds:.2f}s on {n_loop:,} tokens -> {scaled:.1f}s scaled to the split; "
          f"ratio {scaled / seconds:.0f}x; values equal (rtol 1e-6)")
    for name in signals:
        print(f"    {name:<22} {per_signal[name] * 1e3:7.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
