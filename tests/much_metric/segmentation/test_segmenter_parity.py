"""Parity with much-segmenter on all 606 Mu-SHROOM outputs x 4 real tokenizers x 2 paths x 2 versions
(+ the batch API segment_many).

Each output gets the generating model's EOS appended, as the MUCH outputs have it (text + EOS string; precomputed
ids = ids of the text + the EOS id). The parity count is printed (run pytest with ``-s`` to see it) and every pair
must agree: same claims, or both reject the input.
"""

from __future__ import annotations

import pytest

from much_metric.segmentation import segment, segment_many
from much_metric.segmentation._words import forget_pieces
from tests import assets
from tests.much_metric.segmentation.test_segmenter import COMPATS, outcome


@pytest.mark.parametrize("name", assets.TOKENIZER_NAMES)
def test_mushroom_parity(name, capsys):
    references = assets.reference_segmenters()
    tokenizer = assets.tokenizer(name)
    texts = assets.mushroom_outputs()
    assert len(texts) == 606
    eos_id = tokenizer.eos_token_id
    eos = tokenizer.decode(eos_id)
    generations = [text + eos for text in texts]
    all_ids = [tokenizer.encode(text, add_special_tokens=False) + [eos_id] for text in texts]
    paths = ("offsets", "precomputed", "segment_many", "segment_many/offsets")
    counts = {(compat, path): 0 for compat in COMPATS for path in paths}
    mismatches = []
    for compat in COMPATS:
        expected_precomputed = []
        expected_offsets = []
        for generation, ids in zip(generations, all_ids, strict=True):
            for path, token_ids in (("offsets", None), ("precomputed", ids)):
                expected = outcome(references[compat], generation, tokenizer, token_ids)
                got = outcome(segment, generation, tokenizer, token_ids, compat=compat)
                same = got == expected or (isinstance(expected, tuple) and isinstance(got, tuple))
                counts[compat, path] += same
                if not same:
                    mismatches.append((compat, path, generation, expected, got))
                (expected_offsets if token_ids is None else expected_precomputed).append(expected)
        # The batch API, from a cold word cache, on the same generations (no output here is rejected).
        for path, token_ids, expected in (("segment_many", all_ids, expected_precomputed),
                                          ("segment_many/offsets", None, expected_offsets)):
            forget_pieces()
            many = segment_many(generations, tokenizer, token_ids, compat=compat)
            counts[compat, path] = sum(a == b for a, b in zip(many, expected, strict=True))
            if counts[compat, path] != len(texts):
                mismatches.append((compat, path))
    summary = " ".join(f"{compat}/{path}={count}/{len(texts)}" for (compat, path), count in counts.items())
    with capsys.disabled():
        print(f"\nsegmenter parity: {name} {summary}")
    assert not mismatches, mismatches[:3]
