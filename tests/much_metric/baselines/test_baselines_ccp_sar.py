"""CCP and SAR: hand-computed values with a stub NLI, an independent per-token loop
(docs/reference-behaviour.md#signals), label mapping read
from id2label, context windows, and end to end with a tiny randomly initialised DeBERTa classifier."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from much_dataset import schema, synthetic
from much_metric.baselines import NliBatching, NliScorer, ccp, sar
from much_metric.baselines._arrays import token_arrays
from much_metric.baselines.context import PerSampleDecoder, context_windows
from much_metric.baselines.methods.ccp import ccp_signal_name
from much_metric.baselines.methods.sar import sar_signal_name
from tests.much_metric._baselines_helpers import (
    HashNli,
    fake_decode,
    loop_ccp,
    loop_sar,
    mushroom_rows,
    one_torch_thread,
    tiny_nli_parts,
)


@pytest.fixture(autouse=True)
def _one_torch_thread():
    with one_torch_thread():
        yield


class RuleNli:
    """Argmax rule on the candidate id (sigma = 0, fake_decode): same text -> entail, else id % 3 picks the class
    0 contradiction, 1 neutral, 2 entailment. Returns one-hot probabilities."""

    id2label = {0: "contradiction", 1: "neutral", 2: "entailment"}

    def predict_proba(self, premises, hypotheses):
        out = np.zeros((len(premises), 3))
        for row, (p, h) in enumerate(zip(premises, hypotheses, strict=True)):
            out[row, 2 if p == h else int(h.strip()[1:]) % 3] = 1.0
        return out


ROW = {
    schema.GENERATION_ID: "hand",
    # token 0: sampled id 10 (rank 1); token 1: sampled id 5 at rank 3, outside the top delta = 2.
    schema.OUTPUT_TOKENS: [10, 5],
    schema.LOGITS_TOKEN_IDS: [[3, 10, 4, 8], [6, 7, 9, 5]],
    schema.LOGITS_VALUES: [[0.4, 0.3, 0.2, 0.05], [0.5, 0.2, 0.1, 0.08]],
}


def test_ccp_hand_computed():
    # token 0, delta 2: candidates 3 (p .4, 3 % 3 = 0 -> contradiction) and 10 (sampled, forced entailment, p .3).
    # E = .3, C = .4 -> CCP = 1 - .3 / .7.
    # token 1, delta 2: candidates 6 (.5, contradiction), 7 (.2, neutral), appended sampled 5 (.08, forced).
    # E = .08, C = .5 -> CCP = 1 - .08 / .58.
    values = ccp([ROW], nli=RuleNli(), tokenizer=fake_decode, delta=2, sigma=0)[0]
    np.testing.assert_allclose(values, [1 - 0.3 / 0.7, 1 - 0.08 / 0.58])
    # delta 4: token 0 adds 4 (1 -> neutral) and 8 (2 -> entailment, .05): E = .35, C = .4.
    # token 1: 6 (C .5), 7 (neutral), 9 (0 -> C .1), 5 (forced E .08).
    values = ccp([ROW], nli=RuleNli(), tokenizer=fake_decode, delta=4, sigma=0)[0]
    np.testing.assert_allclose(values, [1 - 0.35 / 0.75, 1 - 0.08 / 0.68])


def test_ccp_first_same_text_candidate_is_forced_and_skipped():
    row = {**ROW, schema.LOGITS_TOKEN_IDS: [[3, 10, 4, 8], [5, 7, 9, 6]]}
    nli = HashNli()
    ccp([row], nli=nli, tokenizer=fake_decode, delta=3, sigma=1)
    # token 0: 2 NLI pairs (3 and 4; 10 is forced), token 1: 2 pairs (7 and 9; 5 is forced).
    assert len(nli.calls) == 4
    # A decoder that maps two ids to the same text: only the FIRST such candidate is forced, the other is asked.
    def same_text(batch):
        return ["".join(" x" if i in (3, 10) else f" w{i}" for i in ids) for ids in batch]

    nli = HashNli()
    ccp([ROW], nli=nli, tokenizer=same_text, delta=2, sigma=0)
    assert (" x", " x") in nli.calls  # candidate 10 (the sampled one) is run, candidate 3 was forced


def test_sar_hand_computed():
    class Fixed:
        id2label = {0: "ENTAILMENT", 1: "NOT_ENTAILMENT"}  # binary, entailment first (the _S model's real labels)

        def predict_proba(self, premises, hypotheses):
            # P(entail) = 0.9 when the hypothesis is the shorter string (token removed), else 0.3.
            p = np.array([0.9 if len(h) < len(pr) else 0.3 for pr, h in zip(premises, hypotheses, strict=True)])
            return np.stack([p, 1 - p], axis=1)

    values = sar([ROW], nli=Fixed(), tokenizer=fake_decode, sigma=1)[0]
    relevance = ((1 - 0.9) + (1 - 0.3)) / 2
    np.testing.assert_allclose(values, [(1 - 0.3) * relevance, (1 - 0.08) * relevance])


@pytest.mark.parametrize("reference_window", [False, True])
@pytest.mark.parametrize(("delta", "sigma"), [(10, 3), (24, 8), (5, 0)])
def test_ccp_and_sar_match_per_token_loop(delta, sigma, reference_window):
    rows = synthetic.make_rows(12, seed=delta + sigma, mean_tokens=12)
    nli = HashNli()
    ours = ccp(rows, nli=nli, tokenizer=fake_decode, delta=delta, sigma=sigma, reference_window=reference_window)
    theirs = loop_ccp(rows, nli.one, fake_decode, delta=delta, sigma=sigma, reference_window=reference_window)
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    ours = sar(rows, nli=nli, tokenizer=fake_decode, sigma=sigma, reference_window=reference_window)
    theirs = loop_sar(rows, nli.one, fake_decode, sigma=sigma, reference_window=reference_window)
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12)
        assert np.all((a >= 0) & (a <= 1))


def test_label_order_comes_from_id2label():
    rows = synthetic.make_rows(6, seed=1, mean_tokens=10)
    base = HashNli({0: "CONTRADICTION", 1: "NEUTRAL", 2: "ENTAILMENT"})
    permutation = [2, 0, 1]  # new column j holds old class permutation[j]

    class Permuted:
        id2label = {j: base.id2label[old] for j, old in enumerate(permutation)}

        def predict_proba(self, premises, hypotheses):
            return base.predict_proba(premises, hypotheses)[:, permutation]

    for fn, kwargs in ((ccp, {"delta": 10, "sigma": 2}), (sar, {"sigma": 2})):
        for a, b in zip(fn(rows, nli=base, tokenizer=fake_decode, **kwargs),
                        fn(rows, nli=Permuted(), tokenizer=fake_decode, **kwargs), strict=True):
            np.testing.assert_allclose(a, b)


def test_context_windows_clip_to_the_sample_and_reference_off_by_one():
    rows = [
        {**ROW, schema.GENERATION_ID: "a", schema.OUTPUT_TOKENS: [1, 2, 3, 4, 5],
         schema.LOGITS_TOKEN_IDS: [[1, 2]] * 5, schema.LOGITS_VALUES: [[0.5, 0.4]] * 5},
        {**ROW, schema.GENERATION_ID: "b", schema.OUTPUT_TOKENS: [6, 7],
         schema.LOGITS_TOKEN_IDS: [[6, 7]] * 2, schema.LOGITS_VALUES: [[0.5, 0.4]] * 2},
    ]
    arrays = token_arrays(rows)
    prefix, suffix = context_windows(arrays, fake_decode, 2)
    assert prefix.tolist() == ["", " w1", " w1 w2", " w2 w3", " w3 w4", "", " w6"]
    assert suffix.tolist() == [" w2 w3", " w3 w4", " w4 w5", " w5", "", " w7", ""]
    prefix, suffix = context_windows(arrays, fake_decode, 2, reference_window=True)
    assert suffix.tolist() == [" w2", " w3", " w4", " w5", "", " w7", ""]
    prefix, suffix = context_windows(arrays, fake_decode, 0)
    assert set(prefix.tolist()) == set(suffix.tolist()) == {""}
    with pytest.raises(ValueError, match="sigma"):
        context_windows(arrays, fake_decode, -1)


def test_per_sample_decoder_routes_each_sample_to_its_tokenizer():
    rows = synthetic.make_rows(8, seed=3, mean_tokens=8)

    def other_decode(batch):
        return ["".join(f" v{i}" for i in ids) for ids in batch]

    keys = {row[schema.GENERATION_ID]: ("A" if i % 3 else "B") for i, row in enumerate(rows)}
    routed = PerSampleDecoder({"A": fake_decode, "B": other_decode}, keys)
    nli = HashNli()
    ours = ccp(rows, nli=nli, tokenizer=routed, delta=5, sigma=2)
    ours_sar = sar(rows, nli=nli, tokenizer=routed, sigma=2)
    for i, row in enumerate(rows):
        decode = fake_decode if i % 3 else other_decode
        np.testing.assert_allclose(ours[i], loop_ccp([row], nli.one, decode, delta=5, sigma=2)[0])
        np.testing.assert_allclose(ours_sar[i], loop_sar([row], nli.one, decode, sigma=2)[0])
    with pytest.raises(ValueError, match="no tokenizer is known"):
        ccp(rows, nli=nli, tokenizer=PerSampleDecoder({"A": fake_decode}, {}), delta=5, sigma=2)


def test_errors_and_names():
    with pytest.raises(ValueError, match="generating LLM's tokenizer"):
        ccp([ROW], nli=RuleNli(), tokenizer=None)
    with pytest.raises(ValueError, match="need an NLI model"):
        sar([ROW], nli=None, tokenizer=fake_decode)

    class Unnamed(RuleNli):
        id2label = {0: "LABEL_0", 1: "LABEL_1", 2: "LABEL_2"}

    with pytest.raises(ValueError, match="cannot infer the NLI meaning of label 'LABEL_0'"):
        ccp([ROW], nli=Unnamed(), tokenizer=fake_decode, delta=2, sigma=0)
    missing = {**ROW, schema.OUTPUT_TOKENS: [10, 99]}
    with pytest.raises(ValueError, match="generation_id='hand', token 1"):
        ccp([missing], nli=RuleNli(), tokenizer=fake_decode, delta=2, sigma=0)
    with pytest.raises(ValueError, match="generation_id='hand', token 1"):
        sar([missing], nli=RuleNli(), tokenizer=fake_decode, sigma=0)
    assert ccp_signal_name(10, 8) == "ccp_10_8"
    assert ccp_signal_name(24, 5, "microsoft/deberta-base-mnli") == "ccp_24_5_M"
    assert sar_signal_name(3, "MoritzLaurer/DeBERTa-v3-xsmall-mnli-fever-anli-ling-binary") == "sar_3_S"
    assert sar_signal_name(8, "joeddav/xlm-roberta-large-xnli") == "sar_8_xlm-roberta-large-xnli"


@pytest.mark.slow
def test_end_to_end_tiny_deberta_batched_equals_one_pair_at_a_time():
    model, tokenizer = tiny_nli_parts()
    rows = mushroom_rows(tokenizer, 2, lang="en", max_tokens=7)  # + a duplicate of the first answer
    rows += mushroom_rows(tokenizer, 1, lang="fr", seed=1, repeat_first=False, max_tokens=7)
    batched = NliScorer(model, tokenizer, batching=NliBatching(batch_size=16), progress=False)
    single = NliScorer(model, tokenizer, batching=NliBatching(batch_size=1, deduplicate=False, sort_by_length=False),
                       progress=False)

    def one(premise, hypothesis):  # one model call per pair, as the reference's loop
        return single.predict_proba([premise], [hypothesis])[0]

    ours = ccp(rows, nli=batched, tokenizer=tokenizer, delta=5, sigma=3)
    theirs = loop_ccp(rows, one, tokenizer.batch_decode, delta=5, sigma=3)
    assert any(np.any(v > 0) for v in ours)  # the model does contradict some replacements
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-5)
    ours = sar(rows, nli=batched, tokenizer=tokenizer, sigma=3, reference_window=True)
    theirs = loop_sar(rows, one, tokenizer.batch_decode, sigma=3, reference_window=True)
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-5)
    # The duplicated sample gets exactly the scores of the first (its pairs were computed once).
    np.testing.assert_array_equal(ours[0], ours[2])



class _Constant:
    """Every pair gets the same class: entailment or contradiction."""

    id2label = {0: "contradiction", 1: "neutral", 2: "entailment"}

    def __init__(self, label: int):
        self.label = label

    def predict_proba(self, premises, hypotheses):
        out = np.zeros((len(premises), 3))
        out[:, self.label] = 1.0
        return out


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), delta=st.integers(2, 24), sigma=st.integers(0, 4))
def test_ccp_limits_property(seed, delta, sigma):
    rows = synthetic.make_rows(3, seed=seed, mean_tokens=6)
    for values in ccp(rows, nli=_Constant(2), tokenizer=fake_decode, delta=delta, sigma=sigma):
        np.testing.assert_array_equal(values, 0.0)  # everything entails: fully certain
    contradicted = ccp(rows, nli=_Constant(0), tokenizer=fake_decode, delta=delta, sigma=sigma)
    for row, values in zip(rows, contradicted, strict=True):
        for i, (token, ids, probs) in enumerate(zip(row[schema.OUTPUT_TOKENS], row[schema.LOGITS_TOKEN_IDS],
                                                    row[schema.LOGITS_VALUES], strict=True)):
            p = probs[ids.index(token)]
            mass = sum(probs[:delta]) + (0.0 if token in ids[:delta] else p)
            assert values[i] == pytest.approx(1 - p / mass)  # only the sampled token entails itself
            assert 0 <= values[i] < 1
