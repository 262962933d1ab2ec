"""Bad input to the metric is an error naming the sample and the field, never a silently different number (#12).

Each case below was accepted (or failed with a bare numpy/Python error) before the checks of #12.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from much_metric.scoring import (
    Bootstrap,
    MuchMetricWarning,
    aggregate_claims,
    claim_layout,
    compare,
    score,
    score_claims,
)

REPO = Path(__file__).resolve().parents[3]
IDS = ["gen-a", "gen-b", "gen-c"]
# Three samples; the last chunk of each is the EOS claim. Both classes among the evaluated claims.
CHUNKS = [[[0, 1], [2], [3]], [[0], [1, 2], [3, 4], [5]], [[0, 1, 2], [3]]]
LABELS = [[-1, 1, 1], [1, -1, 1, 1], [-1, 1]]
SCORES = [[0.9, 0.1, 0.2, 0.0], [0.3, 0.8, 0.7, 0.1, 0.4, 0.05], [0.6, 0.5, 0.2, 0.1]]


def _raises(match, call, *args, **kwargs):
    with pytest.raises(ValueError, match=match) as info:
        call(*args, **kwargs)
    return str(info.value)


def _named(message: str, index: int) -> None:
    assert f"#{index} (generation_id={IDS[index]!r})" in message, message


# -- token scores that do not line up with the chunks (no stopword_mask, as on the hub) --------------------------

@pytest.mark.parametrize("where", ["append", "prepend"])
def test_one_extra_score_per_sample_raises(where):
    # A kept BOS or prompt token ("prepend") or a stray trailing score ("append"): every claim would be shifted.
    scores = [[0.5, *s] if where == "prepend" else [*s, 0.5] for s in SCORES]
    message = _raises("token scores", score, scores, CHUNKS, LABELS, generation_ids=IDS)
    _named(message, 0)
    assert "covers 4 tokens" in message


def test_an_extra_score_in_one_sample_names_that_sample():
    scores = [SCORES[0], SCORES[1], [*SCORES[2], 0.3]]
    _named(_raises("5 token scores but 'token_chunks' covers 4", score, scores, CHUNKS, LABELS, generation_ids=IDS), 2)


def test_a_missing_score_raises():
    scores = [SCORES[0], SCORES[1][:-1], SCORES[2]]
    # The EOS chunk [5] now points past the scores.
    _named(_raises("refers to token 5, out of range", score, scores, CHUNKS, LABELS, generation_ids=IDS), 1)


def test_chunks_shifted_by_one_raise():
    shifted = [[[i + 1 for i in chunk] for chunk in chunks] for chunks in CHUNKS]
    _named(_raises("token_chunks", score, [[0.5, *s] for s in SCORES], shifted, LABELS, generation_ids=IDS), 0)


@pytest.mark.parametrize(
    ("chunks", "match"),
    [
        ([[0, 1], [1, 2], [3]], "overlap: token 1 is in two chunks"),
        ([[0, 1], [0, 1], [2], [3]], "overlap: token 0 is in two chunks"),
        ([[2], [0, 1], [3]], "come out of order: token 2 comes first"),
        ([[0], [2], [1], [3]], "come out of order at token 2"),
        ([[0], [2], [3]], "leave a gap: token 1 is in no chunk"),
        ([[0, 1], [2]], "there are 4 token scores but 'token_chunks' covers 3 tokens"),
        ([[0, 1], [3]], "leave a gap: token 2 is in no chunk"),
    ],
)
def test_chunks_must_cover_every_token_once_in_order(chunks, match):
    labels = [[1] * (len(chunks) - 1) + [1], *LABELS[1:]]
    labels[0][0] = -1
    _named(_raises(match, score, SCORES, [chunks, *CHUNKS[1:]], labels, generation_ids=IDS), 0)


def test_the_checks_hold_for_claim_layout_and_aggregate_claims_too():
    bad = [[[0, 1], [1, 2], [3]], *CHUNKS[1:]]
    _raises("overlap", claim_layout, bad, [4, 6, 4], generation_ids=IDS)
    _raises("overlap", aggregate_claims, SCORES, bad, generation_ids=IDS)
    _raises("overlap", score_claims, [[0.1, 0.2, 0.3], [0.1] * 4, [0.1] * 2], bad, LABELS, generation_ids=IDS)


# -- non-integral indices and labels ---------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["list", "numpy", "arrow"])
def test_float_chunk_index_is_rejected_not_truncated(kind):
    chunks = [[[0, 1], [2.9], [3]], *CHUNKS[1:]]
    if kind == "numpy":
        chunks = [[np.asarray(c, dtype=np.float64) for c in sample] for sample in chunks]
    elif kind == "arrow":
        chunks = pa.array(chunks, type=pa.list_(pa.list_(pa.float64())))
    _named(_raises(r"non-integral token index 2\.9", score, SCORES, chunks, LABELS, generation_ids=IDS), 0)


def test_integral_float_chunk_indices_are_accepted():
    as_float = [[[float(i) for i in chunk] for chunk in chunks] for chunks in CHUNKS]
    assert score(SCORES, as_float, LABELS) == score(SCORES, CHUNKS, LABELS)


@pytest.mark.parametrize("label", [1.5, 0.5, 0, 2, float("nan")])
def test_labels_other_than_minus_one_and_one_are_rejected(label):
    labels = [LABELS[0], [1, label, 1, 1], LABELS[2]]
    _named(_raises("'labels' must be -1", score, SCORES, CHUNKS, labels, generation_ids=IDS), 1)
    _raises("'labels' must be -1", score_claims, [[0.1, 0.2, 0.3], [0.1] * 4, [0.1] * 2], CHUNKS, labels)


def test_evaluate_module_rejects_label_one_and_a_half(tmp_path):
    # The evaluate module declared references as int32, so datasets cast 1.5 to 1 before the core saw it.
    script = tmp_path / "run.py"
    script.write_text(
        "import json, sys, evaluate\n"
        f"module = evaluate.load({str(REPO / 'much_metric' / 'much_metric.py')!r})\n"
        "scores, chunks, labels = json.load(open(sys.argv[1]))\n"
        "try:\n"
        "    module.compute(predictions=scores, references=labels, token_chunks=chunks)\n"
        "except ValueError as error:\n"
        "    print('REJECTED', error)\n"
        "else:\n"
        "    print('ACCEPTED')\n"
    )
    inputs = tmp_path / "inputs.json"
    inputs.write_text(json.dumps([SCORES, CHUNKS, [LABELS[0], [1, 1.5, 1, 1], LABELS[2]]]))
    env = dict(os.environ, PYTHONPATH=str(REPO), HF_MODULES_CACHE=str(tmp_path / "modules"),
               HF_HOME=str(tmp_path / "hf"), HF_HUB_OFFLINE="1", HF_EVALUATE_OFFLINE="1", HF_DATASETS_OFFLINE="1")
    done = subprocess.run([sys.executable, str(script), str(inputs)], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "REJECTED" in done.stdout and "got 1.5" in done.stdout, done.stdout


# -- by= groups --------------------------------------------------------------------------------------------------

def test_by_int_and_str_of_the_same_text_raise():
    message = _raises("both be reported as group '1'", score, SCORES, CHUNKS, LABELS, by={"x": [1, "1", 1]})
    assert "sample #1" in message


@pytest.mark.parametrize("missing", [float("nan"), np.float32("nan"), None])
def test_by_missing_value_raises(missing):
    message = _raises("has no value", score, SCORES, CHUNKS, LABELS, by={"lang": ["en", missing, "fr"]})
    assert "sample #1" in message


def test_by_unhashable_value_is_a_clear_type_error():
    with pytest.raises(TypeError, match=r"by\['lang'\]: sample #2 has an unhashable value of type list"):
        score(SCORES, CHUNKS, LABELS, by={"lang": ["en", "fr", ["de"]]})


def test_by_keeps_every_sample_in_one_group():
    with pytest.warns(MuchMetricWarning):  # one-class groups
        result = score(SCORES, CHUNKS, LABELS, by={"x": [1, 2, 1], "y": ["a", "b", "c"]})
    for groups in result.by.values():
        assert sum(g.n_samples for g in groups.values()) == 3
        assert sum(g.n_claims for g in groups.values()) == result.n_claims
    assert list(result.by["x"]) == ["1", "2"]


# -- options -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("bootstrap", [True, False, -1, 2.0, "10", 10, {"n_resamples": 10}])
def test_bootstrap_must_be_a_bootstrap(bootstrap):
    claims = [[0.1, 0.2, 0.3], [0.1] * 4, [0.1] * 2]
    for call, args in ((score, (SCORES, CHUNKS, LABELS)), (score_claims, (claims, CHUNKS, LABELS)),
                       (compare, (SCORES, SCORES, CHUNKS, LABELS))):
        with pytest.raises(TypeError, match="bootstrap must be a much_metric.scoring.Bootstrap") as info:
            call(*args, bootstrap=bootstrap)
        if bootstrap == 10:
            assert "bootstrap=Bootstrap(n_resamples=10)" in str(info.value)
    with pytest.raises(TypeError, match="bootstrap must be a much_metric.scoring.Bootstrap, got None"):
        compare(SCORES, SCORES, CHUNKS, LABELS, bootstrap=None)  # a comparison needs resamples


@pytest.mark.parametrize(("options", "match"), [
    ({"n_resamples": 0}, "n_resamples must be an integer of at least 40 .no bootstrap: bootstrap=None., got 0"),
    ({"n_resamples": 39}, "n_resamples must be an integer of at least 40"),
    ({"n_resamples": 100_001}, "n_resamples must be at most 100000"),
    ({"n_resamples": True}, "n_resamples must be an integer of at least 40"),
    ({"n_resamples": 2.0}, "n_resamples must be an integer of at least 40"),
    ({"confidence_level": 1.0}, "confidence_level must be a number in"),
    ({"confidence_level": "0.9"}, "confidence_level must be a number in"),
])
def test_bootstrap_options_are_checked_when_built(options, match):
    with pytest.raises(ValueError, match=match):
        Bootstrap(**options)


def test_bootstrap_is_frozen_and_its_seed_typed():
    import dataclasses

    with pytest.raises(dataclasses.FrozenInstanceError):
        Bootstrap().n_resamples = 5
    with pytest.raises(TypeError, match="random_state must be an int or None"):
        Bootstrap(random_state=1.5)
    assert Bootstrap(random_state=None).random_state is None


def test_short_generation_ids_is_a_value_error_not_an_index_error():
    short = IDS[:2]
    _raises("generation_ids has 2 ids but there are 3 samples", score, SCORES, CHUNKS, LABELS, generation_ids=short)
    _raises("generation_ids has 2 ids but there are 3 samples", aggregate_claims, SCORES, CHUNKS, generation_ids=short)
    _raises("generation_ids has 2 ids but there are 3 samples", score_claims,
            [[0.1, 0.2, 0.3], [0.1] * 4, [0.1] * 2], CHUNKS, LABELS, generation_ids=short)
    _raises("generation_ids has 2 ids but there are 3 samples", claim_layout, CHUNKS, [4, 6, 4], generation_ids=short)
    # Even when another error is found first, naming a sample past the short list is no IndexError.
    _raises("sample #2", score, [*SCORES[:2], [0.1, float("inf"), 0.2, 0.3]], CHUNKS, LABELS, generation_ids=short)


def test_compare_with_a_short_second_method_blames_that_method():
    message = _raises("token_scores_b has 2 samples but token_scores_a has 3", compare, SCORES, SCORES[:2], CHUNKS,
                      LABELS, bootstrap=Bootstrap(n_resamples=40))
    assert "ClaimLayout" not in message
    shorter = [SCORES[0], SCORES[1][:-1], SCORES[2]]
    message = _raises("token_scores_b has 5 scores but token_scores_a and the chunks have 6", compare, SCORES,
                      shorter, CHUNKS, LABELS, bootstrap=Bootstrap(n_resamples=40), generation_ids=IDS)
    _named(message, 1)


# -- non-finite and huge scores ----------------------------------------------------------------------------------

def test_non_finite_token_scores_name_sample_and_token():
    scores = [SCORES[0], [0.3, 0.8, np.nan, 0.1, 0.4, 0.05], SCORES[2]]
    _named(_raises("non-finite value .* at token 2", score, scores, CHUNKS, LABELS, generation_ids=IDS), 1)


def test_non_finite_claim_scores_raise():
    claims = [[0.1, np.inf, 0.3], [0.1] * 4, [0.1] * 2]
    _raises("non-finite", score_claims, claims, CHUNKS, LABELS, generation_ids=IDS)


def test_huge_scores_with_mean_rank_correctly():
    # Sums of scores near the float64 maximum overflow; the mean of finite numbers never does.
    big = np.finfo(np.float64).max / 2
    scores = [[big, big, big, 0.0], [big, -big, big, big, 3.0, 0.0], [1.0, 2.0, 3.0, 0.0]]
    claims = aggregate_claims(scores, CHUNKS, aggregation="mean")
    expected = [[big, big], [big, 0.0, big / 2], [2.0]]
    for got, want in zip(claims, expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-15)
    result = score(scores, CHUNKS, LABELS, aggregation="mean")
    # Claims (score, hallucinated): (big, yes), (big, no), (big, no), (0, yes), (big / 2, no), (2, yes).
    assert result.roc_auc == pytest.approx((0.5 + 0.5 + 1) / 9)


def test_ordinary_mean_keeps_the_plain_sum_over_n():
    rng = np.random.default_rng(0)
    scores = [rng.random(len(s)) * 1e3 for s in SCORES]
    claims = aggregate_claims(scores, CHUNKS, aggregation="mean")
    for got, values, chunks in zip(claims, scores, CHUNKS, strict=True):
        assert got.tolist() == [np.add.reduce(values[c[0] : c[-1] + 1]) / len(c) for c in chunks[:-1]]


def test_huge_scores_with_product_raise_instead_of_ranking_nan():
    big = np.finfo(np.float64).max / 2
    scores = [[big, big, 0.5, 0.0], *SCORES[1:]]
    with pytest.warns(MuchMetricWarning, match="assumes token uncertainties in"):
        message = _raises("non-finite claim score", score, scores, CHUNKS, LABELS, generation_ids=IDS)
    _named(message, 0)


def test_a_flat_array_or_claim_scores_as_token_scores_get_a_pointer():
    """Issue 57: one flat array of token scores, and one score per claim passed as token scores, are named as such,
    with where they go (split per sample; much_metric.score_claims)."""
    import numpy as np

    from much_metric import score

    chunks = [[[0, 1], [2]], [[0], [1, 2], [3]]]
    labels = [[-1, 1], [1, -1, 1]]
    with pytest.raises(ValueError, match=r"one flat sequence of 7 numbers.*score_claims"):
        score(np.linspace(0.1, 0.9, 7), chunks, labels, stopword_mask=[[0, 0, 0], [0, 0, 0, 0]])
    with pytest.raises(ValueError, match=r"one flat sequence"):
        score([0.1, 0.2, 0.3], chunks, labels, stopword_mask=[[0, 0, 0], [0, 0, 0, 0]])
    with pytest.raises(ValueError, match=r"one score per claim.*much_metric.score_claims"):
        score([[0.2, 0.3], [0.1, 0.4, 0.5]], chunks, labels, stopword_mask=[[0, 0, 0], [0, 0, 0, 0]])
