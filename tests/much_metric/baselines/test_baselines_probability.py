"""Token Likelihood, Max Likelihood, Token Entropy: hand-computed values, an independent per-token implementation
(scipy), input types, properties (hypothesis) and error messages."""

from __future__ import annotations

import math

import datasets
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import entropy

from much_dataset import schema, synthetic
from much_metric.baselines import (
    max_likelihood,
    token_arrays,
    token_entropy,
    token_likelihood,
)
from much_metric.baselines.methods.probability import sampled_token_probability


def _row(gid, tokens, ids, probs):
    return {
        schema.GENERATION_ID: gid,
        schema.OUTPUT_TOKENS: tokens,
        schema.LOGITS_TOKEN_IDS: ids,
        schema.LOGITS_VALUES: probs,
    }


# Two samples, K = 4 candidates. Sample a: the first token was sampled at rank 1, the second (EOS) at rank 0.
TINY = [
    _row("a", [7, 2], [[5, 7, 9, 11], [2, 3, 4, 6]], [[0.5, 0.3, 0.1, 0.05], [0.9, 0.04, 0.03, 0.02]]),
    _row("b", [4], [[4, 1, 8, 3]], [[0.25, 0.25, 0.25, 0.25]]),
]


def test_hand_computed_values():
    tl = token_likelihood(TINY)
    np.testing.assert_allclose(tl[0], [1 - 0.3, 1 - 0.9])
    np.testing.assert_allclose(tl[1], [0.75])
    ml = max_likelihood(TINY)
    np.testing.assert_allclose(ml[0], [0.5, 0.1])
    np.testing.assert_allclose(ml[1], [0.75])
    # delta = 2: renormalise the top two.
    q = np.array([0.5, 0.3]) / 0.8
    expected = -(q * np.log(q)).sum() / math.log(2)
    te = token_entropy(TINY, delta=2)
    assert te[0][0] == pytest.approx(expected)
    assert te[1][0] == pytest.approx(1.0)  # uniform over the top two
    te4 = token_entropy(TINY, delta=4)
    assert te4[1][0] == pytest.approx(1.0)  # uniform over all four
    q = np.array([0.9, 0.04, 0.03, 0.02]) / 0.99
    assert te4[0][1] == pytest.approx(-(q * np.log(q)).sum() / math.log(4))


def _reference_loop(rows, delta):
    """Straightforward per-token implementation, as the reference computes the signals."""
    tl, ml, te = [], [], []
    for row in rows:
        tokens, ids, probs = row[schema.OUTPUT_TOKENS], row[schema.LOGITS_TOKEN_IDS], row[schema.LOGITS_VALUES]
        a, b, c = [], [], []
        for token, cand, p in zip(tokens, ids, probs, strict=True):
            a.append(1 - p[list(cand).index(token)])
            b.append(1 - max(p))
            top = sorted(p, reverse=True)[:delta]
            c.append(entropy(top) / math.log(delta))  # scipy renormalises
        tl.append(a)
        ml.append(b)
        te.append(c)
    return tl, ml, te


@pytest.mark.parametrize("delta", [5, 10, 24])
def test_matches_independent_loop_on_random_arrays(delta):
    rows = synthetic.make_rows(60, seed=delta)
    tl, ml, te = _reference_loop(rows, delta)
    pairs = ((token_likelihood(rows), tl), (max_likelihood(rows), ml), (token_entropy(rows, delta=delta), te))
    for ours, theirs in pairs:
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_dataset_table_rows_and_selection_agree():
    rows = synthetic.make_rows(30, seed=4)
    ds = datasets.Dataset.from_list(rows, features=schema.features())
    from_rows = token_entropy(rows, delta=10)
    from_ds = token_entropy(ds, delta=10)
    from_table = token_entropy(ds.data.table, delta=10)
    for a, b, c in zip(from_rows, from_ds, from_table, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6)  # the dataset stores float32, rows are float64
        np.testing.assert_array_equal(b, c)
    # .select() keeps an indices mapping: the arrow buffers are not in the selected order.
    picked = [7, 2, 19]
    selected = token_likelihood(ds.select(picked))
    full = token_likelihood(ds)
    for position, index in enumerate(picked):
        np.testing.assert_array_equal(selected[position], full[index])
    assert token_arrays(ds.select(picked)).generation_ids == [rows[i][schema.GENERATION_ID] for i in picked]


def test_unsorted_candidates_are_handled():
    rows = synthetic.make_rows(10, seed=5)
    rng = np.random.default_rng(0)
    shuffled = []
    for row in rows:
        ids, probs = np.asarray(row[schema.LOGITS_TOKEN_IDS]), np.asarray(row[schema.LOGITS_VALUES])
        order = np.stack([rng.permutation(schema.TOP_K) for _ in range(len(ids))])
        shuffled.append({**row, schema.LOGITS_TOKEN_IDS: np.take_along_axis(ids, order, 1).tolist(),
                         schema.LOGITS_VALUES: np.take_along_axis(probs, order, 1).tolist()})
    for fn in (token_likelihood, max_likelihood, lambda d: token_entropy(d, delta=5)):
        for a, b in zip(fn(rows), fn(shuffled), strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-12)


