"""Claims handed to the peers (the toolkit's public claim helpers under a token convention) and their scores mapped
into [0, 1] (numpy only: runs everywhere)."""

from __future__ import annotations

import numpy as np
import pytest
from much_peers import LMPOLYGRAPH, LMPOLYGRAPH_REFUSED, UQLM, UQLM_REFUSED, claim_tokens, to_unit
from much_peers._inputs import check_sampled_stored
from much_peers.lmpolygraph import check_estimator
from much_peers.uqlm import check_scorer

from much_metric.baselines import TokenArrays
from much_metric.baselines import claim_tokens as much_claim_tokens


def _arrays(chunks, mask, sampled_missing=False):
    lengths = [len(m) for m in mask]
    n = sum(lengths)
    ids = np.tile(np.arange(4), (n, 1))
    tokens = np.zeros(n, dtype=np.int64) + (9 if sampled_missing else 0)
    probabilities = np.tile([0.7, 0.2, 0.05, 0.05], (n, 1))
    return TokenArrays([f"g{i}" for i in range(len(lengths))], np.concatenate([[0], np.cumsum(lengths)]), tokens,
                       ids, probabilities, chunks, np.concatenate([np.asarray(m, dtype=bool) for m in mask]))


CHUNKS = [[[0, 1, 2], [3, 4], [5]], [[0, 1], [2]]]
MASK = [[True, False, False, True, True, False], [False, True, True]]


def test_much_convention_hands_non_stopword_tokens_or_all_of_a_stopword_claim():
    arrays = _arrays(CHUNKS, MASK)
    much = claim_tokens(arrays)
    assert [t.tolist() for t in much[0]] == [[1, 2], [3, 4], [5]]  # claim 1 is all stopwords: all its tokens
    assert [t.tolist() for t in much[1]] == [[0], [2]]
    every = claim_tokens(arrays, convention="all")
    assert [t.tolist() for t in every[0]] == [[0, 1, 2], [3, 4], [5]]


def test_the_conventions_are_the_toolkits_claim_tokens_and_the_plugin_keeps_no_copy_of_them():
    from pathlib import Path

    import much_peers

    arrays = _arrays(CHUNKS, MASK)
    for convention, content_only in (("much", True), ("all", False)):
        ours = much_claim_tokens(arrays, "test", content_only=content_only)
        assert [[t.tolist() for t in s] for s in claim_tokens(arrays, convention=convention)] == \
            [[t.tolist() for t in s] for s in ours]
    plugin = Path(much_peers.__file__).parent
    assert not (plugin / "_claims.py").exists()
    assert not any("carrier" in path.read_text(encoding="utf-8") for path in plugin.glob("*.py"))


def test_to_unit_is_increasing_and_maps_nll_to_one_minus_probability():
    x = np.array([0.0, 0.1, 1.0, 30.0])
    np.testing.assert_allclose(to_unit(x, "nll"), 1 - np.exp(-x))
    real = to_unit(np.array([-800.0, -3.0, 0.0, 2.0, 800.0]), "real")
    assert np.all(np.diff(real) >= 0) and real[2] == 0.5 and 0 <= real.min() and real.max() <= 1
    np.testing.assert_allclose(to_unit(np.array([-1.0, -0.25, 0.0]), "negprob"), [0.0, 0.75, 1.0])
    with pytest.raises(ValueError, match="outside"):
        to_unit(np.array([1.5]), "unit")
    with pytest.raises(ValueError, match="non-finite"):
        to_unit(np.array([np.nan]), "nll")


def test_bad_claims_are_named():
    with pytest.raises(ValueError, match="g1.*not indices"):
        claim_tokens(_arrays([[[0, 1, 2, 3, 4, 5]], [[0, 7]]], MASK))
    no_chunks = TokenArrays(["g"], np.array([0, 1]), np.array([0]), np.arange(4)[None, :], np.full((1, 4), 0.25))
    with pytest.raises(ValueError, match="token_chunks"):
        claim_tokens(no_chunks)
    with pytest.raises(ValueError, match="'g0', token 0: the sampled token id 9 .* -100"):
        check_sampled_stored(_arrays(CHUNKS, MASK, sampled_missing=True))


def test_refused_estimators_are_named_with_what_they_need():
    with pytest.raises(ValueError, match="ClaimConditionedProbabilityClaim needs an NLI model"):
        check_estimator("ClaimConditionedProbabilityClaim")
    with pytest.raises(ValueError, match="semantic_negentropy scorer needs sampled responses"):
        check_scorer("semantic_negentropy")
    with pytest.raises(ValueError, match="not an LM-Polygraph estimator.*MaximumClaimProbability"):
        check_estimator("NoSuchEstimator")
    assert not set(LMPOLYGRAPH) & set(LMPOLYGRAPH_REFUSED) and not set(UQLM) & set(UQLM_REFUSED)
    for name in LMPOLYGRAPH:
        check_estimator(name)
    for name in UQLM:
        check_scorer(name)
