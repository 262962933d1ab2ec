"""The toolkit's claim-consistency scores against UQLM 0.6.7's long-form scorers on the same claims, the same samples
and the same entailment inputs (a deterministic stub NLI model, handed to both; the packaged all-MiniLM-L6-v2 for
the cosine): LUQ / unit response, matched unit (LUQ-Atomic) and the graph scorer's degree centrality. Real SmolLM2
samples of embedded-sample rows (tests/data/sample_samples.jsonl)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.peers.conftest import require

require("uqlm")

from much_peers import uqlm_longform  # noqa: E402

from much_metric.baselines import ResourceOptions, compute_signals, token_arrays  # noqa: E402
from much_metric.baselines._support import Evidence, nli_support  # noqa: E402
from much_metric.baselines.claims import answer_texts, claim_texts  # noqa: E402
from much_metric.baselines.samples import open_samples  # noqa: E402
from much_metric.models import load_tokenizer  # noqa: E402
from tests.much_metric._baselines_helpers import HashNli  # noqa: E402
from tests.much_metric.baselines._sampling import sample_split, samples_dataset  # noqa: E402


@pytest.fixture(scope="module")
def setup():
    split = sample_split()
    arrays = token_arrays(split)
    tokenizer = load_tokenizer("smollm2")
    samples = open_samples(samples_dataset())
    claims = claim_texts(arrays, tokenizer, "test")
    return split, arrays, tokenizer, samples, claims


def _claim_values(run, arrays):
    """Per sample, the claim-level signal's values (one per claim)."""
    return [np.asarray(run.values[gid]) for gid in arrays.generation_ids]


def test_luq_is_uqlm_unit_response(setup):
    split, arrays, tokenizer, samples, claims = setup
    nli = HashNli()
    ours = compute_signals(split, ["sample_luq"], progress=False, resources=ResourceOptions(
        tokenizer=tokenizer, nli=nli, samples=samples))["sample_luq@claim"]
    sampled = [list(samples.of(gid)) for gid in arrays.generation_ids]
    theirs = uqlm_longform.unit_response_scores(claims, sampled, nli)
    for mine, contrasted in zip(_claim_values(ours, arrays), theirs["contrasted_entailment"], strict=True):
        assert np.allclose(mine, 1.0 - np.asarray(contrasted), atol=1e-6, rtol=0)
    # the other two unit-response scores, from the same ENT / CON matrices
    matrices = nli_support(nli, [Evidence(gid, texts, [[s] for s in sampled[i]])
                                 for i, (gid, texts) in enumerate(zip(arrays.generation_ids, claims, strict=True))])
    for (ent, con), e, n in zip(matrices, theirs["entailment"], theirs["noncontradiction"], strict=True):
        assert np.allclose(ent.mean(axis=1), e, atol=1e-6, rtol=0)
        assert np.allclose((1 - con).mean(axis=1), n, atol=1e-6, rtol=0)


def test_sample_nli_ent_is_uqlm_matched_unit_entailment(setup):
    split, arrays, tokenizer, samples, claims = setup
    nli = HashNli()
    ours = compute_signals(split, ["sample_nli_ent"], progress=False, resources=ResourceOptions(
        tokenizer=tokenizer, nli=nli, samples=samples))["sample_nli_ent@claim"]
    sentences = [[list(group) for group in samples.sentences(gid)] for gid in arrays.generation_ids]
    theirs = uqlm_longform.matched_unit_scores(claims, sentences, nli=nli)
    for mine, entailment in zip(_claim_values(ours, arrays), theirs["entailment"], strict=True):
        assert np.allclose(mine, 1.0 - np.asarray(entailment), atol=1e-6, rtol=0)


def test_sample_cosine_is_uqlm_matched_unit_cosine(setup):
    """One row, two samples: UQLM's cosine scorer encodes every (claim, sample) pair in its own two calls (19 min for
    two rows of four samples on the loaded 2-core machine)."""
    split, arrays, tokenizer, samples, claims = setup
    from much_metric.baselines.encoders import load_encoder

    encoder, two = load_encoder("minilm"), samples.first(2)
    part = split.select([0])
    ours = compute_signals(part, ["sample_cosine"], progress=False, resources=ResourceOptions(
        tokenizer=tokenizer, samples=two, encoder=encoder))["sample_cosine@claim"]
    sentences = [[list(group) for group in two.sentences(arrays.generation_ids[0])]]
    theirs = uqlm_longform.matched_unit_scores(claims[:1], sentences, sentence_model=encoder.model)
    for mine, cosine in zip(_claim_values(ours, token_arrays(part)), theirs["cosine_sim"], strict=True):
        assert np.allclose(mine, 1.0 - np.asarray(cosine), atol=1e-6, rtol=0)


def test_graph_degree_is_uqlm_degree_centrality_up_to_its_rounding(setup):
    """UQLM rounds every graph score to 5 decimals (graph_scorer.py, ``round(..., 5)``): 1e-6 cannot be met, so the
    test checks that UQLM's number is exactly ours rounded to 5 decimals (a peer limitation, docs/peers.md)."""
    split, arrays, tokenizer, samples, claims = setup
    nli = HashNli()
    ours = compute_signals(split, ["sample_graph_degree"], progress=False, resources=ResourceOptions(
        tokenizer=tokenizer, nli=nli, samples=samples))["sample_graph_degree@claim"]
    answers = answer_texts(arrays, tokenizer, "test")
    responses = [[answer, *samples.of(gid)] for gid, answer in zip(arrays.generation_ids, answers, strict=True)]
    theirs = uqlm_longform.graph_scores(claims, responses, nli)
    compared = 0
    for mine, scores in zip(_claim_values(ours, arrays), theirs, strict=True):
        degree = np.array([s["degree_centrality"] for s in scores])
        assert np.abs((1.0 - mine) - degree).max() <= 5e-6 + 1e-12
        assert np.array_equal(np.round(1.0 - mine, 5), degree)
        compared += len(degree)
    assert compared > 40


def test_peer_bug_uqlm_reads_nli_columns_by_position_not_by_label(setup):
    """UQLM takes column -1 as entailment and column 0 as contradiction whatever the model's id2label says: with an
    entailment-first model (many XNLI models) it swaps them. Reproduction: the same stub, columns reordered, scored
    through UQLM's own NLI column convention (no reordering) gives entailment where the model says contradiction."""
    from uqlm.longform.luq.unit_response import UnitResponseScorer

    flipped = HashNli(id2label={0: "ENTAILMENT", 1: "NEUTRAL", 2: "CONTRADICTION"})

    class Positional:  # what uqlm.nli.NLI does with such a model: softmax columns as they come
        def predict_batch(self, pairs):
            return flipped.predict_proba([p for p, _ in pairs], [h for _, h in pairs])

    scorer = UnitResponseScorer.__new__(UnitResponseScorer)
    scorer.nli, scorer.progress_bar, scorer.matched_claim = Positional(), None, False
    claims, responses = [["Canberra is the capital."]], [["Sydney is the capital.", "Canberra is the capital."]]
    raw = scorer.evaluate(claims, responses).to_dict()["entailment"][0][0]
    probabilities = flipped.predict_proba([r for r in responses[0]], claims[0] * 2)
    assert raw == pytest.approx(probabilities[:, 2].mean())  # the model's CONTRADICTION column, read as entailment
    fixed = uqlm_longform.unit_response_scores(claims, responses, flipped)["entailment"][0][0]
    assert fixed == pytest.approx(probabilities[:, 0].mean())
