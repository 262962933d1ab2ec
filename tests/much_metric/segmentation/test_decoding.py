"""stock_backend: the Rust backend is used for decoding only where it gives exactly ``tokenizer.decode``."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from much_metric.baselines.context import batch_decoder
from much_metric.segmentation.decoding import stock_backend
from tests import assets


@pytest.mark.parametrize("name", assets.TOKENIZER_NAMES)
def test_batch_decoder_equals_tokenizer_decode(name):
    tokenizer = assets.tokenizer(name)
    assert stock_backend(tokenizer) is not None
    rng = np.random.default_rng(0)
    text = " ".join(assets.mushroom_outputs()[:40])
    ids = tokenizer.encode(text, add_special_tokens=False)
    specials = sorted(tokenizer.all_special_ids)
    windows = [[], [tokenizer.eos_token_id], specials[:3]]
    for _ in range(300):  # context windows: any slice, also cutting multi-byte characters, plus random ids
        start = int(rng.integers(0, len(ids) - 1))
        windows.append(ids[start : start + int(rng.integers(0, 10))])
        windows.append(rng.integers(0, len(tokenizer), size=int(rng.integers(1, 5))).tolist())
    assert batch_decoder(tokenizer)(windows) == [tokenizer.decode(window) for window in windows]


def test_stock_backend_refuses_what_it_cannot_prove():
    tokenizer = copy.deepcopy(assets.llama3_tokenizer())
    tokenizer.clean_up_tokenization_spaces = True
    assert stock_backend(tokenizer) is None

    class Custom(type(assets.llama3_tokenizer())):
        def _decode(self, token_ids, **kwargs):
            return super()._decode(token_ids, **kwargs).upper()

    custom = copy.deepcopy(assets.llama3_tokenizer())
    custom.__class__ = Custom
    assert stock_backend(custom) is None
    ids = custom.encode("Paris is nice", add_special_tokens=False)
    assert batch_decoder(custom)([ids]) == ["PARIS IS NICE"]
    assert stock_backend(object()) is None
