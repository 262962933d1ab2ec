"""suppress_single_class_warning: silences only the single-class warning, only in the calling thread, and changes
no process-wide warnings state (the evaluation's floors used ``warnings.catch_warnings``, which does)."""

from __future__ import annotations

import threading
import warnings

import numpy as np
import pytest

from much_metric.scoring import MuchMetricWarning, score_claims, suppress_single_class_warning

CHUNKS = [[[0], [1], [2]], [[0], [1, 2], [3]]]
ONE_CLASS = [[1, 1, 1], [1, 1, 1]]  # every claim correct: metrics undefined
SCORES = [[0.8, 0.3, 0.0], [0.4, 0.6, 0.0]]


def test_single_class_warns_outside_and_is_silent_inside():
    with pytest.warns(MuchMetricWarning, match="no hallucinated claim"):
        assert np.isnan(score_claims(SCORES, CHUNKS, ONE_CLASS).roc_auc)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with suppress_single_class_warning():
            assert np.isnan(score_claims(SCORES, CHUNKS, ONE_CLASS).roc_auc)
    with pytest.warns(MuchMetricWarning, match="no hallucinated claim"):  # restored after the block
        score_claims(SCORES, CHUNKS, ONE_CLASS)


def test_other_warnings_still_reach_the_caller_inside_the_block():
    with suppress_single_class_warning(), pytest.warns(MuchMetricWarning, match="assumes token uncertainties"):
        from much_metric.scoring import aggregate_claims

        aggregate_claims([[2.0, 0.5, 0.1]], [[[0], [1], [2]]])


def test_the_block_changes_no_process_wide_warnings_state_and_no_other_thread():
    """While one thread is inside the block, another thread still gets the warning, and ``warnings.filters`` is the
    list it was (a ``catch_warnings`` + ``simplefilter`` here would replace it for every thread)."""
    inside, done = threading.Event(), threading.Event()
    filters_before = list(warnings.filters)
    seen: dict[str, object] = {}

    def hold_the_block():
        with suppress_single_class_warning():
            seen["filters_inside"] = list(warnings.filters)
            inside.set()
            done.wait(10)

    holder = threading.Thread(target=hold_the_block)
    holder.start()
    try:
        assert inside.wait(10)
        with pytest.warns(MuchMetricWarning, match="no hallucinated claim"):
            score_claims(SCORES, CHUNKS, ONE_CLASS)
    finally:
        done.set()
        holder.join(10)
    assert seen["filters_inside"] == filters_before
