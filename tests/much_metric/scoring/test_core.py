import dataclasses
import subprocess
import sys
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import auc, average_precision_score, precision_recall_curve, roc_auc_score

from much_dataset import schema
from much_dataset.synthetic import make_rows
from much_metric.scoring import Aggregation, Bootstrap
from much_metric.scoring._aggregation import MuchMetricWarning, claim_layout
from much_metric.scoring._api import METRICS, aggregate_claims, compare, score, select_samples
from tests.much_metric._metric_helpers import columns, loop_aggregate, mushroom_rows


@pytest.fixture(scope="module")
def data():
    return columns(mushroom_rows())


def _loop_pipeline(data, aggregator, indices=None):
    """Reference-style evaluation: per-claim loop + scikit-learn."""
    indices = range(len(data["scores"])) if indices is None else indices
    claims, y = [], []
    for i in indices:
        claims += loop_aggregate(data["scores"][i], data[schema.TOKEN_CHUNKS][i], data[schema.STOPWORD_MASK][i],
                                 aggregator=aggregator)
        y += [label == schema.HALLUCINATED for label in data[schema.LABELS][i][:-1]]
    return np.array(y), np.array(claims)


@pytest.mark.parametrize("aggregator", ["product", "mean", "max", "geometric"])
def test_score_matches_loop_plus_sklearn(data, aggregator):
    result = score(data["scores"], data[schema.TOKEN_CHUNKS], data[schema.LABELS],
                   stopword_mask=data[schema.STOPWORD_MASK], aggregation=aggregator)
    y, s = _loop_pipeline(data, aggregator)
    precision, recall, _ = precision_recall_curve(y, s)
    assert result.roc_auc == pytest.approx(roc_auc_score(y, s), abs=1e-10)
    assert result.pr_auc == pytest.approx(auc(recall, precision), abs=1e-10)
    assert result.average_precision == pytest.approx(average_precision_score(y, s), abs=1e-10)
    assert result.n_samples == len(data["scores"])
    assert result.n_claims == len(y) and result.n_hallucinated == int(y.sum())
    assert result.aggregator == aggregator and result.stopword_handling == "null" and result.level == "token"
    assert result.intervals is None and result.by is None


def test_breakdown_equals_scoring_each_group_alone(data):
    result = score(data["scores"], data[schema.TOKEN_CHUNKS], data[schema.LABELS],
                   stopword_mask=data[schema.STOPWORD_MASK], by={"lang": data[schema.LANG]},
                   bootstrap=Bootstrap(n_resamples=50))
    assert sorted(result.by["lang"]) == ["de", "en", "es", "fr"]
    for lang, group in result.by["lang"].items():
        members = [i for i, value in enumerate(data[schema.LANG]) if value == lang]
        alone = score([data["scores"][i] for i in members], [data[schema.TOKEN_CHUNKS][i] for i in members],
                      [data[schema.LABELS][i] for i in members],
                      stopword_mask=[data[schema.STOPWORD_MASK][i] for i in members],
                      bootstrap=Bootstrap(n_resamples=50))
        for key in (*METRICS, "n_samples", "n_claims", "n_hallucinated"):
            assert getattr(group, key) == pytest.approx(getattr(alone, key), nan_ok=True), (lang, key)
        assert group.intervals == alone.intervals  # same seed, same resampling of the group's samples


def test_intervals_for_every_metric(data):
    result = score(data["scores"], data[schema.TOKEN_CHUNKS], data[schema.LABELS],
                   bootstrap=Bootstrap(n_resamples=200, random_state=3))
    assert set(result.intervals) == set(METRICS)
    for key in METRICS:
        low, high = result.intervals[key]
        assert low <= high
    low, high = result.intervals["roc_auc"]
    assert low < result.roc_auc < high


def test_single_class_group_is_nan_with_a_warning():
    scores = [[0.9, 0.1, 0.0], [0.2, 0.8, 0.0], [0.3, 0.4, 0.0]]
    chunks = [[[0], [1], [2]]] * 3
    labels = [[-1, 1, 1], [1, -1, 1], [1, 1, 1]]
    with pytest.warns(MuchMetricWarning, match="lang=fr: no hallucinated claim among 2 claims of 1 samples"):
        result = score(scores, chunks, labels, by={"lang": ["en", "en", "fr"]})
    assert np.isnan(result.by["lang"]["fr"].roc_auc)
    assert result.by["lang"]["en"].roc_auc == 1.0


def test_label_validation_names_the_sample():
    scores, chunks = [[0.1, 0.2, 0.0]], [[[0], [1], [2]]]
    with pytest.raises(ValueError, match=r"generation_id='abc'.*-1 \(hallucinated\) or 1 \(correct\), got 0"):
        score(scores, chunks, [[0, 1, 1]], generation_ids=["abc"])
    with pytest.raises(ValueError, match=r"generation_id='abc'.*'labels' has 2 entries but 'token_chunks' has 3"):
        score(scores, chunks, [[1, 1]], generation_ids=["abc"])
    with pytest.raises(ValueError, match="labels' has 2 samples"):
        score(scores, chunks, [[1, 1, 1], [1, 1, 1]])
    with pytest.raises(ValueError, match="needs labels"):
        score(scores, chunks, None)
    with pytest.raises(TypeError, match=r"bootstrap must be a much_metric.scoring.Bootstrap or None, got -1"):
        score(scores, chunks, [[-1, 1, 1]], bootstrap=-1)
    with pytest.raises(ValueError, match=r"by\['lang'\] has 2 values"):
        score(scores, chunks, [[-1, 1, 1]], by={"lang": ["en", "fr"]})


