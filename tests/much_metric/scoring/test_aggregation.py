import warnings

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from much_dataset import schema
from much_dataset.synthetic import make_rows
from much_metric.scoring._aggregation import AGGREGATORS, MuchMetricWarning, claim_layout
from much_metric.scoring._api import Aggregation, aggregate_claims
from tests.much_metric._metric_helpers import columns, loop_aggregate, mushroom_rows


def _uncertainty(rows):
    return [(1.0 - np.asarray(r[schema.LOGITS_VALUES])[:, 0]).tolist() for r in rows]


@pytest.fixture(scope="module")
def synthetic():
    rows = make_rows(120, seed=7)
    return _uncertainty(rows), [r[schema.TOKEN_CHUNKS] for r in rows], [r[schema.STOPWORD_MASK] for r in rows]


@pytest.fixture(scope="module")
def mushroom():
    return columns(mushroom_rows())


@pytest.mark.parametrize("aggregator", AGGREGATORS)
@pytest.mark.parametrize("stopwords", ["null", "exclude"])
def test_matches_per_claim_loop_on_real_mushroom_text(mushroom, aggregator, stopwords):
    got = aggregate_claims(mushroom["scores"], mushroom[schema.TOKEN_CHUNKS],
                           stopword_mask=mushroom[schema.STOPWORD_MASK],
                           aggregation=Aggregation(aggregator=aggregator, stopword_handling=stopwords))
    assert len(got) == len(mushroom["scores"]) > 500
    for scores, chunks, mask, claims in zip(mushroom["scores"], mushroom[schema.TOKEN_CHUNKS],
                                            mushroom[schema.STOPWORD_MASK], got, strict=True):
        expected = loop_aggregate(scores, chunks, mask, aggregator=aggregator, stopword_handling=stopwords)
        np.testing.assert_allclose(claims, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("aggregator", AGGREGATORS)
def test_matches_loop_on_synthetic_without_mask_and_with_eos(synthetic, aggregator):
    scores, chunks, _ = synthetic
    got = aggregate_claims(scores, chunks, aggregation=Aggregation(aggregator=aggregator, drop_last_chunk=False))
    for s, c, claims in zip(scores, chunks, got, strict=True):
        assert len(claims) == len(c)  # the EOS claim is kept
        np.testing.assert_allclose(claims, loop_aggregate(s, c, aggregator=aggregator, drop_last_chunk=False),
                                   rtol=1e-12, atol=1e-12)


def test_null_stopwords_score_all_stopword_claim_zero():
    scores = [[0.9, 0.8, 0.7, 0.0]]
    chunks = [[[0, 1], [2], [3]]]
    mask = [[True, True, False, False]]
    product = aggregate_claims(scores, chunks, stopword_mask=mask)[0]
    np.testing.assert_allclose(product, [0.0, 0.7])
    geometric = aggregate_claims(scores, chunks, stopword_mask=mask, aggregation="geometric")[0]
    np.testing.assert_allclose(geometric[0], 1 - (1 + 1e-5) ** 0.5)  # ~ -1e-5 / n, as the reference
    mean_null = aggregate_claims([[0.9, 0.5, 0.0]], [[[0, 1], [2]]], stopword_mask=[[True, False, False]],
                                 aggregation="mean")[0]
    mean_excl = aggregate_claims([[0.9, 0.5, 0.0]], [[[0, 1], [2]]], stopword_mask=[[True, False, False]],
                                 aggregation=Aggregation(aggregator="mean", stopword_handling="exclude"))[0]
    np.testing.assert_allclose(mean_null, [0.25])  # nulled token still counts in n
    np.testing.assert_allclose(mean_excl, [0.5])  # excluded token does not


def test_exclude_falls_back_to_all_tokens_of_an_all_stopword_claim():
    got = aggregate_claims([[0.2, 0.4, 0.1]], [[[0, 1], [2]]], stopword_mask=[[True, True, False]],
                           aggregation=Aggregation(aggregator="max", stopword_handling="exclude"))[0]
    np.testing.assert_allclose(got, [0.4])


def test_confidence_converts_probabilities(synthetic):
    scores, chunks, mask = synthetic
    probabilities = [[1.0 - s for s in row] for row in scores]
    direct = aggregate_claims(scores, chunks, stopword_mask=mask)
    converted = aggregate_claims(probabilities, chunks, stopword_mask=mask,
                                 aggregation=Aggregation(score_type="confidence"))
    for a, b in zip(direct, converted, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-12)
    with pytest.raises(ValueError, match=r"generation_id='g1'.*\[0, 1\]"):
        aggregate_claims([[0.5, 0.5], [1.5, 0.2]], [[[0], [1]], [[0], [1]]],
                         aggregation=Aggregation(score_type="confidence"),
                         generation_ids=["g0", "g1"])


def test_accepts_numpy_arrow_and_datasets_columns(synthetic):
    import datasets

    scores, chunks, mask = synthetic
    expected = aggregate_claims(scores, chunks, stopword_mask=mask)
    as_numpy = aggregate_claims([np.asarray(s) for s in scores], [[np.asarray(c) for c in cs] for cs in chunks],
                                stopword_mask=[np.asarray(m) for m in mask])
    as_arrow = aggregate_claims(pa.chunked_array([pa.array(scores[:50]), pa.array(scores[50:])]), pa.array(chunks),
                                stopword_mask=pa.array(mask))
    ds = datasets.Dataset.from_dict({"s": scores, "c": chunks, "m": mask})
    as_column = aggregate_claims(ds["s"], ds["c"], stopword_mask=ds["m"])
    for got in (as_numpy, as_arrow, as_column):
        for a, b in zip(expected, got, strict=True):
            np.testing.assert_array_equal(a, b)
    # A selected (index-mapped) dataset cannot be read from its raw arrow table: rows must come out in order.
    order = [5, 0, 3]
    picked = ds.select(order)
    as_selected = aggregate_claims(picked["s"], picked["c"], stopword_mask=picked["m"])
    for index, got in zip(order, as_selected, strict=True):
        np.testing.assert_array_equal(expected[index], got)


def test_product_and_geometric_warn_outside_unit_interval():
    with pytest.warns(MuchMetricWarning, match="assumes token uncertainties in"):
        aggregate_claims([[2.0, 0.5, 0.0]], [[[0, 1], [2]]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        aggregate_claims([[2.0, 0.5, 0.0]], [[[0, 1], [2]]], aggregation="max")


@pytest.mark.parametrize(
    ("scores", "chunks", "mask", "pattern"),
    [
        ([[0.1, 0.2]], [[[0], [1], [2]]], None, r"generation_id='s0'.*refers to token 2, out of range"),
        ([[0.1, 0.2]], [[[0], [-1]]], None, r"generation_id='s0'.*out of range"),
        ([[0.1, 0.2, 0.3]], [[[0, 2], [1]]], None, r"generation_id='s0'.*consecutive"),
        ([[0.1, 0.2]], [[[0], []]], None, r"generation_id='s0'.*empty chunk"),
        ([[0.1, 0.2]], [[]], None, r"generation_id='s0'.*token_chunks' is empty"),
        ([[0.1, float("nan")]], [[[0], [1]]], None, r"generation_id='s0'.*non-finite value \(nan\) at token 1"),
        ([[0.1, float("inf")]], [[[0], [1]]], None, r"generation_id='s0'.*non-finite"),
        ([[0.1, 0.2]], [[[0], [1]]], [[True]], r"generation_id='s0'.*stopword_mask' has 1 entries"),
        ([[[0.1], [0.2]]], [[[0], [1]]], None, r"generation_id='s0'.*1-D"),
    ],
)
def test_invalid_inputs_name_the_sample(scores, chunks, mask, pattern):
    with pytest.raises(ValueError, match=pattern):
        aggregate_claims(scores, chunks, stopword_mask=mask, generation_ids=["s0"])


def test_length_disagreement_between_fields():
    with pytest.raises(ValueError, match="token_chunks' has 1 samples but the token scores have 2"):
        aggregate_claims([[0.1], [0.2]], [[[0]]])
    with pytest.raises(ValueError, match="stopword_mask' has 1 samples"):
        aggregate_claims([[0.1], [0.2]], [[[0]], [[0]]], stopword_mask=[[True]])
    with pytest.raises(ValueError, match="aggregator must be one of"):
        aggregate_claims([[0.1]], [[[0]]], aggregation="median")
    with pytest.raises(ValueError, match="stopword_handling must be one of"):
        aggregate_claims([[0.1]], [[[0]]], aggregation=Aggregation(stopword_handling="drop"))


def test_layout_reuse_and_eos_only_samples(synthetic):
    scores, chunks, mask = synthetic
    layout = claim_layout(chunks, [len(s) for s in scores], stopword_mask=mask)
    for aggregator in AGGREGATORS:
        direct = aggregate_claims(scores, chunks, stopword_mask=mask, aggregation=aggregator)
        reused = aggregate_claims(scores, layout, aggregation=aggregator)
        for a, b in zip(direct, reused, strict=True):
            np.testing.assert_array_equal(a, b)
    # A sample made of the EOS claim alone contributes no claim.
    assert [len(c) for c in aggregate_claims([[0.3], [0.1, 0.2]], [[[0]], [[0], [1]]])] == [0, 1]


@st.composite
def _samples(draw):
    n_samples = draw(st.integers(1, 6))
    scores, chunks, masks = [], [], []
    for _ in range(n_samples):
        sizes = draw(st.lists(st.integers(1, 5), min_size=1, max_size=5))
        n = sum(sizes) + 1
        scores.append(draw(st.lists(st.floats(0, 1), min_size=n, max_size=n)))
        masks.append(draw(st.lists(st.booleans(), min_size=n, max_size=n)))
        starts = np.cumsum([0, *sizes])
        chunks.append([list(range(a, b)) for a, b in zip(starts[:-1], starts[1:], strict=True)] + [[n - 1]])
    return scores, chunks, masks


@settings(max_examples=60, deadline=None)
@given(_samples(), st.sampled_from(["null", "exclude"]))
def test_aggregator_order_and_range(samples, stopwords):
    scores, chunks, masks = samples
    got = {a: np.concatenate(aggregate_claims(scores, chunks, stopword_mask=masks,
                                              aggregation=Aggregation(aggregator=a, stopword_handling=stopwords)))
           for a in AGGREGATORS}
    tol = 1e-12
    assert (got["product"] >= got["max"] - tol).all()  # noisy-OR dominates every single token
    assert (got["max"] >= got["mean"] - tol).all()
    assert (got["mean"] >= -tol).all() and (got["product"] <= 1 + tol).all()
    assert (got["geometric"] <= got["product"] + tol).all()
    for a in AGGREGATORS:
        expected = [v for s, c, m in zip(scores, chunks, masks, strict=True)
                    for v in loop_aggregate(s, c, m, aggregator=a, stopword_handling=stopwords)]
        np.testing.assert_allclose(got[a], expected, rtol=1e-9, atol=1e-12)
