"""Context windows of sigma tokens around each generated token, decoded with the generating LLM's tokenizer.

CCP and SAR ask an NLI model whether replacing (CCP) or removing (SAR) one token changes the meaning. A MUCH claim
is rarely self-contained, so the paper gives the NLI model the ``sigma`` tokens before and after the target token
(paper section 5). Windows never cross the sample boundary; the EOS token is part of the output and is decoded like
any other token (special tokens kept, as the reference does).

Window convention:

* default (``reference_window=False``): prefix = ``tokens[i - sigma : i]`` and suffix = ``tokens[i + 1 : i + 1 +
  sigma]`` -- sigma tokens on both sides, as the paper describes it;
* ``reference_window=True``: the reference code's suffix ``tokens[i + 1 : i + sigma]`` (sigma - 1 tokens, an
  off-by-one, docs/reference-behaviour.md#signals, #context-window). Use it to reproduce the published ``ccp_*`` /
  ``sar_*`` signals.

Each piece is decoded on its own (prefix, token, suffix) and the strings are concatenated, exactly as the
reference builds its NLI inputs; decoded strings keep their leading spaces.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from much_dataset.params import Interval, InvalidParameterError, check_param
from much_dataset.schema import GENERATION_ID
from much_metric.baselines._arrays import TokenArrays
from much_metric.segmentation.decoding import stock_backend

__all__ = ["Decoder", "PerSampleDecoder", "batch_decoder", "decode_groups", "decode_ids", "context_windows"]

#: Decodes a batch of token-id lists into strings.
Decoder = Callable[[list[list[int]]], list[str]]


@dataclass(frozen=True)
class PerSampleDecoder:
    """Different tokenizers for different samples (MUCH mixes four generating LLMs).

    ``tokenizers`` maps a key (e.g. a model name) to a tokenizer or decode function; ``key_of`` maps each
    ``generation_id`` to its key.
    """

    tokenizers: Mapping[Any, Any]
    key_of: Mapping[str, Any]


def decode_groups(arrays: TokenArrays, tokenizer: Any) -> Iterator[tuple[np.ndarray | None, TokenArrays, Decoder]]:
    """``(samples, their arrays, decoder)`` per tokenizer; ``samples`` is None when one tokenizer serves all."""
    if not isinstance(tokenizer, PerSampleDecoder):
        yield None, arrays, batch_decoder(tokenizer)
        return
    keys = []
    for gid in arrays.generation_ids:
        if gid not in tokenizer.key_of:
            raise ValueError(f"{GENERATION_ID}={gid!r}: no tokenizer is known for this sample")
        keys.append(tokenizer.key_of[gid])
    for key in dict.fromkeys(keys):
        if key not in tokenizer.tokenizers:
            raise ValueError(f"no tokenizer for {key!r} (needed by {keys.count(key)} samples)")
        samples = np.flatnonzero(np.asarray([k == key for k in keys]))
        yield samples, arrays.select(samples), batch_decoder(tokenizer.tokenizers[key])


def batch_decoder(tokenizer: Any) -> Decoder:
    """A batch decoding function from a tokenizer (``batch_decode`` or ``decode``) or a callable.

    A callable is assumed to already map ``list[list[int]] -> list[str]``. Tokenizer defaults apply (special
    tokens kept, the tokenizer's own ``clean_up_tokenization_spaces``), as ``tokenizer.decode`` in the reference.
    """
    if tokenizer is None:
        raise ValueError("CCP and SAR need the generating LLM's tokenizer to decode context windows (tokenizer=...)")
    if hasattr(tokenizer, "batch_decode"):
        backend = stock_backend(tokenizer)
        if backend is not None:  # the same strings, without transformers' per-list conversions
            return lambda batch: backend.decode_batch(batch, skip_special_tokens=False)
        return lambda batch: list(tokenizer.batch_decode(batch))
    if hasattr(tokenizer, "decode"):
        return lambda batch: [tokenizer.decode(ids) for ids in batch]
    if callable(tokenizer):
        return tokenizer
    raise InvalidParameterError(f"tokenizer must have batch_decode/decode or be a callable, got "
                                f"{type(tokenizer).__name__}")


def decode_ids(decode: Decoder, ids: np.ndarray) -> np.ndarray:
    """Decode every id of ``ids`` on its own, each distinct id once; object array of ``ids``'s shape."""
    ids = np.asarray(ids, dtype=np.int64)
    unique, inverse = np.unique(ids, return_inverse=True)
    texts = decode([[int(i)] for i in unique])
    if len(texts) != len(unique):
        raise ValueError(f"the decoder returned {len(texts)} strings for {len(unique)} inputs")
    return np.asarray(texts + [""], dtype=object)[:-1][inverse.reshape(ids.shape)]


def _check_sigma(sigma: Any) -> int:
    return int(check_param("sigma", sigma, Interval(numbers.Integral, 0, None), hint="context tokens on each side"))


def _window_bounds(arrays: TokenArrays, sigma: int, suffix_length: int) -> tuple[np.ndarray, ...]:
    """Flat [start, end) bounds of every token's prefix and suffix, clipped to its own sample."""
    n = arrays.n_tokens
    position = np.arange(n)
    sample = np.repeat(np.arange(arrays.n_samples), np.diff(arrays.offsets))
    first, end = arrays.offsets[sample], arrays.offsets[sample + 1]
    prefix_start = np.maximum(first, position - sigma)
    suffix_end = np.minimum(end, position + 1 + suffix_length)
    return prefix_start, position, position + 1, suffix_end


def context_windows(
    arrays: TokenArrays,
    decode: Decoder,
    sigma: int,
    *,
    reference_window: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Decoded prefix and suffix of every token.

    Parameters
    ----------
    arrays : TokenArrays
    decode : Decoder
        From :func:`batch_decoder` (the generating LLM's tokenizer).
    sigma : int
        Context tokens on each side (0 = no context).
    reference_window : bool, default False
        Use the reference's suffix of ``sigma - 1`` tokens (see the module docstring).

    Returns
    -------
    prefix, suffix : object ndarrays of shape (N_tokens,)
        ``prefix[i] = decode(tokens[max(start, i - sigma) : i])``, ``suffix[i] = decode(tokens[i + 1 : i + 1 + s])``
        with ``s = sigma`` (or ``sigma - 1``), both clipped to the token's sample.
    """
    sigma = _check_sigma(sigma)
    suffix_length = max(sigma - 1, 0) if reference_window else sigma
    prefix_start, prefix_end, suffix_start, suffix_end = _window_bounds(arrays, sigma, suffix_length)
    tokens = arrays.output_tokens.tolist()  # list slicing beats numpy slicing + tolist per window
    windows = [tokens[a:b] for a, b in zip(prefix_start.tolist(), prefix_end.tolist(), strict=True)]
    windows += [tokens[a:b] for a, b in zip(suffix_start.tolist(), suffix_end.tolist(), strict=True)]
    texts = decode(windows)
    if len(texts) != len(windows):
        raise ValueError(f"the decoder returned {len(texts)} strings for {len(windows)} windows")
    texts = np.asarray(texts + [None], dtype=object)[:-1]  # the extra item keeps numpy from splitting strings
    return texts[: arrays.n_tokens], texts[arrays.n_tokens :]