def test_layout_with_labels_and_drop_last_chunk(data):
    n_tokens = [len(s) for s in data["scores"]]
    layout = claim_layout(data[schema.TOKEN_CHUNKS], n_tokens, labels=data[schema.LABELS],
                          stopword_mask=data[schema.STOPWORD_MASK])
    direct = score(data["scores"], data[schema.TOKEN_CHUNKS], data[schema.LABELS],
                   stopword_mask=data[schema.STOPWORD_MASK])
    assert score(data["scores"], layout, None) == direct
    with pytest.raises(ValueError, match="token counts"):
        score(data["scores"][1:], layout, None)
    keep_eos = score(data["scores"], data[schema.TOKEN_CHUNKS], data[schema.LABELS],
                     aggregation=Aggregation(drop_last_chunk=False))
    assert keep_eos.n_claims == direct.n_claims + len(data["scores"])


def test_compare_is_consistent_with_score(data):
    noisy = data["scores"]
    # A clearly better method: raise some tokens of hallucinated claims (label leakage, fine for a test).
    rng = np.random.default_rng(0)
    good = []
    for scores, chunks, labels in zip(noisy, data[schema.TOKEN_CHUNKS], data[schema.LABELS], strict=True):
        scores = np.array(scores)
        for chunk, label in zip(chunks, labels, strict=True):
            if label == schema.HALLUCINATED and rng.random() < 0.5:
                scores[chunk] = np.maximum(scores[chunk], 0.99)
        good.append(scores)
    result = compare(good, noisy, data[schema.TOKEN_CHUNKS], data[schema.LABELS], bootstrap=Bootstrap(n_resamples=200))
    a = score(good, data[schema.TOKEN_CHUNKS], data[schema.LABELS])
    b = score(noisy, data[schema.TOKEN_CHUNKS], data[schema.LABELS])
    for key in METRICS:
        assert result[key]["a"] == pytest.approx(a.metrics[key])
        assert result[key]["b"] == pytest.approx(b.metrics[key])
    assert result["roc_auc"]["interval"][0] > 0 and result["roc_auc"]["p_value"] < 0.05
    # a frozen, typed result: attributes and keys agree, nothing can be reassigned
    assert list(result) == list(METRICS) and result.roc_auc is result["roc_auc"]
    assert result.roc_auc.to_dict()["difference"] == result.roc_auc.a - result.roc_auc.b
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.roc_auc.a = 0.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        result["roc_auc"] = None  # type: ignore[index]


def test_aggregate_and_score_agree(data):
    claims = aggregate_claims(data["scores"], data[schema.TOKEN_CHUNKS], stopword_mask=data[schema.STOPWORD_MASK],
                              aggregation="max")
    y = np.concatenate([np.asarray(labels[:-1]) == -1 for labels in data[schema.LABELS]])
    result = score(data["scores"], data[schema.TOKEN_CHUNKS], data[schema.LABELS],
                   stopword_mask=data[schema.STOPWORD_MASK], aggregation="max")
    assert result.roc_auc == pytest.approx(roc_auc_score(y, np.concatenate(claims)))


def _rows():
    none = list(schema.NO_HUMAN_LABEL)
    return [
        {"id": "agree", schema.HUMAN_LABELS_0: [1, -1, 1], schema.HUMAN_LABELS_1: [1, -1, 1]},
        {"id": "disagree", schema.HUMAN_LABELS_0: [1, 1, 1], schema.HUMAN_LABELS_1: [1, -1, 1]},
        {"id": "one", schema.HUMAN_LABELS_0: [1, 1], schema.HUMAN_LABELS_1: none},
        {"id": "auto", schema.HUMAN_LABELS_0: none, schema.HUMAN_LABELS_1: none},
    ]


def test_select_samples_lists_and_datasets():
    import datasets

    rows = _rows()
    assert [r["id"] for r in select_samples(rows, manual=True)] == ["agree"]
    assert [r["id"] for r in select_samples(rows, manual=False)] == ["auto"]
    assert select_samples(rows) is rows
    ds = datasets.Dataset.from_list(rows)
    assert select_samples(ds, manual=True)["id"] == ["agree"]
    assert select_samples(ds, manual=False)["id"] == ["auto"]


def test_import_is_light():
    code = ("import sys, much_metric, much_metric.scoring._api; "
            "bad = [m for m in ('torch', 'transformers', 'datasets', 'evaluate', 'sklearn', 'matplotlib') "
            "if m in sys.modules]; print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from(["square", "sqrt", "logit"]))
def test_max_aggregator_metrics_invariant_under_increasing_token_transforms(seed, transform):
    # max commutes with an increasing transform, so every ranking metric must be unchanged end to end.
    rows = make_rows(30, seed=seed)
    scores = [np.round(1 - np.asarray(r[schema.LOGITS_VALUES])[:, 0], 3) for r in rows]  # a grid: no merged ties
    f = {"square": np.square, "sqrt": np.sqrt, "logit": lambda p: np.log((p + 0.01) / (1.01 - p))}[transform]
    chunks, labels = [r[schema.TOKEN_CHUNKS] for r in rows], [r[schema.LABELS] for r in rows]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MuchMetricWarning)
        a = score(scores, chunks, labels, aggregation="max")
        b = score([f(s) for s in scores], chunks, labels, aggregation="max")
    for key in METRICS:
        assert b.metrics[key] == pytest.approx(a.metrics[key], abs=1e-12, nan_ok=True), key