def test_missing_sampled_token_raises_with_generation_id_or_gives_nan():
    rows = [_row("gen-x", [7, 99], [[5, 7, 9, 11], [2, 3, 4, 6]], [[0.5, 0.3, 0.1, 0.05], [0.9, 0.04, 0.03, 0.02]])]
    with pytest.raises(ValueError, match=r"generation_id='gen-x', token 1.*sampled token id 99.*missing='nan'"):
        token_likelihood(rows)
    values = token_likelihood(rows, missing="nan")[0]
    assert values[0] == pytest.approx(0.7) and math.isnan(values[1])
    assert math.isnan(sampled_token_probability(rows, missing="nan")[0][1])
    # Max Likelihood and Token Entropy do not need the sampled token.
    assert max_likelihood(rows)[0][1] == pytest.approx(0.1)
    with pytest.raises(ValueError, match="missing must be one of"):
        token_likelihood(rows, missing="zero")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({schema.LOGITS_VALUES: [[0.5, 0.3, 0.1, 0.05]]}, r"gen-y.*'logits_values' has 1 rows but 'output_tokens'"),
        ({schema.LOGITS_VALUES: [[0.5, 0.3, 0.1, 1.5], [0.9, 0.04, 0.03, 0.02]]}, r"gen-y', token 0.*not a prob"),
        ({schema.LOGITS_VALUES: [[0.5, 0.3, 0.1, math.nan], [0.9, 0.04, 0.03, 0.02]]}, r"gen-y', token 0"),
        ({schema.LOGITS_TOKEN_IDS: [[5, 7, 9, 11], [2, 3, 4]]}, r"gen-y.*'logits_token_ids' row 1 has 3 candidates"),
        ({schema.OUTPUT_TOKENS: [], schema.LOGITS_TOKEN_IDS: [], schema.LOGITS_VALUES: []}, r"gen-y.*is empty"),
    ],
)
def test_bad_input_names_sample_and_field(change, message):
    row = _row("gen-y", [7, 2], [[5, 7, 9, 11], [2, 3, 4, 6]], [[0.5, 0.3, 0.1, 0.05], [0.9, 0.04, 0.03, 0.02]])
    row.update(change)
    with pytest.raises(ValueError, match=message):
        token_likelihood([TINY[1], row])


def test_bad_parameters():
    with pytest.raises(ValueError, match=r"delta must be an integer in \[2, 4\]"):
        token_entropy(TINY, delta=5)
    with pytest.raises(ValueError, match="delta"):
        token_entropy(TINY, delta=1)
    with pytest.raises(ValueError, match="lacks field"):
        token_likelihood([{schema.GENERATION_ID: "z"}])
    with pytest.raises(TypeError):
        token_likelihood(42)


@st.composite
def _random_rows(draw):
    n_samples = draw(st.integers(1, 4))
    width = draw(st.integers(2, 8))
    seed = draw(st.integers(0, 2**31))
    rng = np.random.default_rng(seed)
    rows = []
    for index in range(n_samples):
        n = int(rng.integers(1, 6))
        probs = rng.dirichlet(np.full(width + 1, draw(st.sampled_from([0.05, 1.0, 20.0]))), size=n)[:, :width]
        probs = -np.sort(-probs, axis=1)
        ids = np.stack([rng.permutation(1000)[:width] for _ in range(n)])
        tokens = ids[np.arange(n), rng.integers(0, width, n)]
        rows.append(_row(f"h{index}", tokens.tolist(), ids.tolist(), probs.tolist()))
    return rows, width


@settings(max_examples=60, deadline=None)
@given(_random_rows())
def test_properties(case):
    rows, width = case
    tl, ml = token_likelihood(rows), max_likelihood(rows)
    te = token_entropy(rows, delta=width)
    for row, a, b, c in zip(rows, tl, ml, te, strict=True):
        n = len(row[schema.OUTPUT_TOKENS])
        assert a.shape == b.shape == c.shape == (n,)
        for values in (a, b, c):
            assert np.all((values >= -1e-12) & (values <= 1 + 1e-12))
        assert np.all(a >= b - 1e-12)  # the sampled token is at most as likely as the top one
    # Entropy is maximal (1) for uniform candidates.
    uniform = [{**r, schema.LOGITS_VALUES: np.full((len(r[schema.OUTPUT_TOKENS]), width), 0.9 / width).tolist()}
               for r in rows]
    for values in token_entropy(uniform, delta=width):
        np.testing.assert_allclose(values, 1.0)
