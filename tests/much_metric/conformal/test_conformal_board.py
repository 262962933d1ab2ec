"""The public board shows "claims kept at alpha", computed by its server on the public evaluation data: the same
numbers as claims_kept_summary on the row's claims; too few answers give no number and no rejection."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("gradio")

import much_dataset  # noqa: E402
from much_dataset import schema  # noqa: E402
from much_leaderboard import EvaluationData  # noqa: E402
from much_leaderboard._scoring import score_submission  # noqa: E402
from much_leaderboard._table import render_table  # noqa: E402
from much_metric.conformal import claims_kept_summary  # noqa: E402
from much_metric.report import EvaluationOptions, evaluate_signals  # noqa: E402
from much_metric.signals import ParsedSubmission  # noqa: E402


def _submission(dataset):
    values = {r[schema.GENERATION_ID]: 1 - np.asarray(r[schema.LOGITS_VALUES], np.float64)[:, 0] for r in dataset}
    return ParsedSubmission(signals={"max_prob": values}, timings={}, hardware={})


def test_the_server_computes_claims_kept_on_the_public_data():
    dataset = much_dataset.load("sample", split="test")
    rows, _ = score_submission(_submission(dataset), EvaluationData(dataset=dataset, n_resamples=0))
    kept = rows["max_prob"]["claims_kept"]
    table = evaluate_signals(dataset, _submission(dataset).signals,
                             evaluation=EvaluationOptions(bootstrap=None, floors=False, paired=False))
    expected = claims_kept_summary(table.results[0], table.generation_ids)
    assert set(kept) == {"0.05", "0.1", "0.2"}
    assert kept["0.1"]["kept"] == pytest.approx(expected["0.1"]["kept"])
    assert 0 <= kept["0.05"]["kept"] <= kept["0.2"]["kept"] <= 1
    row = {"kind": "submission", "needs": [], "coverage": 1.0, "submission": "s", "method": "m", "submitted": 0,
           "seconds": None, "relative_runtime": None, "cost": None,
           "p_rank": None, "per_lang": {}, "lang_gap": None, "rank": 1, "key": "k", "metrics": rows["max_prob"]}
    page = render_table([row], langs=["en"])
    assert f"kept at α=0.1: {kept['0.1']['kept']:.1%}" in page and "claims kept" in page
    assert "kept at α" not in render_table([{**row, "metrics": {**rows["max_prob"], "claims_kept": None}}],
                                           langs=["en"])


def test_too_few_answers_give_no_claims_kept_and_no_rejection():
    dataset = much_dataset.load("sample", split="test").select(range(20))
    rows, _ = score_submission(_submission(dataset), EvaluationData(dataset=dataset, n_resamples=0))
    assert rows["max_prob"]["claims_kept"] is None
