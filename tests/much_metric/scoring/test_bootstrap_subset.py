"""``bootstrap_distribution(metrics=...)`` computes only the metrics asked for, on the very replicates of the full
call (the degradation table asks for ROC-AUC and PRR only)."""

from __future__ import annotations

import numpy as np

from much_metric.scoring.engine import bootstrap_distribution


def test_a_subset_of_metrics_has_the_full_call_s_values():
    rng = np.random.default_rng(3)
    n_claims, n_samples = 300, 40
    hallucinated = rng.random(n_claims) < 0.4
    sample = rng.integers(0, n_samples, n_claims)
    scores = [rng.random(n_claims) + 0.3 * hallucinated, rng.random(n_claims)]
    full = bootstrap_distribution(scores, hallucinated, sample, n_samples, n_resamples=60, random_state=1)
    part = bootstrap_distribution(scores, hallucinated, sample, n_samples, n_resamples=60, random_state=1,
                                  metrics=("roc_auc", "prr"))
    for whole, subset in zip(full, part, strict=True):
        assert list(subset) == ["roc_auc", "prr"]
        for key in subset:
            np.testing.assert_array_equal(subset[key], whole[key])
