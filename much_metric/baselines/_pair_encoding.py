"""Token ids of (premise, hypothesis) pairs for :class:`much_metric.baselines.nli.NliScorer`, each text encoded once.

A fast (Rust ``tokenizers``) tokenizer encodes a pair as its two texts encoded separately, joined by the
post-processor's special tokens: ``prefix + ids(a) + middle + ids(b) + suffix``, each region with its own token
type ids. CCP's premise repeats across a token's ~9 candidates and SAR uses each text in both roles, so encoding the
distinct texts once (with ``add_special_tokens=False``) and assembling the pairs from that template halves the
tokenizer's work. The template is not assumed: :func:`infer_pair_template` reads it off the tokenizer by comparing
``tokenizer(a, b)`` with the separate encodings of ``a`` and ``b`` for a few probe pairs, and returns None (plain
pair encoding) when the layout is not consistent, the tokenizer is not a fast one, or anything else is off. The
caller also checks a few assembled pairs of every call against ``tokenizer(premise, hypothesis)``
(:func:`matches_tokenizer`).

Encoded pairs are stored flat (:class:`EncodedPairs`): each pair is a few regions, each region a slice of one flat
id array, so that a padded batch is gathered with numpy indexing, without a Python loop over its rows.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

#: Probe pairs of different lengths (one short text in each role) used to infer the template.
_PROBES = (
    ("The cat sat on the mat.", "A cat is sitting."),
    ("Paris is the capital of France, and it had 2,141,000 inhabitants in 2020.", "no"),
    ("x", "It was in 1969 that the first humans walked on the Moon."),
)


@dataclass(frozen=True)
class PairTemplate:
    """Special tokens around a pair's two texts: ``prefix + a + middle + b + suffix``, with token type ids.

    ``*_types`` are the type ids of the special tokens of each region; every token of ``a`` has type ``type_a``,
    every token of ``b`` type ``type_b``. ``has_types``: the tokenizer returns ``token_type_ids``.
    """

    prefix: tuple[int, ...]
    prefix_types: tuple[int, ...]
    type_a: int
    middle: tuple[int, ...]
    middle_types: tuple[int, ...]
    type_b: int
    suffix: tuple[int, ...]
    suffix_types: tuple[int, ...]
    has_types: bool


@dataclass(frozen=True)
class EncodedPairs:
    """n encoded pairs, each the concatenation of R regions, each region a slice of ``ids``.

    Attributes
    ----------
    ids, types : ndarray of shape (n_flat,)
        Flat token ids and their base type ids (``types`` is None when the tokenizer returns no token type ids).
    starts, lengths : ndarray of shape (n_pairs, R)
        Slice of ``ids`` of each region of each pair.
    type_offsets : ndarray of shape (R,)
        Added to ``types`` in each region (the template's ``type_a`` / ``type_b`` for the text regions).
    """

    ids: np.ndarray
    types: np.ndarray | None
    starts: np.ndarray
    lengths: np.ndarray
    type_offsets: np.ndarray

    @property
    def pair_lengths(self) -> np.ndarray:
        """Tokens of each pair, shape (n_pairs,)."""
        return self.lengths.sum(axis=1)

    def batch(self, rows: np.ndarray, pad_id: int, *, left: bool = False) -> dict[str, np.ndarray]:
        """Padded ``input_ids``, ``token_type_ids`` (if any; padded with 0) and ``attention_mask`` of ``rows``.

        Returns int64 arrays of shape (len(rows), longest pair of ``rows``).
        """
        lengths = self.lengths[rows]  # (b, R)
        totals = lengths.sum(axis=1)
        width = int(totals.max())
        ends = np.cumsum(lengths, axis=1)
        positions = np.arange(width)[None, :] - ((width - totals)[:, None] if left else 0)  # (b, width)
        # Region of each position: the number of region ends at or before it (R = past the pair: padding).
        region = (positions[:, :, None] >= ends[:, None, :]).sum(axis=2)
        valid = (positions >= 0) & (region < lengths.shape[1])
        region = np.minimum(region, lengths.shape[1] - 1)
        begin = np.take_along_axis(ends - lengths, region, axis=1)
        source = np.where(valid, np.take_along_axis(self.starts[rows], region, axis=1) + positions - begin, 0)
        out = {"input_ids": np.where(valid, self.ids[source], pad_id)}
        if self.types is not None:
            out["token_type_ids"] = np.where(valid, self.types[source] + self.type_offsets[region], 0)
        out["attention_mask"] = valid.astype(np.int64)
        return out

    def pair(self, row: int) -> tuple[list[int], list[int] | None]:
        """Ids and token type ids (None if the tokenizer returns none) of one pair, unpadded."""
        one = self.batch(np.array([row]), 0)
        types = one.get("token_type_ids")
        return one["input_ids"][0].tolist(), None if types is None else types[0].tolist()


def _flat(sequences: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Flat int64 array of the sequences, and each sequence's start and length in it."""
    lengths = np.fromiter(map(len, sequences), dtype=np.int64, count=len(sequences))
    flat = np.fromiter(itertools.chain.from_iterable(sequences), dtype=np.int64, count=int(lengths.sum()))
    return flat, np.cumsum(lengths) - lengths, lengths


def plain_encode(tokenizer: Any, premises: list[str], hypotheses: list[str]) -> EncodedPairs:
    """Every pair encoded by ``tokenizer(premises, hypotheses)`` (one region per pair): works with any tokenizer."""
    encoded = tokenizer(premises, hypotheses, truncation=False, padding=False)
    ids, starts, lengths = _flat(list(encoded["input_ids"]))
    types = _flat(list(encoded["token_type_ids"]))[0] if "token_type_ids" in encoded else None
    return EncodedPairs(ids, types, starts[:, None], lengths[:, None], np.zeros(1, dtype=np.int64))


def encode_texts(tokenizer: Any, texts: list[str]) -> list[list[int]]:
    """Ids of each text without special tokens, never truncated nor padded (fast tokenizers only)."""
    backend = tokenizer.backend_tokenizer
    clean = (backend.truncation is None and backend.padding is None
             and getattr(backend, "encode_special_tokens", False) == bool(getattr(tokenizer, "split_special_tokens",
                                                                                  False)))
    if not clean:
        # The backend keeps the truncation / padding of the wrapper's last call: let the wrapper set them.
        encoded = tokenizer(texts, add_special_tokens=False, truncation=False, padding=False,
                            return_attention_mask=False, return_token_type_ids=False)
        return list(encoded["input_ids"])
    # encode_batch_fast (tokenizers >= 0.20) skips the character offsets, which nothing here needs.
    encode = getattr(backend, "encode_batch_fast", backend.encode_batch)
    return [encoding.ids for encoding in encode(texts, add_special_tokens=False)]


def template_encode(tokenizer: Any, template: PairTemplate, premises: list[str],
                    hypotheses: list[str]) -> EncodedPairs:
    """Pairs assembled from the distinct texts, each encoded once (5 regions: prefix, a, middle, b, suffix)."""
    index: dict[str, int] = {}
    n = len(premises)
    a = np.fromiter((index.setdefault(text, len(index)) for text in premises), dtype=np.int64, count=n)
    b = np.fromiter((index.setdefault(text, len(index)) for text in hypotheses), dtype=np.int64, count=n)
    text_ids, text_starts, text_lengths = _flat(encode_texts(tokenizer, list(index)))
    specials = np.array(template.prefix + template.middle + template.suffix, dtype=np.int64)
    special_types = np.array(template.prefix_types + template.middle_types + template.suffix_types, dtype=np.int64)
    n_prefix, n_middle, n_special = len(template.prefix), len(template.middle), len(specials)
    starts = np.stack([np.zeros(n, dtype=np.int64), n_special + text_starts[a], np.full(n, n_prefix),
                       n_special + text_starts[b], np.full(n, n_prefix + n_middle)], axis=1)
    lengths = np.stack([np.full(n, n_prefix), text_lengths[a], np.full(n, n_middle), text_lengths[b],
                        np.full(n, n_special - n_prefix - n_middle)], axis=1)
    types = np.concatenate([special_types, np.zeros(len(text_ids), dtype=np.int64)]) if template.has_types else None
    offsets = np.array([0, template.type_a, 0, template.type_b, 0], dtype=np.int64)
    return EncodedPairs(np.concatenate([specials, text_ids]), types, starts, lengths, offsets)


def _templates_of(ids: list[int], types: list[int], a: list[int], b: list[int]) -> set[tuple]:
    """Every split of one probe pair's encoding into specials + a + specials + b + specials."""
    n_special = len(ids) - len(a) - len(b)
    found = set()
    for p in range(n_special + 1):
        for m in range(n_special - p + 1):
            middle = p + len(a)
            end_b = middle + m + len(b)
            if ids[p:middle] != a or ids[middle + m : end_b] != b:
                continue
            types_a, types_b = set(types[p:middle]), set(types[middle + m : end_b])
            if len(types_a) != 1 or len(types_b) != 1:
                continue
            found.add((tuple(ids[:p]), tuple(types[:p]), types_a.pop(), tuple(ids[middle : middle + m]),
                       tuple(types[middle : middle + m]), types_b.pop(), tuple(ids[end_b:]), tuple(types[end_b:])))
    return found


def infer_pair_template(tokenizer: Any) -> PairTemplate | None:
    """The pair layout of a fast tokenizer, read off probe pairs; None if it is not one consistent template."""
    if not getattr(tokenizer, "is_fast", False) or getattr(tokenizer, "backend_tokenizer", None) is None:
        return None
    try:
        encoded = tokenizer([a for a, _ in _PROBES], [b for _, b in _PROBES], truncation=False, padding=False)
        texts = encode_texts(tokenizer, [text for pair in _PROBES for text in pair])
        has_types = "token_type_ids" in encoded
        candidates = None
        for k, ids in enumerate(encoded["input_ids"]):
            a, b = list(texts[2 * k]), list(texts[2 * k + 1])
            ids = list(ids)
            types = list(encoded["token_type_ids"][k]) if has_types else [0] * len(ids)
            if not a or not b or len(ids) < len(a) + len(b):
                return None
            found = _templates_of(ids, types, a, b)
            candidates = found if candidates is None else candidates & found
    except Exception:  # any surprise from a tokenizer means "use the plain pair encoding"
        return None
    if not candidates or len(candidates) != 1:
        return None
    prefix, prefix_types, type_a, middle, middle_types, type_b, suffix, suffix_types = candidates.pop()
    return PairTemplate(prefix, prefix_types, type_a, middle, middle_types, type_b, suffix, suffix_types, has_types)


def matches_tokenizer(tokenizer: Any, encoded: EncodedPairs, rows: Sequence[int], premises: Sequence[str],
                      hypotheses: Sequence[str]) -> bool:
    """Whether the assembled ``rows`` equal ``tokenizer(premise, hypothesis)`` exactly (ids and token types)."""
    rows = list(rows)
    direct = tokenizer([premises[r] for r in rows], [hypotheses[r] for r in rows], truncation=False, padding=False)
    for k, row in enumerate(rows):
        ids, types = encoded.pair(row)
        if ids != list(direct["input_ids"][k]):
            return False
        if ("token_type_ids" in direct) != (types is not None):
            return False
        if types is not None and types != list(direct["token_type_ids"][k]):
            return False
    return True
