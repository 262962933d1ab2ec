"""IncrementalSegmenter: claims emitted token by token equal the batch segmentation of the same ids."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from much_metric.segmentation import IncrementalSegmenter, SegmenterInputError, segment
from tests import assets
from tests.much_metric.segmentation.test_segmenter import TEXTS, outcome, token_sequences

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def run_incremental(tokenizer, ids, compat):
    """``(claims emitted while pushing, claims from finish())``; checks every emitted claim is already complete."""
    segmenter = IncrementalSegmenter(tokenizer, compat=compat)
    early = []
    for position, token_id in enumerate(ids):
        for claim in segmenter.push(token_id):
            assert claim[-1] <= position  # emitted claims only hold tokens already pushed
            early.append(claim)
    return early, segmenter.finish()


def incremental_outcome(tokenizer, ids, compat):
    try:
        early, rest = run_incremental(tokenizer, ids, compat)
    except (ValueError, IndexError) as error:
        return ("raises", type(error))
    return early + rest


def assert_matches_batch(tokenizer, ids, compat):
    expected = outcome(segment, tokenizer.decode(ids), tokenizer, ids, compat=compat)
    got = incremental_outcome(tokenizer, ids, compat)
    if isinstance(expected, tuple):
        assert isinstance(got, tuple), (compat, ids, got)
    else:
        assert got == expected, (compat, ids)


@pytest.mark.parametrize("name", assets.TOKENIZER_NAMES)
def test_mushroom_outputs_incremental_equals_batch(name):
    tokenizer = assets.tokenizer(name)
    texts = assets.mushroom_outputs()
    early_total = claims_total = 0
    for k, text in enumerate(texts):
        ids = tokenizer.encode(text, add_special_tokens=False) + [tokenizer.eos_token_id]
        compat = "0.3.0" if k % 2 == 0 else "0.2.1"  # both versions, half the outputs each
        expected = segment(tokenizer.decode(ids), tokenizer, ids, compat=compat)
        early, rest = run_incremental(tokenizer, ids, compat)
        assert early + rest == expected, (name, compat, text)
        early_total += len(early)
        claims_total += len(expected)
    # Real time: most claims are final before the generation ends.
    assert early_total >= 0.8 * claims_total


@pytest.mark.parametrize("name", ["llama3", "gemma3"])
@SETTINGS
@given(text=TEXTS, with_eos=st.booleans(), compat=st.sampled_from(["0.3.0", "0.2.1"]))
def test_every_prefix_of_random_text(name, text, with_eos, compat):
    tokenizer = assets.tokenizer(name)
    ids = tokenizer.encode(text, add_special_tokens=False)
    if with_eos:
        ids.append(tokenizer.eos_token_id)
    for end in range(1, len(ids) + 1):
        assert_matches_batch(tokenizer, ids[:end], compat)


@pytest.mark.parametrize("name", assets.TOKENIZER_NAMES)
@SETTINGS
@given(data=st.data(), compat=st.sampled_from(["0.3.0", "0.2.1"]))
def test_every_prefix_of_random_token_ids(name, data, compat):
    """Arbitrary ids (special tokens, characters split byte by byte): every prefix agrees with the batch."""
    tokenizer = assets.tokenizer(name)
    ids = data.draw(token_sequences(tokenizer))
    for end in range(1, len(ids) + 1):
        assert_matches_batch(tokenizer, ids[:end], compat)


def test_claims_are_emitted_while_generating():
    tokenizer = assets.llama3_tokenizer()
    text = "Paris is the capital of France. The Seine flows through the city, and it has many bridges."
    ids = tokenizer.encode(text, add_special_tokens=False) + [tokenizer.eos_token_id]
    early, rest = run_incremental(tokenizer, ids, "0.2.1")
    assert early + rest == segment(tokenizer.decode(ids), tokenizer, ids, compat="0.2.1")
    assert len(early) >= len(early + rest) - 2
    segmenter = IncrementalSegmenter(tokenizer, compat="0.2.1")
    for token_id in ids:
        segmenter.push(token_id)
    assert segmenter.claims == early and segmenter.token_ids == ids


def test_empty_and_misuse():
    tokenizer = assets.llama3_tokenizer()
    assert IncrementalSegmenter(tokenizer).finish() == []
    with pytest.raises(SegmenterInputError):
        IncrementalSegmenter(tokenizer, compat="0.2.1").finish()  # as segment("", compat="0.2.1")
    segmenter = IncrementalSegmenter(tokenizer)
    segmenter.push(tokenizer.eos_token_id)
    assert segmenter.finish() == [[0]]
    assert segmenter.finish() == []
    with pytest.raises(RuntimeError, match="after finish"):
        segmenter.push(1)
    with pytest.raises(ValueError, match="compat"):
        IncrementalSegmenter(tokenizer, compat="1.0")


def test_a_tokenizer_that_gains_an_end_of_turn_token_is_profiled_again():
    """The per-tokenizer profile (EOS ids, decode caches) is cached; a tokenizer that gains a special end-of-turn
    token must not keep the profile of its old vocabulary, or the new token would never end an answer."""
    from much_metric.models import load_tokenizer
    from much_metric.segmentation import IncrementalSegmenter

    tokenizer = load_tokenizer("smollm2")
    before = IncrementalSegmenter(tokenizer).eos_ids
    tokenizer.add_special_tokens({"additional_special_tokens": ["<end_of_turn>"]})
    added = tokenizer.convert_tokens_to_ids("<end_of_turn>")
    assert added not in before and added in IncrementalSegmenter(tokenizer).eos_ids


def test_per_text_segment_asks_the_vocabulary_only_where_a_grown_one_can_change_the_claims(monkeypatch):
    """segment() on one text is the hot path: the growth check (the tokenizer's size, about 5 us from its Rust
    backend) runs only for a text holding an end-of-turn marker the profile does not know as one token; such a text
    then segments with the grown vocabulary's end of turn."""
    from much_metric.models import load_tokenizer
    from much_metric.segmentation import _spans

    tokenizer = load_tokenizer("smollm2")
    text = "Paris is the capital of France. It is big."
    ids = tokenizer.encode(text, add_special_tokens=False)
    before = segment(text, tokenizer, ids)
    asked = []
    real = _spans._vocabulary_size
    monkeypatch.setattr(_spans, "_vocabulary_size", lambda t: asked.append(1) or real(t))
    for _ in range(20):
        assert segment(text, tokenizer, ids) == before
    assert asked == []
    tokenizer.add_special_tokens({"additional_special_tokens": ["<end_of_turn>"]})
    marked = text + "<end_of_turn>"
    marked_ids = tokenizer.encode(marked, add_special_tokens=False)
    assert marked_ids[-1] == tokenizer.convert_tokens_to_ids("<end_of_turn>")
    claims = segment(marked, tokenizer, marked_ids)
    assert asked and claims[-1] == [len(marked_ids) - 1]  # the learnt marker ends the answer, a claim of its own
