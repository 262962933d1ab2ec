"""The label-probing attack (benchmarks/bench_private_probing.py) against the private board: a submitter moving one
claim's score between submissions learns nothing measurable naively, and at most the label's own entropy (under one
bit) per submission when the unrounded ROC-AUC sits at a rounding boundary -- within the documented bound of
log2(101) bits per signal per submission."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from tests.assets import REPO_ROOT


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_private_probing",
                                                  REPO_ROOT / "benchmarks" / "bench_private_probing.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_probing_one_claim_learns_at_most_its_label_per_submission(bench, hidden_split, private_split):
    probe = bench.Probe(private_split, hidden_split.labels)
    # the attacker's exact ROC-AUC is the board's, before rounding (same claims, same conventions)
    scores = probe.with_target(probe.base, 0, high=False)
    assert probe.submit(scores) == round(bench.exact_auc(scores, probe.hallucinated), 2)
    result = bench.run(private_split, hidden_split.labels, targets=12, seed=3)
    bound = private_split.policy.bits_per_submission(1)
    assert bound == pytest.approx(np.log2(101))
    assert result["naive"]["bits_per_submission"] < 0.25  # the rounding hides a 1/P or 1/N move
    assert result["tuned"]["accuracy"] == 1.0  # at a boundary, one submission tells the label...
    assert result["tuned"]["bits_per_submission"] == pytest.approx(result["label_entropy"])  # ...and no more
    for name in ("naive", "tuned"):
        assert result[name]["bits_per_submission"] <= min(1.0, bound)
    text = bench.report(result, seconds=1.0)
    assert "| boundary-tuned by an oracle (tuning not counted) | 1 | 100.0% |" in text
