"""Scoring without ``stopword_mask`` warns, and the effect the warning quotes is what the sample measures."""

from __future__ import annotations

import re
import warnings

import pytest

from much_metric.scoring import Bootstrap, MissingStopwordMaskWarning, claim_layout, compare, score
from much_metric.scoring._steps import MISSING_MASK_EFFECT

SCORES = [[0.9, 0.1, 0.0], [0.2, 0.7, 0.6, 0.0]]
CHUNKS = [[[0], [1], [2]], [[0], [1, 2], [3]]]
LABELS = [[-1, 1, 1], [1, -1, 1]]
MASK = [[False, False, False], [False, True, False, False]]


def test_score_and_compare_warn_without_a_mask():
    with pytest.warns(MissingStopwordMaskWarning, match=r"score\(\): no stopword_mask given") as caught:
        score(SCORES, CHUNKS, LABELS)
    assert "much_dataset.load" in str(caught[0].message) and MISSING_MASK_EFFECT in str(caught[0].message)
    assert caught[0].filename == __file__  # points at the caller's line
    with pytest.warns(MissingStopwordMaskWarning, match=r"compare\(\)"):
        compare(SCORES, SCORES, CHUNKS, LABELS, bootstrap=Bootstrap(n_resamples=40))


def test_no_warning_with_a_mask_or_a_layout():
    with warnings.catch_warnings():
        warnings.simplefilter("error", MissingStopwordMaskWarning)
        score(SCORES, CHUNKS, LABELS, MASK)
        score(SCORES, CHUNKS, LABELS, [[False] * 3, [False] * 4])  # an all-False mask: no stopwords on purpose
        score(SCORES, claim_layout(CHUNKS, [3, 4], labels=LABELS), None)


def test_evaluate_module_warns_without_a_mask(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_EVALUATE_OFFLINE", "1")
    import much_metric

    metric = much_metric.load_metric()
    with pytest.warns(MissingStopwordMaskWarning, match="no stopword_mask given"):
        metric.compute(predictions=SCORES, references=LABELS, token_chunks=CHUNKS)
    with warnings.catch_warnings():
        warnings.simplefilter("error", MissingStopwordMaskWarning)
        metric.compute(predictions=SCORES, references=LABELS, token_chunks=CHUNKS, stopword_mask=MASK)


@pytest.mark.slow
def test_quoted_effect_is_measured_on_the_sample():
    """The two ROC-AUCs the warning quotes, recomputed: Token Entropy on the sample without and with the mask."""
    import much_dataset
    from much_metric.baselines import token_entropy

    data = much_dataset.load("sample", split="test")
    token_scores = token_entropy(data, delta=24)
    with pytest.warns(MissingStopwordMaskWarning):
        without = score(token_scores, data["token_chunks"], data["labels"]).roc_auc
    with_mask = score(token_scores, data["token_chunks"], data["labels"], data["stopword_mask"]).roc_auc
    quoted = [float(x) for x in re.findall(r"0\.\d{4}", MISSING_MASK_EFFECT)]
    assert quoted == [round(without, 4), round(with_mask, 4)]
    assert without != with_mask
