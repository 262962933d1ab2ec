"""Claim-level scoring honours the confidence option (``1 - p``), like token-level scoring does."""

import numpy as np
import pytest

from much_metric.scoring import Aggregation, Bootstrap, claim_layout, compare, score, score_claims

CHUNKS = [[[0], [1, 2], [3]], [[0, 1], [2], [3]], [[0], [1]]]
LABELS = [[-1, 1, 1], [1, -1, 1], [1, 1]]
CONFIDENCES = [[0.1, 0.8, 0.5], [0.9, 0.2, 0.5], [0.7, 0.5]]


def test_score_claims_confidence_is_one_minus_p():
    as_confidence = score_claims(CONFIDENCES, CHUNKS, LABELS, score_type="confidence")
    as_uncertainty = score_claims([[1 - p for p in sample] for sample in CONFIDENCES], CHUNKS, LABELS)
    assert as_confidence.roc_auc == 1.0
    assert as_confidence == as_uncertainty
    assert score_claims(CONFIDENCES, CHUNKS, LABELS).roc_auc == 0.0


def test_score_claims_confidence_on_a_flat_layout_array():
    layout = claim_layout(CHUNKS, [4, 4, 2], labels=LABELS)
    flat = np.array([0.1, 0.8, 0.9, 0.2, 0.7])  # the evaluated claims (EOS claims dropped)
    assert score_claims(flat, layout, score_type="confidence").roc_auc == 1.0
    with pytest.raises(ValueError, match=r"sample #1: with score_type='confidence', 'claim_scores' must be prob"):
        score_claims(np.array([0.1, 0.8, 1.5, 0.2, 0.7]), layout, score_type="confidence")


def test_score_claims_confidence_rejects_values_outside_0_1():
    with pytest.raises(ValueError, match=r"sample #2 .*with score_type='confidence'"):
        score_claims([[0.1, 0.8, 0.5], [0.9, 0.2, 0.5], [0.7, 1.2]], CHUNKS, LABELS, score_type="confidence",
                     generation_ids=["a", "b", "c"])


def test_compare_confidence_converts_both_methods():
    tokens = [[0.1, 0.8, 0.9, 0.5], [0.9, 0.8, 0.2, 0.5], [0.7, 0.5]]
    noisy = [[0.5, 0.8, 0.9, 0.5], [0.9, 0.8, 0.4, 0.5], [0.6, 0.5]]
    got = compare(tokens, noisy, CHUNKS, LABELS,
                  aggregation=Aggregation(score_type="confidence"), bootstrap=Bootstrap(n_resamples=50))
    flip = [[1 - p for p in sample] for sample in tokens]
    confidence = Aggregation(score_type="confidence")
    assert got["roc_auc"]["a"] == score(tokens, CHUNKS, LABELS, aggregation=confidence).roc_auc == \
        score(flip, CHUNKS, LABELS).roc_auc
    assert got["roc_auc"]["b"] == score(noisy, CHUNKS, LABELS, aggregation=Aggregation(score_type="confidence")).roc_auc
    with pytest.raises(ValueError, match="with score_type='confidence'"):
        compare(tokens, [[0.1, 0.8, 0.9, 1.5], [0.9, 0.8, 0.2, 0.5], [0.7, 0.5]], CHUNKS, LABELS,
                aggregation=Aggregation(score_type="confidence"))
