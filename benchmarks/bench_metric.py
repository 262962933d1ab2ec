"""Benchmark of the MUCH metric on a MUCH-sized input (4,873 samples, ~100k tokens, ~20k evaluated claims).

Times, in the same run and on the same synthetic data (much_dataset.synthetic, NOT MUCH data):

1. ``much_metric.scoring.score`` for the four aggregators, four independent calls, with the inputs as ``datasets``
   columns (read through their arrow buffers), with a shared ``ClaimLayout`` (claim structure validated and
   flattened once), and as per-sample Python lists (each call converts ~300k Python objects to arrays);
2. the reference-style evaluation: a per-claim Python loop computing the four aggregators
(docs/reference-behaviour.md#aggregators, stopwords
   nulled) followed by scikit-learn's ``roc_curve``/``auc``, ``precision_recall_curve``/``auc`` and
   ``average_precision_score`` per aggregator — and prints the ratio;
3. the ``evaluate`` wrapper's ``compute`` (one aggregator) against the core on the same input: its overhead;
4. ``score`` with a 1,000-resample bootstrap (95% intervals for every metric).

Usage: ``python benchmarks/bench_metric.py [--repeats 7]``. Timings are the minimum over repeats.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from much_dataset import schema  # noqa: E402
from much_dataset.synthetic import make_rows  # noqa: E402
from much_metric.scoring import (  # noqa: E402
    AGGREGATORS,
    Bootstrap,
    claim_layout,
    score,  # noqa: E402
)

N_SAMPLES = 4873


def best_of(function, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return min(times)


def reference_style(scores, chunks, labels, masks):
    """Per-claim loop as the reference evaluator (values nulled at stopwords) + scikit-learn metrics."""
    from sklearn.metrics import auc, average_precision_score, precision_recall_curve, roc_curve

    per_aggregator = {name: ([], []) for name in AGGREGATORS}  # (hallucinated claims, correct claims)
    for values, sample_chunks, sample_labels, mask in zip(scores, chunks, labels, masks, strict=True):
        values = np.where(np.asarray(mask), 0.0, np.asarray(values, dtype=np.float64))
        for chunk, label in zip(sample_chunks[:-1], sample_labels[:-1], strict=True):
            s = values[chunk[0] : chunk[-1] + 1]
            survival = np.prod(1 - s)
            claim = {
                "mean": np.mean(s),
                "max": np.max(s),
                "geometric": 1 - (survival + 1e-5) ** (1 / len(s)),
                "product": 1 - survival,
            }
            for name in AGGREGATORS:
                per_aggregator[name][0 if label == schema.HALLUCINATED else 1].append(claim[name])
    results = {}
    for name, (inside, outside) in per_aggregator.items():
        y = np.r_[np.ones(len(inside)), np.zeros(len(outside))]
        s = np.r_[inside, outside]
        fpr, tpr, _ = roc_curve(y, s)
        precision, recall, _ = precision_recall_curve(y, s)
        results[name] = (auc(fpr, tpr), auc(recall, precision), average_precision_score(y, s))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()

    rows = make_rows(N_SAMPLES, seed=0)
    scores = [(1.0 - np.asarray(r[schema.LOGITS_VALUES])[:, 0]).tolist() for r in rows]
    chunks = [r[schema.TOKEN_CHUNKS] for r in rows]
    labels = [r[schema.LABELS] for r in rows]
    masks = [r[schema.STOPWORD_MASK] for r in rows]
    n_tokens = sum(len(s) for s in scores)
    n_claims = sum(len(c) - 1 for c in chunks)
    print(f"input: {N_SAMPLES} samples, {n_tokens} tokens, {n_claims} evaluated claims (synthetic, MUCH-sized)")

    def ours_four():
        return {a: score(scores, chunks, labels, stopword_mask=masks, aggregation=a) for a in AGGREGATORS}

    import datasets

    columns = datasets.Dataset.from_dict({"s": scores, "c": chunks, "l": labels, "m": masks})

    def ours_columns():
        # datasets columns are read through their arrow buffers: no Python-object conversion.
        return {a: score(columns["s"], columns["c"], columns["l"], stopword_mask=columns["m"], aggregation=a)
                for a in AGGREGATORS}

    def ours_layout():
        layout = claim_layout(chunks, [len(s) for s in scores], labels=labels, stopword_mask=masks)
        return {a: score(scores, layout, None, aggregation=a) for a in AGGREGATORS}

    ours = ours_four()
    reference = reference_style(scores, chunks, labels, masks)
    for name in AGGREGATORS:  # same numbers, or the timing comparison is meaningless
        expected = reference[name]
        got = (ours[name].roc_auc, ours[name].pr_auc, ours[name].average_precision)
        assert np.allclose(got, expected, atol=1e-9), (name, got, expected)

    assert ours_columns() == ours
    t_ours = best_of(ours_four, args.repeats)
    t_columns = best_of(ours_columns, args.repeats)
    t_layout = best_of(ours_layout, args.repeats)
    t_reference = best_of(lambda: reference_style(scores, chunks, labels, masks), max(1, args.repeats // 3))
    print(f"score, 4 aggregators (datasets columns)  : {t_columns * 1e3:8.1f} ms   (target < 50 ms)")
    print(f"score, 4 aggregators (shared ClaimLayout): {t_layout * 1e3:8.1f} ms")
    print(f"score, 4 aggregators (Python lists in)   : {t_ours * 1e3:8.1f} ms   (4 x converting ~300k Python "
          "objects to arrays)")
    print(f"reference-style loop + scikit-learn      : {t_reference * 1e3:8.1f} ms")
    print(f"speed-up vs reference-style (columns)    : {t_reference / t_columns:8.1f} x")
    print(f"speed-up vs reference-style (lists)      : {t_reference / t_ours:8.1f} x")

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_EVALUATE_OFFLINE", "1")
    with tempfile.TemporaryDirectory() as cache:
        os.environ.setdefault("HF_MODULES_CACHE", cache)
        import much_metric

        module = much_metric.load_metric()
        arguments = dict(predictions=scores, references=labels, token_chunks=chunks, stopword_mask=masks)
        wrapped = module.compute(**arguments)
        assert wrapped == score(scores, chunks, labels, stopword_mask=masks).to_dict()
        t_wrapper = best_of(lambda: module.compute(**arguments), max(1, args.repeats // 2))
        t_core_one = best_of(lambda: score(scores, chunks, labels, stopword_mask=masks), args.repeats)
    print(f"evaluate compute (product)               : {t_wrapper * 1e3:8.1f} ms")
    print(f"core score (product)                     : {t_core_one * 1e3:8.1f} ms")
    print(f"evaluate wrapper overhead                : {(t_wrapper - t_core_one) * 1e3:8.1f} ms "
          f"({t_wrapper / t_core_one:.1f} x the core; arrow round trip of the predictions)")

    t_boot = best_of(lambda: score(scores, chunks, labels, stopword_mask=masks, bootstrap=Bootstrap()), 1)
    print(f"score + 1000-resample bootstrap          : {t_boot * 1e3:8.1f} ms")


if __name__ == "__main__":
    main()
