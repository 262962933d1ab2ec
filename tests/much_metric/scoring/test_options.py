"""much_metric.scoring.Aggregation: the token-to-claim options of score/compare/aggregate_claims in one object."""

import dataclasses
import inspect

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

import much_metric
from much_dataset import schema
from much_dataset.params import InvalidParameterError
from much_metric.scoring import Aggregation, Bootstrap, aggregate_claims, compare, score
from tests.much_metric._metric_helpers import columns, mushroom_rows


@pytest.fixture(scope="module")
def data():
    return columns(mushroom_rows(limit=120))


def _max_excluding_stopwords(scores, chunks, mask):
    """Per claim (EOS claim dropped): the max over its non-stopword tokens, over all its tokens if all are
    stopwords. A plain loop written from the definition in docs/reference-behaviour.md#aggregators."""
    out = []
    for chunk in chunks[:-1]:
        kept = [scores[t] for t in chunk if not mask[t]]
        out.append(max(kept) if kept else max(scores[t] for t in chunk))
    return out


def test_max_exclude_equals_hand_aggregated_claims_and_sklearn(data):
    options = Aggregation(aggregator="max", stopword_handling="exclude")
    scores, chunks, mask, labels = (data["scores"], data[schema.TOKEN_CHUNKS], data[schema.STOPWORD_MASK],
                                    data[schema.LABELS])
    hand = [_max_excluding_stopwords(s, c, m) for s, c, m in zip(scores, chunks, mask, strict=True)]
    got = aggregate_claims(scores, chunks, mask, aggregation=options)
    assert [len(g) for g in got] == [len(h) for h in hand]
    flat = np.concatenate([np.asarray(h, dtype=float) for h in hand])
    np.testing.assert_array_equal(np.concatenate(got), flat)  # max is exact: no rounding to allow for
    y = np.concatenate([np.asarray(row[:-1]) == schema.HALLUCINATED for row in labels])
    assert 0 < y.sum() < len(y)
    result = score(scores, chunks, labels, mask, aggregation=options)
    assert result.roc_auc == pytest.approx(roc_auc_score(y, flat), abs=1e-12)
    assert (result.aggregator, result.stopword_handling, result.n_claims) == ("max", "exclude", len(y))
    # the rule makes a difference on these data (else the test could not tell "exclude" from "null")
    nulled = score(scores, chunks, labels, mask, aggregation="max")
    assert nulled.roc_auc != result.roc_auc


def test_a_name_is_the_default_aggregation_with_that_aggregator(data):
    args = (data["scores"], data[schema.TOKEN_CHUNKS], data[schema.LABELS], data[schema.STOPWORD_MASK])
    for name in ("product", "mean", "max", "geometric"):
        assert score(*args, aggregation=name) == score(*args, aggregation=Aggregation(aggregator=name))
    assert score(*args) == score(*args, aggregation=Aggregation())


def test_every_option_of_the_object_reaches_the_metric():
    scores, chunks, labels = [[0.2, 0.9, 0.6], [0.7, 0.1, 0.8]], [[[0], [1], [2]], [[0], [1], [2]]], \
        [[1, -1, 1], [-1, 1, -1]]
    mask = [[False] * 3] * 2
    kept = score(scores, chunks, labels, mask, aggregation=Aggregation(drop_last_chunk=False))
    assert kept.n_claims == 6 and score(scores, chunks, labels, mask).n_claims == 4
    flipped = [[1 - s for s in row] for row in scores]
    as_confidence = score(flipped, chunks, labels, mask, aggregation=Aggregation(score_type="confidence"))
    assert as_confidence.roc_auc == score(scores, chunks, labels, mask).roc_auc
    paired = compare(scores, flipped, chunks, labels, mask, aggregation=Aggregation(aggregator="mean"),
                     bootstrap=Bootstrap(n_resamples=40))
    assert paired.roc_auc.a == score(scores, chunks, labels, mask, aggregation="mean").roc_auc
    assert paired.roc_auc.b == pytest.approx(1 - paired.roc_auc.a)


@pytest.mark.parametrize(("field", "value", "message"), [
    ("aggregator", "median", "Aggregation: aggregator must be one of ('product', 'mean', 'max', 'geometric'), got "
                             "'median'"),
    ("stopword_handling", "drop", "Aggregation: stopword_handling must be one of ('null', 'exclude'), got 'drop'"),
    ("drop_last_chunk", 1, "Aggregation: drop_last_chunk must be a bool, got 1"),
    ("score_type", "probability", "Aggregation: score_type must be one of ('uncertainty', 'confidence'), got "
                                  "'probability'"),
])
def test_each_field_is_checked_when_built(field, value, message):
    with pytest.raises(InvalidParameterError) as error:
        Aggregation(**{field: value})
    assert str(error.value) == message
    assert isinstance(error.value, ValueError) and isinstance(error.value, TypeError)


def test_frozen_keyword_only_and_exported():
    options = Aggregation(aggregator="mean")
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.aggregator = "max"
    with pytest.raises(TypeError):
        Aggregation("mean")
    assert much_metric.Aggregation is Aggregation is much_metric.scoring.Aggregation
    assert "Aggregation" in much_metric.__all__ and "Aggregation" in much_metric.scoring.__all__
    assert [f.name for f in dataclasses.fields(Aggregation)] == ["aggregator", "stopword_handling",
                                                                 "drop_last_chunk", "score_type"]


@pytest.mark.parametrize("function", [score, compare, aggregate_claims])
@pytest.mark.parametrize("bad", [{"aggregator": "max"}, 3, None, ("max", "exclude")])
def test_a_wrong_type_is_a_clear_error_naming_the_function(function, bad):
    scores, chunks, labels = [[0.2, 0.9, 0.0]], [[[0], [1], [2]]], [[1, -1, 1]]
    args = {score: (scores, chunks, labels), compare: (scores, scores, chunks, labels),
            aggregate_claims: (scores, chunks)}[function]
    with pytest.raises(InvalidParameterError, match=rf"^{function.__name__}: aggregation must be a "
                                                    r"much_metric.Aggregation or an aggregator name") as error:
        function(*args, aggregation=bad)
    assert type(bad).__name__ in str(error.value)


def test_an_unknown_aggregator_name_says_so():
    with pytest.raises(InvalidParameterError, match=r"^score: aggregation='median' is not an aggregator name: "
                                                    r"Aggregation: aggregator must be one of"):
        score([[0.2, 0.9, 0.0]], [[[0], [1], [2]]], [[1, -1, 1]], aggregation="median")


@pytest.mark.parametrize("option", ["aggregator", "stopword_handling", "drop_last_chunk", "score_type"])
@pytest.mark.parametrize("function", [score, compare, aggregate_claims])
def test_the_old_flat_keywords_are_gone(function, option):
    assert option not in inspect.signature(function).parameters
    assert inspect.signature(function).parameters["aggregation"].default == "product"
