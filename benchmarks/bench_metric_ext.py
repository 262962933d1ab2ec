"""Benchmark of the evaluation extensions on a MUCH-sized claim set (4,873 samples, synthetic claims).

Times, with 1,000 bootstrap resamples over samples (the same seeded replicates for every statistic):

1. the metric table (``scoring.engine.bootstrap_distribution``: ROC-AUC, PR-AUC, AP, ..., PRR, PRR@50% per
   replicate), on rounded scores (many ties) and on distinct scores (every claim its own threshold);
2. PRR per replicate (``much_metric.scoring.engine.bootstrap_prr``, closed form over the sorted thresholds);
3. ECE per replicate (``much_metric.scoring.bootstrap_ece``) of isotonic-calibrated probabilities
   (``much_metric.scoring.fit_calibrator`` fitted on a separate synthetic split: fit time included);
4. the existing metrics and PRR from one set of cumulative counts (``scoring.engine.bootstrap_metrics_and_prr``);
and the total (4 + 3), against the obvious alternative: a per-replicate loop expanding the claims by their
multiplicity and
calling LM-Polygraph-style PRR (argsort + cumulative mean) and an ECE bin loop, timed on 50 replicates and scaled
to 1,000 (printed as such).

Data: 4,873 samples with 1-9 claims each (~24k claims, MUCH has 20,751 evaluated claims), 30 % hallucinated, scores
= label signal + noise. Usage: ``python benchmarks/bench_metric_ext.py [--repeats 3]``; timings are the best of repeats.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from much_metric.scoring import bootstrap_ece, fit_calibrator  # noqa: E402
from much_metric.scoring.engine import (  # noqa: E402
    bootstrap_distribution,
    bootstrap_metrics_and_prr,
    bootstrap_prr,
    resample_counts,
)

N_SAMPLES = 4873
N_RESAMPLES = 1000


def make_claims(seed: int, distinct: bool = False):
    rng = np.random.default_rng(seed)
    claim_sample = np.repeat(np.arange(N_SAMPLES), rng.integers(1, 10, N_SAMPLES))
    hallucinated = rng.random(claim_sample.size) < 0.3
    scores = hallucinated * 0.8 + rng.normal(size=claim_sample.size)
    # rounded: many ties; distinct: every claim its own threshold (aggregated float scores), the costly case
    return (scores if distinct else np.round(scores, 3)), hallucinated, claim_sample


def best_of(function, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return min(times)


def loop_alternative(scores, hallucinated, claim_sample, probabilities, n_replicates):
    rng = np.random.default_rng(0)
    counts = resample_counts(N_SAMPLES, n_replicates, rng)
    edges = np.linspace(0, 1, 21)
    for row in counts:
        m = row[claim_sample]
        s, h, p = np.repeat(scores, m), np.repeat(hallucinated, m), np.repeat(probabilities, m)
        quality = (~h).astype(float)

        def area(u, q):
            return np.mean((np.cumsum(q[np.argsort(u)]) / np.arange(1, len(q) + 1))[::-1])

        (area(s, quality) - quality.mean()) / (area(-quality, quality) - quality.mean())
        c = 1 - p
        for i in range(20):
            b = (c > edges[i]) & (c <= edges[i + 1]) if i else (c >= 0) & (c <= edges[1])
            if b.any():
                abs((~h)[b].mean() - c[b].mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    scores, hallucinated, claim_sample = make_claims(0)
    fit_scores, fit_hallucinated, _ = make_claims(1)
    print(f"input: {N_SAMPLES} samples, {scores.size} claims (synthetic), {N_RESAMPLES} bootstrap resamples")

    def existing():
        return bootstrap_distribution([scores], hallucinated, claim_sample, N_SAMPLES, n_resamples=N_RESAMPLES)

    def prr():
        return bootstrap_prr(scores, hallucinated, claim_sample, N_SAMPLES, n_resamples=N_RESAMPLES)

    def ece():
        probabilities = fit_calibrator(fit_scores, fit_hallucinated).predict(scores)
        return bootstrap_ece(probabilities, hallucinated, claim_sample, N_SAMPLES,
                             n_resamples=N_RESAMPLES)

    def shared():
        return bootstrap_metrics_and_prr(scores, hallucinated, claim_sample, N_SAMPLES,
                                         n_resamples=N_RESAMPLES)

    t_existing, t_prr, t_ece, t_shared = (best_of(f, args.repeats) for f in (existing, prr, ece, shared))
    distinct_scores, _, _ = make_claims(0, distinct=True)
    t_distinct = best_of(lambda: bootstrap_distribution([distinct_scores], hallucinated, claim_sample, N_SAMPLES,
                                                        n_resamples=N_RESAMPLES), args.repeats)
    print(f"metric table (incl. PRR, PRR@50%), 1000 replicates, {len(np.unique(scores))} distinct scores: "
          f"{t_existing * 1e3:8.1f} ms")
    print(f"metric table (incl. PRR, PRR@50%), 1000 replicates, all {scores.size} scores distinct: "
          f"{t_distinct * 1e3:8.1f} ms   (target < 2000 ms on 2 cores)")
    print(f"PRR alone, 1000 replicates         : {t_prr * 1e3:8.1f} ms")
    print(f"metrics + PRR from shared counts   : {t_shared * 1e3:8.1f} ms")
    print(f"isotonic fit + ECE, 1000 replicates: {t_ece * 1e3:8.1f} ms")
    total = t_shared + t_ece
    print(f"total (shared counts + ECE)        : {total * 1e3:8.1f} ms   (target < 2000 ms on 2 cores)")

    probabilities = fit_calibrator(fit_scores, fit_hallucinated).predict(scores)
    n_loop = 50
    t_loop = best_of(lambda: loop_alternative(scores, hallucinated, claim_sample, probabilities, n_loop), 1)
    t_loop_scaled = t_loop * N_RESAMPLES / n_loop
    print(f"per-replicate loop PRR + ECE      : {t_loop_scaled * 1e3:8.1f} ms   ({n_loop} replicates timed, x "
          f"{N_RESAMPLES // n_loop})")
    print(f"speed-up (PRR + ECE) vs loop      : {t_loop_scaled / (t_prr + t_ece):8.1f} x (PRR alone + ECE)")


if __name__ == "__main__":
    main()
