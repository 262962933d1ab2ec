"""The batch engine behind segment_many: differential tests against much-segmenter and against the per-generation
loop it vectorises. The full Mu-SHROOM run is in test_segmenter_parity.py."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from much_metric.segmentation import _words as _segmenter_words
from much_metric.segmentation import segment_many
from much_metric.segmentation._batch import assign_many, assign_tokens, claims_many
from tests import assets
from tests.much_metric.segmentation.test_segmenter import (
    COMPATS,
    EDGE_TEXTS,
    RAW_TEXTS,
    TEXTS,
    _generations,
    outcome,
    token_sequences,
)


@st.composite
def generation_layouts(draw):
    """Per generation: (length, non-decreasing token ends in [0, length], sorted claim starts ending with length)."""
    layouts = []
    for _ in range(draw(st.integers(1, 6))):
        length = draw(st.integers(0, 30))
        ends = sorted(draw(st.lists(st.integers(0, length), min_size=1, max_size=12)))
        starts = sorted(set(draw(st.lists(st.integers(0, length), max_size=8))) | {length})
        layouts.append((length, ends, starts))
    return layouts


@settings(max_examples=400, deadline=None)
@given(layouts=generation_layouts())
def test_assign_many_equals_the_sequential_loop(layouts):
    """Vectorised assignment == the reference's recurrence, including tokens that pass two starts at once."""
    gen_start, position = [], 0
    for length, _, _ in layouts:
        gen_start.append(position)
        position += length + 1  # the one-character gap between generations
    gen_start = np.asarray(gen_start)
    token_end = np.concatenate([np.asarray(ends) + s for (_, ends, _), s in zip(layouts, gen_start, strict=True)])
    starts = np.concatenate([np.asarray(st_) + s for (_, _, st_), s in zip(layouts, gen_start, strict=True)])
    counts = np.asarray([len(ends) for _, ends, _ in layouts])
    lengths = np.asarray([length for length, _, _ in layouts])
    got = assign_many(token_end, counts, starts, gen_start, gen_start + lengths + 1)
    assert got == [assign_tokens(ends, starts_) for _, ends, starts_ in layouts]


def _check_batch(references, tokenizer, items, compat):
    """segment_many on the items the reference accepts equals the reference; each rejected item raises alone."""
    expected = [outcome(references[compat], g, tokenizer, ids) for g, ids in items]
    accepted = [(item, result) for item, result in zip(items, expected, strict=True) if not isinstance(result, tuple)]
    _segmenter_words.forget_pieces()
    got = segment_many([g for (g, _), _ in accepted], tokenizer, [ids for (_, ids), _ in accepted], compat=compat)
    assert got == [result for _, result in accepted], (compat, [item for item, _ in accepted])
    for (generation, ids), result in zip(items, expected, strict=True):
        if isinstance(result, tuple):
            with pytest.raises((ValueError, IndexError)):
                segment_many([generation], tokenizer, [ids], compat=compat)


@pytest.mark.parametrize("name", assets.TOKENIZER_NAMES)
def test_edge_cases_in_one_batch_match_reference(name):
    references = assets.reference_segmenters()
    tokenizer = assets.tokenizer(name)
    items = []
    for text in EDGE_TEXTS:
        for generation, eos_id in _generations(tokenizer, text):
            ids = tokenizer.encode(text if eos_id is not None else generation, add_special_tokens=False)
            items += [(generation, None), (generation, ids + ([eos_id] if eos_id is not None else []) or None)]
    for compat in COMPATS:
        _check_batch(references, tokenizer, items, compat)


@pytest.mark.parametrize("name", assets.TOKENIZER_NAMES)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_token_batches_match_reference(name, data):
    """Batches of arbitrary token ids (special ids, characters split into bytes) and of odd texts."""
    references = assets.reference_segmenters()
    tokenizer = assets.tokenizer(name)
    items = []
    for ids in data.draw(st.lists(token_sequences(tokenizer), min_size=1, max_size=4)):
        items.append((tokenizer.decode(ids), ids))
    for text in data.draw(st.lists(RAW_TEXTS | TEXTS, max_size=3)):
        items.append((text, tokenizer.encode(text, add_special_tokens=False) or None))
    for compat in COMPATS:
        _check_batch(references, tokenizer, items, compat)


def test_fast_path_handles_real_outputs():
    """The engine itself (not the per-generation fallback) segments the Mu-SHROOM outputs, with and without ids."""
    tokenizer = assets.llama3_tokenizer()
    eos = tokenizer.decode(tokenizer.eos_token_id)
    texts = assets.mushroom_outputs()
    generations = [text + eos for text in texts]
    ids = [tokenizer.encode(text, add_special_tokens=False) + [tokenizer.eos_token_id] for text in texts]
    for token_ids in (ids, [None] * len(texts)):
        for compat in COMPATS:
            _segmenter_words.forget_pieces()
            results = claims_many(generations, tokenizer, token_ids, compat)
            assert sum(result is None for result in results) <= len(texts) // 100


def test_a_piece_treebank_cannot_place_only_affects_its_own_generation(monkeypatch):
    """When one piece cannot be split back out of a batched Treebank call, the other pieces of its chunk are still
    resolved, and only that piece's generation is segmented on its own (with the same result)."""
    from much_metric.segmentation import _batch as _segmenter_batch
    from much_metric.segmentation import segment

    tokenizer = assets.llama3_tokenizer()
    texts = [text + "<|eot_id|>" for text in assets.mushroom_outputs()[:40]]
    poisoned = "Paris, "
    texts[7] = "The capital is " + poisoned + "of course.<|eot_id|>"
    real = _segmenter_batch.tokenize_pieces

    def refuses_poisoned(pieces, last_is_final):
        return None if poisoned in pieces else real(pieces, last_is_final)

    monkeypatch.setattr(_segmenter_batch, "tokenize_pieces", refuses_poisoned)
    _segmenter_words.forget_pieces()
    results = claims_many(texts, tokenizer, [None] * len(texts), "0.3.0")
    assert [k for k, result in enumerate(results) if result is None] == [7]
    monkeypatch.setattr(_segmenter_batch, "tokenize_pieces", real)
    expected = [segment(text, tokenizer) for text in texts]
    assert [result for k, result in enumerate(results) if k != 7] == [e for k, e in enumerate(expected) if k != 7]


def test_rejected_input_names_its_index():
    tokenizer = assets.llama3_tokenizer()
    ids = tokenizer.encode("Paris is nice.", add_special_tokens=False)
    with pytest.raises(ValueError, match=r"generations\[1\]: token_ids decode to 14 characters but generation has 15"):
        segment_many(["Paris is nice.", "Paris is nice!!"], tokenizer, [ids, ids])
    with pytest.raises(IndexError, match=r"generations\[0\]: token_ids is empty"):
        segment_many(["Paris"], tokenizer, [[]])
