"""much_metric.mushroom against an independent re-implementation of the official Mu-SHROOM scorer's logic."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from much_metric import mushroom
from tests import assets

scipy_stats = pytest.importorskip("scipy.stats")


# --- independent re-implementation of the official participant-kit scorer (lists, sets, scipy) -------------------

def official_hard(soft):
    hard, prev_end = [], -1
    for start, end in ((s["start"], s["end"]) for s in sorted(soft, key=lambda s: (s["start"], s["end"]))
                       if s["prob"] > 0.5):
        if start == prev_end:
            hard[-1][-1] = end
        else:
            hard.append([start, end])
        prev_end = end
    return hard


def official_fill(record):
    record = dict(record)
    if "hard_labels" not in record:
        record["hard_labels"] = official_hard(record["soft_labels"])
    if "soft_labels" not in record:
        record["soft_labels"] = [{"start": a, "end": b, "prob": 1.0} for a, b in record["hard_labels"]]
    return record


def official_iou(ref, pred):
    r = {i for span in ref["hard_labels"] for i in range(*span)}
    p = {i for span in pred["hard_labels"] for i in range(*span)}
    if not r and not p:
        return 1.0
    return len(r & p) / len(r | p)


def official_cor(ref, pred, text_len):
    rv, pv = [0.0] * text_len, [0.0] * text_len
    for span in ref["soft_labels"]:
        for i in range(span["start"], span["end"]):
            rv[i] = span["prob"]
    for span in pred["soft_labels"]:
        for i in range(span["start"], span["end"]):
            pv[i] = span["prob"]
    rs, ps = {round(x, 8) for x in rv}, {round(x, 8) for x in pv}
    if len(ps) == 1 or len(rs) == 1:
        return float(len(rs) == len(ps))
    return scipy_stats.spearmanr(rv, pv).correlation


def official_scores(refs, preds):
    by_id = {p["id"]: official_fill(p) for p in preds}
    ious, cors = [], []
    for ref in refs:
        ref = official_fill(ref)
        pred = by_id[ref["id"]]
        ious.append(official_iou(ref, pred))
        cors.append(official_cor(ref, pred, len(ref["model_output_text"])))
    return np.array(ious), np.array(cors)


# --- data ------------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def references():
    assets.require("mushroom")
    return [r for path in assets.mushroom_files() for r in mushroom.read_mushroom_jsonl(path)]


def _annotator_predictions(references, which):
    """Each item's ``which``-th annotator's spans as a hard-only prediction (real, imperfect span predictions)."""
    out = []
    for ref in references:
        annotations = list(ref["annotations"].values())
        spans = annotations[which % len(annotations)] if annotations else []
        out.append({"id": ref["id"], "hard_labels": [list(s) for s in spans]})
    return out


def _noisy_soft_predictions(references, seed):
    rng = np.random.default_rng(seed)
    out = []
    for ref in references:
        n = len(ref["model_output_text"])
        cuts = np.unique(np.r_[0, np.sort(rng.integers(0, n + 1, size=rng.integers(0, 6))), n])
        soft = [{"start": int(a), "end": int(b), "prob": float(rng.choice([0.0, 0.25, 0.5, 0.75, 1.0, rng.random()]))}
                for a, b in zip(cuts[:-1], cuts[1:], strict=True) if rng.random() < 0.7]
        out.append({"id": ref["id"], "soft_labels": soft})  # hard labels derived at prob > 0.5
    return out


def _check(references, predictions):
    got = mushroom.score_spans(references, predictions)
    ious, cors = official_scores(references, predictions)
    np.testing.assert_allclose(got["items"]["iou"], ious, rtol=0, atol=1e-9)
    np.testing.assert_allclose(got["items"]["cor"], cors, rtol=0, atol=1e-9)
    assert abs(got["iou"] - ious.mean()) < 1e-9 and abs(got["cor"] - cors.mean()) < 1e-9
    return got


@pytest.mark.parametrize("which", [0, 1, 2])
def test_matches_official_on_shipped_test_split_annotators(references, which):
    got = _check(references, _annotator_predictions(references, which))
    assert set(got["per_language"]) == {"en", "fr", "es", "de"}
    assert sum(v["n_items"] for v in got["per_language"].values()) == len(references) == 606
    assert 0.2 < got["iou"] < 1.0  # annotators agree partly with the majority


@pytest.mark.parametrize("seed", [0, 1])
def test_matches_official_on_shipped_test_split_noisy_soft(references, seed):
    _check(references, _noisy_soft_predictions(references, seed))


def test_reference_against_itself_and_soft_only(references):
    got = _check(references, [{"id": r["id"], "soft_labels": r["soft_labels"]} for r in references])
    assert got["cor"] == pytest.approx(1.0)
    perfect = mushroom.score_spans(references, copy.deepcopy(references))
    assert perfect["iou"] == 1.0 and perfect["cor"] == pytest.approx(1.0)


def test_mark_all_and_mark_none_baselines(references):
    for kind in ("mark_all", "mark_none"):
        got = _check(references, mushroom.baseline_predictions(references, kind))
        n_empty = sum(1 for r in references if not r["hard_labels"])
        if kind == "mark_none":  # IoU 1 exactly where the gold is empty too
            assert got["iou"] == pytest.approx(n_empty / len(references))
        # a constant prediction: correlation 1 exactly on items whose gold vector is constant
        constant = sum(1 for r in references if mushroom._distinct_rounded(
            mushroom._paint(mushroom._soft(r["soft_labels"], len(r["model_output_text"]), ""),
                            len(r["model_output_text"]))) == 1)
        assert got["cor"] == pytest.approx(constant / len(references))


# --- hand-computed cases ------------------------------------------------------------------------------------------

def _ref(hard, soft, text="abcdefghij", item_id="tst-en-1"):
    return {"id": item_id, "model_output_text": text, "hard_labels": hard, "soft_labels": soft}


def test_hand_computed_iou_and_cor():
    ref = _ref([[0, 5]], [{"start": 0, "end": 5, "prob": 0.8}])
    pred = {"id": "tst-en-1", "hard_labels": [[3, 8]]}
    got = mushroom.score_spans([ref], [pred])
    assert got["iou"] == pytest.approx(2 / 8)  # {3,4} / {0..7}
    # Two two-valued vectors: rho = the phi coefficient of the indicators a = 1^5 0^5, b = 0^3 1^5 0^2:
    # cov = P(a & b) - P(a) P(b) = 2/10 - 1/4 = -0.05, var = 1/4 each -> rho = -0.2.
    assert got["cor"] == pytest.approx(scipy_stats.spearmanr([.8] * 5 + [0] * 5, [0] * 3 + [1] * 5 + [0] * 2)[0])
    assert got["cor"] == pytest.approx(-0.2)


def test_both_empty_is_one_and_constant_rule():
    ref = _ref([], [])
    assert mushroom.score_spans([ref], [{"id": "tst-en-1", "hard_labels": []}])["iou"] == 1.0
    assert mushroom.score_spans([ref], [{"id": "tst-en-1", "hard_labels": []}])["cor"] == 1.0
    # constant gold (nothing marked) vs non-constant prediction: 0
    assert mushroom.score_spans([ref], [{"id": "tst-en-1", "hard_labels": [[0, 2]]}])["cor"] == 0.0
    # constant prediction (everything at 0.3) vs constant gold: 1 even though the values differ
    full = {"id": "tst-en-1", "soft_labels": [{"start": 0, "end": 10, "prob": 0.3}]}
    assert mushroom.score_spans([ref], [full])["cor"] == 1.0
    assert mushroom.score_spans([ref], [full])["iou"] == 1.0  # 0.3 <= 0.5: no hard span


def test_hard_from_soft_merges_adjacent_only():
    soft = [{"start": 5, "end": 8, "prob": 0.9}, {"start": 0, "end": 3, "prob": 0.6}, {"start": 3, "end": 5, "prob": 1},
            {"start": 8, "end": 9, "prob": 0.5}, {"start": 10, "end": 12, "prob": 0.7},
            {"start": 11, "end": 13, "prob": 0.7}]
    assert mushroom.hard_from_soft(soft) == [[0, 8], [10, 12], [11, 13]]
    assert mushroom.hard_from_soft(soft) == official_hard(soft)
    assert mushroom.soft_from_hard([[1, 2]]) == [{"start": 1, "end": 2, "prob": 1.0}]


def test_later_soft_span_overwrites_earlier():
    ref = _ref([[0, 4]], [{"start": 0, "end": 4, "prob": 1.0}, {"start": 2, "end": 6, "prob": 0.5}])
    pred = {"id": "tst-en-1",
            "soft_labels": [{"start": 0, "end": 10, "prob": 0.1}, {"start": 0, "end": 2, "prob": 0.9}]}
    assert mushroom.score_spans([ref], [pred])["cor"] == pytest.approx(official_scores([ref], [pred])[1][0])


def test_per_language_from_lang_field_or_id():
    refs = [_ref([[0, 2]], [{"start": 0, "end": 2, "prob": 0.6}], item_id="tst-en-1"),
            dict(_ref([], [], item_id="x"), lang="FR")]
    got = mushroom.score_spans(refs, [{"id": "tst-en-1", "hard_labels": [[0, 2]]},
                                      {"id": "x", "hard_labels": [[0, 1]]}])
    assert got["per_language"] == {"en": {"iou": 1.0, "cor": 1.0, "n_items": 1},
                                   "fr": {"iou": 0.0, "cor": 0.0, "n_items": 1}}


# --- errors -------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("pred, message", [
    ({"id": "tst-en-1", "hard_labels": [[0, 11]]}, "ends past the text"),
    ({"id": "tst-en-1", "hard_labels": [[-1, 2]]}, "0 <= start <= end"),
    ({"id": "tst-en-1", "hard_labels": [[3, 2]]}, "0 <= start <= end"),
    ({"id": "tst-en-1", "hard_labels": [[0.5, 2]]}, "non-integer"),
    ({"id": "tst-en-1", "soft_labels": [{"start": 0, "end": 2, "prob": 1.5}]}, "prob"),
    ({"id": "tst-en-1", "soft_labels": [{"start": 0, "end": 2}]}, "lacks"),
    ({"id": "tst-en-1"}, "neither hard_labels nor soft_labels"),
    ({"id": "tst-en-2", "hard_labels": []}, "same ids"),
])
def test_clear_errors(pred, message):
    with pytest.raises(mushroom.MushroomFormatError, match=message) as info:
        mushroom.score_spans([_ref([], [])], [pred])
    assert isinstance(info.value, ValueError)


def test_duplicate_and_missing_text():
    with pytest.raises(mushroom.MushroomFormatError, match="duplicate id"):
        mushroom.score_spans([_ref([], []), _ref([], [])], [{"id": "tst-en-1", "hard_labels": []}])
    with pytest.raises(mushroom.MushroomFormatError, match="model_output_text"):
        mushroom.score_spans([{"id": "a", "hard_labels": []}], [{"id": "a", "hard_labels": []}])


# --- property test against the re-implementation ------------------------------------------------------------------

@st.composite
def _record_pair(draw):
    n = draw(st.integers(1, 30))
    span = st.tuples(st.integers(0, n), st.integers(0, n)).map(sorted)
    prob = st.sampled_from([0.0, 0.2, 0.5, 0.5000001, 0.7, 1.0]) | st.floats(0, 1)
    soft = st.lists(st.builds(lambda s, p: {"start": s[0], "end": s[1], "prob": p}, span, prob), max_size=5)
    hard = st.lists(span.map(list), max_size=4)
    ref = {"id": "tst-de-1", "model_output_text": "x" * n, "soft_labels": draw(soft)}
    if draw(st.booleans()):
        ref["hard_labels"] = draw(hard)
    pred = {"id": "tst-de-1"}
    choice = draw(st.sampled_from(["hard", "soft", "both"]))
    if choice in ("hard", "both"):
        pred["hard_labels"] = draw(hard)
    if choice in ("soft", "both"):
        pred["soft_labels"] = draw(soft)
    return ref, pred


@settings(max_examples=300, deadline=None)
@given(_record_pair())
def test_property_matches_official(pair):
    ref, pred = pair
    _check([ref], [pred])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 4), min_size=2, max_size=40), st.lists(st.floats(-5, 5), min_size=2, max_size=40))
def test_spearman_matches_scipy(a, b):
    n = min(len(a), len(b))
    x, y = np.array(a[:n], float), np.array(b[:n], float)
    expected = scipy_stats.spearmanr(x, y).correlation if np.ptp(x) > 0 and np.ptp(y) > 0 else np.nan
    got = mushroom.spearman(x, y)
    if np.isnan(expected):
        assert np.isnan(got)
    else:
        assert got == pytest.approx(expected, abs=1e-12)


# --- the bridge from MUCH scores to span predictions ------------------------------------------------------------


def test_token_and_claim_char_ranges_by_hand():
    ranges = mushroom.token_char_ranges([3, 4, 9, 9, 12])
    np.testing.assert_array_equal(ranges, [[0, 3], [3, 4], [4, 9], [9, 9], [9, 12]])
    np.testing.assert_array_equal(mushroom.claim_char_ranges(ranges, [[0, 1], [2, 3], [4]]), [[0, 4], [4, 9], [9, 12]])
    with pytest.raises(ValueError, match="non-decreasing"):
        mushroom.token_char_ranges([3, 2])


def test_spans_prediction_merges_marked_ranges_and_scores_like_the_task():
    ranges = np.array([[0, 4], [4, 9], [10, 12], [12, 20]])
    prediction = mushroom.spans_prediction("x", ranges, [0.9, 0.6, 0.2, 0.7], 15)
    assert prediction["hard_labels"] == [[0, 9], [12, 15]]  # touching ranges merged, the last clipped to the text
    assert prediction["soft_labels"][-1] == {"start": 12, "end": 15, "prob": 0.7}
    forced = mushroom.spans_prediction("x", ranges, [0.9, 0.6, 0.2, 0.7], 15, hard=[False, False, True, False])
    assert forced["hard_labels"] == [[10, 12]]
    reference = {"id": "x", "model_output_text": "a" * 15, "hard_labels": [[0, 9]]}
    scored = mushroom.score_spans([reference], [prediction])
    assert scored["iou"] == pytest.approx(9 / 12)  # {0..8} vs {0..8, 12..14}
    with pytest.raises(ValueError, match="in \\[0, 1\\]"):
        mushroom.spans_prediction("x", ranges, [1.5, 0, 0, 0], 15)
