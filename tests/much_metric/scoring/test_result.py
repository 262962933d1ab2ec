"""``score`` returns a frozen, keyword-built ``ScoreResult`` with every metric of the table, and ``to_dict()``."""

import dataclasses
import inspect
import json

import pytest

from much_metric.scoring import METRIC_TABLE, METRICS, Bootstrap, ScoreResult, score, score_claims

CHUNKS = [[[0], [1, 2], [3]], [[0, 1], [2], [3]], [[0], [1]]]
LABELS = [[-1, 1, 1], [1, -1, 1], [1, 1]]
SCORES = [[0.9, 0.1, 0.3, 0.0], [0.2, 0.1, 0.8, 0.0], [0.4, 0.0]]


def test_every_metric_of_the_table_is_a_field_including_prr():
    fields = [field.name for field in dataclasses.fields(ScoreResult)]
    assert [metric.key for metric in METRIC_TABLE] == fields[: len(METRIC_TABLE)]
    assert {"prr", "prr_50"} <= set(fields)
    result = score(SCORES, CHUNKS, LABELS)
    assert result.metrics == {key: getattr(result, key) for key in METRICS}
    assert result.prr == 1.0 and result.roc_auc == 1.0  # hallucinated claims have the top scores


def test_result_is_frozen_and_keyword_only():
    result = score(SCORES, CHUNKS, LABELS)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.roc_auc = 0.0
    with pytest.raises(TypeError):
        ScoreResult(*[0.5] * len(METRICS), 1, 2, 1)  # positional construction is refused


def test_to_dict_is_the_plain_json_dict():
    result = score(SCORES, CHUNKS, LABELS, by={"lang": ["en", "fr", "en"]},
                   bootstrap=Bootstrap(n_resamples=40))
    plain = result.to_dict()
    assert list(plain) == [*METRICS, "n_samples", "n_claims", "n_hallucinated", "intervals", "by", "aggregator",
                           "stopword_handling"]
    assert plain["aggregator"] == "product" and plain["stopword_handling"] == "null"
    assert plain["intervals"]["roc_auc"] == list(result.intervals["roc_auc"])
    group = plain["by"]["lang"]["en"]
    assert list(group) == [*METRICS, "n_samples", "n_claims", "n_hallucinated", "intervals"]
    assert group["n_samples"] == result.by["lang"]["en"].n_samples == 2
    assert json.loads(json.dumps(plain))["intervals"] == plain["intervals"]  # plain lists and floats only
    claims = score_claims([[0.9, 0.2, 0.0], [0.1, 0.8, 0.0], [0.3, 0.0]], CHUNKS, LABELS)
    assert claims.level == "claim" and claims.aggregator is None and claims.stopword_handling is None
    assert list(claims.to_dict()) == [*METRICS, "n_samples", "n_claims", "n_hallucinated", "level"]


@pytest.mark.parametrize("function", [score, score_claims])
def test_data_positional_options_keyword_only(function):
    parameters = inspect.signature(function).parameters.values()
    positional = [p.name for p in parameters if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD]
    assert positional[-1] in ("stopword_mask", "labels")
    keyword = {p.name for p in parameters if p.kind is inspect.Parameter.KEYWORD_ONLY}
    # score groups the token-to-claim options in one Aggregation; score_claims aggregates nothing, so its two
    # options stay plain keywords
    options = {"aggregation"} if function is score else {"score_type", "drop_last_chunk"}
    assert {"bootstrap", "generation_ids", "by"} | options <= keyword
    assert not {"aggregator", "stopword_handling"} & keyword
    if function is score:
        assert not {"score_type", "drop_last_chunk"} & keyword
    assert not {"n_bootstrap", "n_resamples", "confidence_level", "random_state", "confidence", "stopwords",
                "sample_ids"} & {p.name for p in parameters}


def test_one_name_per_concept_across_the_public_functions():
    from much_metric.report import evaluate_signals
    from much_metric.scoring import aggregate_claims, compare

    for function in (aggregate_claims, score, score_claims, compare, evaluate_signals):
        names = set(inspect.signature(function).parameters)
        # the bootstrap's seed is Bootstrap.random_state; evaluate_signals' own random_state seeds its random floor
        # (TEAM.md: random_state, never floor_seed)
        banned = {"n_bootstrap", "n_resamples", "confidence_level", "random_state", "confidence", "stopwords",
                  "sample_ids", "data", "floor_seed", "seed"} - ({"random_state"} if function is evaluate_signals
                                                                 else set())
        assert not banned & names, function.__name__
        options = [p for p in inspect.signature(function).parameters.values() if p.default is not inspect._empty
                   and p.name not in ("stopword_mask", "labels")]
        assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in options), function.__name__
