"""Features of the learned detectors against the registry's baselines and an independent entropy."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import entr

import much_dataset
from much_metric.baselines import TokenArrays, resolve, token_arrays
from much_metric.learned import FEATURES, SEQUENCE_INPUTS, sequence_inputs, token_features


@pytest.fixture(scope="module")
def sample_arrays():
    return token_arrays(much_dataset.load("sample", split="test").select(range(40)))


def test_baseline_columns_are_the_registry_scores(sample_arrays):
    features = token_features(sample_arrays)
    assert features.shape == (sample_arrays.n_tokens, len(FEATURES))
    for name in ("max_likelihood", "token_likelihood", "token_entropy_24"):
        expected = resolve(name).compute(sample_arrays, {}, {})
        np.testing.assert_allclose(features[:, FEATURES.index(name)], expected, rtol=0, atol=1e-12)


def test_wepr_columns_are_rank_wise_entropy_terms(sample_arrays):
    features = token_features(sample_arrays)
    wepr = features[:, [FEATURES.index(f"wepr_{r}") for r in range(1, 25)]]
    np.testing.assert_allclose(wepr, entr(sample_arrays.probabilities), atol=1e-12)
    tail = features[:, FEATURES.index("tail_mass")]
    np.testing.assert_allclose(tail, 1 - sample_arrays.probabilities.sum(axis=1), atol=1e-9)


def test_position_restarts_in_every_answer(sample_arrays):
    position = np.expm1(token_features(sample_arrays)[:, FEATURES.index("log_position")])
    starts = sample_arrays.offsets[:-1]
    np.testing.assert_allclose(position[starts], 0.0, atol=1e-9)
    np.testing.assert_allclose(position[starts[1] - 1], starts[1] - 1, rtol=1e-9)


def test_sequence_inputs_are_log_probabilities(sample_arrays):
    inputs = sequence_inputs(sample_arrays)
    assert inputs.shape == (sample_arrays.n_tokens, len(SEQUENCE_INPUTS)) and inputs.dtype == np.float32
    p = sample_arrays.probabilities
    np.testing.assert_allclose(inputs[:, :24], np.log(np.maximum(p, 1e-12)), rtol=1e-5)
    sampled = p[np.arange(len(p)), (sample_arrays.candidate_ids == sample_arrays.output_tokens[:, None]).argmax(1)]
    np.testing.assert_allclose(inputs[:, 24], np.log(sampled), rtol=1e-5)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(1, 6), min_size=1, max_size=5), st.integers(0, 2**31 - 1))
def test_features_are_finite_on_any_probabilities(lengths, seed):
    rng = np.random.default_rng(seed)
    n = sum(lengths)
    p = rng.dirichlet(np.full(25, 0.1), size=n)[:, :24]
    p[rng.random(p.shape) < 0.2] = 0.0  # underflowed candidates
    p = -np.sort(-p, axis=1)
    ids = np.tile(np.arange(24), (n, 1))
    arrays = TokenArrays([f"g{i}" for i in range(len(lengths))], np.concatenate([[0], np.cumsum(lengths)]),
                         rng.integers(0, 30, n), ids, p)  # sampled ids 24..29 are absent from the candidates
    assert np.isfinite(token_features(arrays)).all() and np.isfinite(sequence_inputs(arrays)).all()


def test_other_widths_are_refused():
    arrays = TokenArrays(["g"], np.array([0, 1]), np.array([0]), np.arange(20)[None, :], np.full((1, 20), 0.01))
    with pytest.raises(ValueError, match="24 candidates"):
        token_features(arrays)
