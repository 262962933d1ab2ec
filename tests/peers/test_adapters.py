"""The peers' own classes on MUCH's sample, checked against the toolkit's methods where the definitions agree.

Needs LM-Polygraph 0.7.0 and UQLM 0.6.7 (scripts/run_peer_tests.sh); skipped elsewhere.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.peers.conftest import require

require("lm_polygraph")
require("uqlm")

from much_peers import LMPOLYGRAPH, UQLM, lmpolygraph, to_unit, uqlm  # noqa: E402
from much_peers.baselines import peer_claim_signal  # noqa: E402

import much_dataset  # noqa: E402
from much_metric.baselines import resolve, token_arrays  # noqa: E402
from much_metric.baselines.methods.probability import token_entropy, token_likelihood  # noqa: E402
from much_metric.scoring import claim_layout, score_claims  # noqa: E402
from much_metric.scoring.engine import aggregate_flat  # noqa: E402


@pytest.fixture(scope="module")
def sample():
    return much_dataset.load("sample", split="test")


@pytest.fixture(scope="module")
def arrays(sample):
    return token_arrays(sample)


def _layout(data, *, stopwords=True):
    return claim_layout(data["token_chunks"], [len(t) for t in data["output_tokens"]], labels=data["labels"],
                        stopword_mask=data["stopword_mask"] if stopwords else None)


def _evaluated(per_sample, layout):
    """Claim values (token_chunks order) of the evaluated claims (the EOS claim left out), as the table has them."""
    return np.concatenate(per_sample)[layout.kept_chunks]


def test_maximum_claim_probability_ranks_claims_as_token_likelihood_product(sample, arrays):
    layout = _layout(sample)
    ours = aggregate_flat(np.concatenate(token_likelihood(sample)), layout, aggregator="product",
                          stopword_handling="exclude")  # the tokens of the peers' "much" convention
    peer = _evaluated(peer_claim_signal(arrays, "lmpolygraph", "MaximumClaimProbability"), layout)  # claim-level
    # -sum log p (LM-Polygraph) -> 1 - exp(-x) is 1 - prod p: the same claim scores up to float rounding ...
    np.testing.assert_allclose(peer, ours, rtol=0, atol=1e-15)
    assert layout.n_claims == 10320
    # ... so the same ROC-AUC up to near-ties that round to different sides (1 - prod p saturates at 1.0).
    ours_auc = score_claims(ours, layout, bootstrap=None).roc_auc
    peer_auc = score_claims(peer, layout, bootstrap=None).roc_auc
    assert abs(ours_auc - peer_auc) < 1e-5 and round(ours_auc, 3) == round(peer_auc, 3)


def test_the_peers_own_convention_scores_every_claim_token(sample, arrays):
    part = sample.select(range(120))
    layout = _layout(part, stopwords=False)
    ours = aggregate_flat(np.concatenate(token_likelihood(part)), layout, aggregator="product")
    raw = lmpolygraph.claim_scores(arrays.select(range(120)), "MaximumClaimProbability", convention="all")
    np.testing.assert_allclose(to_unit(_evaluated(raw, layout), "nll"), ours, rtol=0, atol=1e-12)
    much = lmpolygraph.claim_scores(arrays.select(range(120)), "MaximumClaimProbability")
    assert not np.allclose(np.concatenate(much), np.concatenate(raw))  # the stopword rule changes claims


def test_uqlm_sequence_probability_is_lm_polygraph_perplexity_claim(arrays):
    part = arrays.select(range(60))
    uq = np.concatenate(uqlm.claim_scores(part, "sequence_probability"))  # 1 - exp(mean log p)
    ppl = to_unit(np.concatenate(lmpolygraph.claim_scores(part, "PerplexityClaim")), "nll")  # 1 - exp(-(-mean))
    np.testing.assert_allclose(uq, ppl, rtol=0, atol=1e-12)


def test_uqlm_negentropy_and_min_probability_match_the_toolkit_with_stopwords_excluded(sample, arrays):
    part, layout = sample.select(range(60)), _layout(sample.select(range(60)))
    sub = arrays.select(range(60))
    entropy = aggregate_flat(np.concatenate(token_entropy(part, delta=24)), layout, aggregator="mean",
                             stopword_handling="exclude")
    negentropy = _evaluated(uqlm.claim_scores(sub, "mean_token_negentropy"), layout)
    np.testing.assert_allclose(negentropy, entropy, rtol=0, atol=1e-9)  # 1 - mean(1 - H/log 24)
    worst = aggregate_flat(np.concatenate(token_likelihood(part)), layout, aggregator="max",
                           stopword_handling="exclude")
    np.testing.assert_allclose(_evaluated(uqlm.claim_scores(sub, "min_probability"), layout), worst, rtol=0,
                               atol=1e-12)


def test_max_token_entropy_claim_against_an_independent_computation(arrays):
    part = arrays.select(range(30))
    peer = lmpolygraph.claim_scores(part, "MaxTokenEntropyClaim")
    p = part.probabilities
    with np.errstate(divide="ignore", invalid="ignore"):
        h = -np.where(p > 0, p * np.log(p), 0.0).sum(axis=1)  # over the stored candidates, not renormalised
    claims = __import__("much_peers").claim_tokens(part)
    expected = [np.array([h[part.offsets[s] + c].max() for c in sample_claims]) for s, sample_claims in
                enumerate(claims)]
    np.testing.assert_allclose(np.concatenate(peer), np.concatenate(expected), rtol=1e-12)


def test_boosted_prob_claim_per_sample_equals_the_sequence_estimator_on_each_claim(arrays):
    part = arrays.select(range(4))
    claim = np.concatenate(lmpolygraph.claim_scores(part, "BoostedProbClaim"))
    sequence = np.concatenate(lmpolygraph.claim_scores(part, "BoostedProbSequence"))
    np.testing.assert_array_equal(claim, sequence)
    assert np.all((claim >= -1) & (claim <= 0))


def test_peer_bug_boosted_prob_claim_fails_on_a_batch():
    """LM-Polygraph 0.7.0: BoostedProbClaim passes the whole batch's greedy_tokens as every sample's target (the
    minimal reproduction in docs/peers.md). If this starts passing, the bug is fixed upstream: update the docs."""
    from lm_polygraph.estimators import BoostedProbClaim
    from lm_polygraph.stat_calculators.extract_claims import Claim

    log_probs = [np.log(np.array([[0.7, 0.2, 0.1], [0.5, 0.3, 0.2]])), np.log(np.array([[0.6, 0.3, 0.1]]))]
    claims = [[Claim("a", "a", [0, 1])], [Claim("b", "b", [0])]]
    with pytest.raises((ValueError, RuntimeError, IndexError)):
        BoostedProbClaim()({"greedy_log_probs": log_probs, "greedy_tokens": [[0, 1], [0]], "claims": claims})


def test_peer_finding_renyi_and_fisher_rao_score_a_peaked_row_higher():
    """LM-Polygraph 0.7.0 documents both as "higher = more uncertain", yet a confident row scores above a uniform one
    (docs/peers.md); on the sample they rank claims below chance. If this fails, update the docs."""
    from lm_polygraph.estimators import FisherRao, RenyiNeg

    peaked, flat = np.log([[0.97] + [0.03 / 23] * 23]), np.log(np.full((1, 24), 1 / 24))
    for estimator in (RenyiNeg(), FisherRao()):
        scores = estimator({"greedy_log_probs": [peaked, flat]})
        assert scores[0] > scores[1]


def test_peer_pitfall_a_missing_token_gets_minus_100_and_the_adapters_refuse_it(arrays):
    from lm_polygraph.stat_calculators.vllm_logprobs_extraction import VLLMLogprobsExtractionCalculator

    class Entry:
        def __init__(self, logprob):
            self.logprob = logprob

    out = VLLMLogprobsExtractionCalculator()({"token_ids": [5, 7], "logprobs": [{5: Entry(-0.1)}, {8: Entry(-0.2)}]})
    assert out["greedy_log_likelihoods"] == [[-0.1, -100.0]]  # token 7 is not stored: -100, silently

    part = arrays.select([0])
    broken = type(part)(part.generation_ids, part.offsets, part.output_tokens.copy(), part.candidate_ids,
                        part.probabilities, part.token_chunks, part.stopword_mask)
    broken.output_tokens[3] = -1
    for scores in (lambda: lmpolygraph.claim_scores(broken, "MaximumClaimProbability"),
                   lambda: uqlm.claim_scores(broken, "sequence_probability")):
        with pytest.raises(ValueError, match=f"{part.generation_ids[0]}.*token 3.*-100"):
            scores()


@pytest.mark.parametrize("signal", [f"lmpolygraph:{n}" for n in LMPOLYGRAPH] + [f"uqlm:{n}" for n in UQLM] +
                         ["lmpolygraph:PerplexityClaim:alltokens", "uqlm:probability_margin:alltokens"])
def test_every_runnable_estimator_runs_through_the_entry_point(arrays, signal):
    spec = resolve(signal)  # found through the installed much.baselines entry point
    part = arrays.select(range(5))
    assert spec.baseline.level == "claim" and spec.stored_name({}) == signal + "@claim"
    flat = spec.compute(part, {}, {})  # one value per claim, all samples' claims in order
    n_claims = sum(len(c) for c in part.token_chunks)
    assert flat.shape == (n_claims,) and np.isfinite(flat).all() and (flat >= 0).all() and (flat <= 1).all()


@pytest.mark.parametrize(("signal", "needs"), [("lmpolygraph:ClaimConditionedProbabilityClaim", "NLI model"),
                                               ("lmpolygraph:PTrueClaim", "generating model"),
                                               ("lmpolygraph:SemanticEntropy", "sampled outputs"),
                                               ("uqlm:p_true", "an LLM")])
def test_refused_by_name_when_resolved(signal, needs):
    with pytest.raises(ValueError, match=needs):
        resolve(signal)
