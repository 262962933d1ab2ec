"""Token strings of an OpenAI-compatible stream to token ids (:mod:`much_metric.monitor._openai`).

The segmenter and the stopword rule need token ids. A ``token`` of the form ``token_id:N`` (vLLM's and SGLang's
``return_tokens_as_token_ids``; ``much monitor --base-url`` requests it unless ``--no-token-ids``) is taken as is.
Otherwise the token's raw ``bytes`` (or its UTF-8 text when a server sends no bytes) are looked up in a table built
once from the tokenizer's vocabulary (byte-level BPE pieces such as ``Ġthe`` mapped back to bytes; SentencePiece
``▁`` and ``<0xNN>`` pieces likewise). When several ids spell the same bytes the first non-special id wins; a
sampled token that maps to no id is an error, an alternative that maps to none keeps its probability with id -1 (Max
Likelihood and Token Entropy do not use ids). A token that is part of a UTF-8 character split over several tokens
(CJK, emoji, rare accents) has no text of its own: vLLM streams it with an empty ``token`` and ``bytes`` (the last
piece carries the whole character), so its id cannot be known from the text -- such a sampled token is an error that
asks for ``return_tokens_as_token_ids`` (never a guessed id).
"""

from __future__ import annotations

import functools
import re
from typing import Any

__all__ = ["TOKEN_ID_PATTERN", "cached_token_table", "token_bytes_table", "token_to_id"]

TOKEN_ID_PATTERN = re.compile(r"token_id:(\d+)")
_BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")


@functools.lru_cache(maxsize=1)
def _byte_level_decoder() -> dict[str, int]:
    """The inverse of GPT-2's byte -> printable character map (every byte-level BPE vocabulary uses it)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars = {b: b for b in printable}
    extra = 0
    for b in range(256):
        if b not in chars:
            chars[b] = 256 + extra
            extra += 1
    return {chr(c): b for b, c in chars.items()}


def _piece_bytes(piece: str, byte_level: bool, decoder: dict[str, int]) -> bytes | None:
    if byte_level:
        try:
            return bytes(decoder[ch] for ch in piece)
        except KeyError:
            return None
    match = _BYTE_PIECE.fullmatch(piece)
    if match:
        return bytes([int(match.group(1), 16)])
    return piece.replace("▁", " ").encode("utf-8")


def token_bytes_table(tokenizer) -> dict[bytes, int]:
    """``{raw bytes of a vocabulary piece: id}`` of ``tokenizer`` (first non-special id for duplicated bytes)."""
    vocab = tokenizer.get_vocab()
    decoder = _byte_level_decoder()
    byte_level = "Ġ" in vocab or "ĠĠ" in vocab
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    table: dict[bytes, int] = {}
    for piece, token_id in sorted(vocab.items(), key=lambda item: (item[1] in special, item[1])):
        if token_id in special:
            raw = piece.encode("utf-8")  # special tokens are sent as their literal text
        else:
            raw = _piece_bytes(piece, byte_level, decoder)
        if raw is not None:
            table.setdefault(raw, token_id)
    return table


def token_to_id(entry: dict[str, Any], table: dict[bytes, int]) -> int | None:
    """The id of one ``logprobs`` entry (``token``, optional ``bytes``), or None when it maps to none."""
    token = entry.get("token", "")
    match = TOKEN_ID_PATTERN.fullmatch(token or "")
    if match:
        return int(match.group(1))
    if entry.get("bytes") is not None:
        values = entry["bytes"]
        if not isinstance(values, list) or not all(isinstance(b, int) and not isinstance(b, bool) and 0 <= b <= 255
                                                   for b in values):
            raise ValueError(f"token {token!r}: bytes must be a list of integers 0-255, got {values!r:.80}")
        raw = bytes(values)
    else:
        raw = str(token).encode("utf-8")
    return table.get(raw)


@functools.lru_cache(maxsize=4)
def _table_cached(tokenizer, vocabulary_size: int) -> dict[bytes, int]:
    return token_bytes_table(tokenizer)


def cached_token_table(tokenizer) -> dict[bytes, int]:
    """:func:`token_bytes_table` of ``tokenizer``, built once per tokenizer and vocabulary size: a tokenizer that
    gains tokens (``add_tokens``, ``add_special_tokens``) gets a new table, never the stale one."""
    try:
        size = len(tokenizer)
    except TypeError:
        size = -1
    try:
        return _table_cached(tokenizer, size)
    except TypeError:  # unhashable tokenizer
        return token_bytes_table(tokenizer)
