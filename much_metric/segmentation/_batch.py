"""Claim segmentation of many generations at once, as flat numpy arrays (the engine behind ``segment_many``).

Same rules as :func:`much_metric.segmentation.segment`, applied to all generations together so that the per-word and
per-token work runs in numpy instead of Python loops:

* **Words.** Each distinct piece (see :mod:`much_metric.segmentation._words`) is resolved once: plain words without
  nltk, the others in a few large Treebank calls. The words of every piece occurrence are then laid out as flat
  arrays (start, stop, is_stopword, ends_with_period) in one global coordinate system where generation ``g`` starts
  at ``gen_start[g]``; a one-character gap separates generations so positions never collide.
* **Claim starts** follow from shifted comparisons of those arrays within each generation; the EOS cut is a mask.
* **Token ends** are cumulative sums of single-token decoded lengths where the decoder is concatenative (the
  ``_segmenter_spans`` anchor argument), else the exact windowed computation for that generation.
* **Token assignment** counts the claim starts before each token end (``searchsorted``): token ``i`` opens a claim
  when that count grows by one. The reference's recurrence lets a token consume at most one start; when a token
  passes two starts at once the generation is assigned by the sequential loop instead.

Generations this engine does not handle exactly (a piece Treebank must see in its whole text, no tokens, a token
sequence that does not decode to the text, 0.2.1 without any boundary, a tokenizer without the linear decode path)
come back as None and are segmented one by one by :func:`~much_metric.segmentation.segment`, which also raises its
usual errors for them.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain

import numpy as np

from much_metric.segmentation._spans import profile, token_ends_precomputed
from much_metric.segmentation._words import (
    BATCH_CHARS,
    END_SENSITIVE,
    PIECE_START,
    cached_piece_words,
    eos_index,
    joins_previous_claim,
    plain_words,
    remember_pieces,
    tokenize_pieces,
)

__all__: list[str] = []

Claims = list[list[int]]


def assign_tokens(ends: Sequence[int], starts: Sequence[int]) -> Claims:
    """Split token indices into claims: token ``i >= 1`` opens a claim when ``ends[i]`` passes the next start.

    This is the reference's recurrence (each token consumes at most one claim start, so a token spanning two starts
    leaves the second for the following token); it runs once over the tokens.
    """
    if not len(ends):
        return []
    first = [0]
    pointer, n_starts = 0, len(starts)
    for i in range(1, len(ends)):
        if pointer < n_starts and ends[i] > starts[pointer]:
            first.append(i)
            pointer += 1
    first.append(len(ends))
    return [list(range(a, b)) for a, b in zip(first[:-1], first[1:], strict=True)]


def _piece_words(keys: list[str | tuple[str, bool]]) -> list[tuple | None]:
    """Words of each distinct piece (None when only the whole text can tell), caching them.

    A key is the piece itself, or ``(piece, True)`` for the last piece of a generation (end-of-text rules).
    """
    pieces = [key if type(key) is str else key[0] for key in keys]
    found: list[tuple | None] = plain_words(pieces)
    batch: list[tuple[int, str]] = []
    alone: list[int] = []
    for u, key in enumerate(keys):
        if found[u] is not None:
            continue
        is_last = type(key) is not str
        piece = pieces[u]
        words = cached_piece_words(piece, is_last)
        if words is not None:
            found[u] = words
        elif not is_last:
            batch.append((u, piece))
        elif END_SENSITIVE.search(piece):
            alone.append(u)  # end-of-text rules may apply: tokenize it as the end of a text
        else:
            batch.append((u, piece + " "))  # followed by a literal space, like every other piece in the batch
    start = 0
    while start < len(batch):
        stop, size = start, 0
        while stop < len(batch) and size < BATCH_CHARS:
            size += len(batch[stop][1])
            stop += 1
        for u, words in _tokenize_chunk(batch[start:stop]):
            found[u] = words
        start = stop
    for u in alone:
        fresh = tokenize_pieces([pieces[u]], last_is_final=True)
        if fresh is not None:
            found[u] = fresh[0]
    computed = [u for u, _ in batch] + alone
    remember_pieces([((pieces[u], type(keys[u]) is not str), found[u]) for u in computed if found[u] is not None])
    return found


def _tokenize_chunk(chunk: list[tuple[int, str]]) -> list[tuple[int, tuple]]:
    """``(u, words)`` for the pieces of ``chunk`` whose words one Treebank call can give. A chunk that cannot be
    split back into pieces is halved until the pieces responsible are alone (and left out)."""
    fresh = tokenize_pieces([text for _, text in chunk], last_is_final=False)
    if fresh is not None:
        return [(u, words) for (u, _), words in zip(chunk, fresh, strict=True)]
    if len(chunk) == 1:
        return []
    middle = len(chunk) // 2
    return _tokenize_chunk(chunk[:middle]) + _tokenize_chunk(chunk[middle:])


class _Words:
    """Flat word arrays of a batch (global positions) and the generations whose words are unknown."""

    def __init__(self, generations: Sequence[str], gen_start: np.ndarray) -> None:
        pieces: list[str] = []
        per_generation = np.empty(len(generations), dtype=np.int64)
        for g, text in enumerate(generations):
            split = PIECE_START.split(text)
            per_generation[g] = len(split)
            pieces += split
        keys: list[str | tuple[str, bool]] = list(pieces)
        for k in (np.cumsum(per_generation) - 1).tolist():
            keys[k] = (pieces[k], True)
        distinct = list(dict.fromkeys(keys))
        index = {key: u for u, key in enumerate(distinct)}
        uid = np.fromiter(map(index.__getitem__, keys), dtype=np.int64, count=len(keys))
        words = _piece_words(distinct)
        unknown = np.zeros(len(words), dtype=bool)
        unknown[[u for u, found in enumerate(words) if found is None]] = True
        gen_of_piece = np.repeat(np.arange(len(generations)), per_generation)
        self.unknown_generations = np.unique(gen_of_piece[unknown[uid]])

        words = [() if found is None else found for found in words]
        counts = np.fromiter(map(len, words), dtype=np.int64, count=len(words))
        table = np.fromiter(chain.from_iterable(chain.from_iterable(words)), dtype=np.int64).reshape(-1, 4)
        first_of_distinct = np.cumsum(counts) - counts
        occurrence_counts = counts[uid]
        occurrence = np.repeat(np.arange(len(keys)), occurrence_counts)
        within = np.arange(len(occurrence)) - np.repeat(np.cumsum(occurrence_counts) - occurrence_counts,
                                                        occurrence_counts)
        row = table[first_of_distinct[uid][occurrence] + within]
        piece_lengths = np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces))
        # Generation g's pieces tile it, so a piece's global start is its generation's start plus the lengths of
        # the pieces before it in that generation.
        local = np.cumsum(piece_lengths) - piece_lengths
        piece_start = local - np.repeat(local[np.cumsum(per_generation) - per_generation], per_generation)
        piece_start += gen_start[gen_of_piece]
        self.generation = gen_of_piece[occurrence]
        self.start = piece_start[occurrence] + row[:, 0]
        self.stop = piece_start[occurrence] + row[:, 1]
        self.is_stopword = row[:, 2].astype(bool)
        self.ends_with_period = row[:, 3].astype(bool)


def _claim_starts(words: _Words, generations, gen_start, lengths, eos_strings, compat) -> np.ndarray:
    """Sorted global claim-start positions of all generations, each generation closed by its end position."""
    n = len(generations)
    eos = gen_start + np.fromiter((eos_index(text, eos_strings) for text in generations), dtype=np.int64, count=n)
    kept = words.stop < eos[words.generation]
    reached_eos = np.bincount(words.generation[~kept], minlength=n) > 0
    generation = words.generation[kept]
    same = np.r_[False, generation[1:] == generation[:-1]]
    is_stop = words.is_stopword[kept] | (np.r_[False, words.ends_with_period[kept][:-1]] & same)
    previous = np.r_[False, is_stop[:-1]] & same
    start = words.start[kept]
    opens = is_stop & ~previous & (start != gen_start[generation])
    with_eos = reached_eos & ((eos - gen_start < lengths) if compat == "0.3.0" else True)
    # np.unique sorts and drops an end position equal to an EOS start (0.2.1, EOS not found).
    return np.unique(np.concatenate([start[opens], eos[with_eos], gen_start + lengths]))


def _token_ends(generations, tokenizer, ids: list[list[int] | None], prof) -> tuple[list, list]:
    """Per generation: its token ids and token end characters (relative), or None to leave it to ``segment``."""
    n = len(generations)
    ends: list = [None] * n
    offsets = [g for g in range(n) if ids[g] is None]
    if offsets:
        encoded = tokenizer([generations[g] for g in offsets], add_special_tokens=False, return_offsets_mapping=True)
        for g, token_ids, mapping in zip(offsets, encoded["input_ids"], encoded["offset_mapping"], strict=True):
            ids[g] = list(token_ids)
            ends[g] = np.fromiter((end for _, end in mapping), dtype=np.int64, count=len(mapping))
    given = [g for g in range(n) if ends[g] is None and len(ids[g])]
    if not given or not prof.linear:
        for g in given:  # the reference's definition, one generation at a time
            ends[g] = np.asarray(token_ends_precomputed([int(t) for t in ids[g]], tokenizer, prof), dtype=np.int64)
        return ids, ends
    try:
        flat = np.fromiter(chain.from_iterable(ids[g] for g in given), dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        return ids, ends  # not integer ids: let segment() report it
    if flat.min() < 0:
        return ids, ends  # let segment() report what the tokenizer makes of it
    # Ids are vocabulary indices: a presence table is cheaper than sorting to find the distinct ones.
    present = np.zeros(int(flat.max()) + 1, dtype=bool)
    present[flat] = True
    distinct = np.flatnonzero(present).tolist()
    prof.singles(distinct)
    length = np.zeros(len(present), dtype=np.int64)
    length[distinct] = np.fromiter(map(prof._length.__getitem__, distinct), dtype=np.int64, count=len(distinct))
    dirty = np.zeros(len(present), dtype=bool)
    dirty[list(prof._dirty.intersection(distinct))] = True
    cumulative = np.cumsum(length[flat])
    counts = np.fromiter((len(ids[g]) for g in given), dtype=np.int64, count=len(given))
    stops = np.cumsum(counts)
    any_dirty = np.add.reduceat(dirty[flat], stops - counts) > 0
    for k, g in enumerate(given):
        if any_dirty[k]:
            ends[g] = np.asarray(token_ends_precomputed([int(t) for t in ids[g]], tokenizer, prof), dtype=np.int64)
        else:
            before = cumulative[stops[k] - counts[k] - 1] if stops[k] > counts[k] else 0
            ends[g] = cumulative[stops[k] - counts[k] : stops[k]] - before
    return ids, ends


def claims_many(
    generations: Sequence[str], tokenizer, token_ids: Sequence[Sequence[int] | None], compat: str
) -> list[Claims | None]:
    """Claims of each generation, or None for a generation to segment on its own (see the module docstring)."""
    return _claims_many(generations, tokenizer, token_ids, compat)


def _claims_many(
    generations: Sequence[str], tokenizer, token_ids: Sequence[Sequence[int] | None], compat: str
) -> list[Claims | None]:
    n = len(generations)
    prof = profile(tokenizer)
    lengths = np.fromiter(map(len, generations), dtype=np.int64, count=n)
    gen_start = np.cumsum(lengths + 1) - (lengths + 1)
    words = _Words(generations, gen_start)
    ids, ends = _token_ends(generations, tokenizer, list(token_ids), prof)
    decodes_to_text = (e is not None and len(e) > 0 and e[-1] == size for e, size in zip(ends, lengths, strict=True))
    usable = np.fromiter(decodes_to_text, dtype=bool, count=n)
    usable[words.unknown_generations] = False
    starts = _claim_starts(words, generations, gen_start, lengths, prof.eos_strings, compat)
    per_generation = np.searchsorted(starts, gen_start + lengths, side="right") - np.searchsorted(starts, gen_start)
    if compat == "0.2.1":
        usable &= per_generation > 1  # only the end position: 0.2.1 has no boundary and fails
    chosen = np.flatnonzero(usable)
    results: list[Claims | None] = [None] * n
    if not len(chosen):
        return results
    counts = np.fromiter((len(ends[g]) for g in chosen), dtype=np.int64, count=len(chosen))
    token_end = np.concatenate([ends[g] for g in chosen]) + np.repeat(gen_start[chosen], counts)
    assigned = assign_many(token_end, counts, starts, gen_start[chosen], gen_start[chosen] + lengths[chosen] + 1)
    single, dirty = prof._single, prof._dirty
    for g, claims in zip(chosen.tolist(), assigned, strict=True):
        if compat == "0.3.0" and len(claims) > 1:
            one = ids[g]
            # Clean single-token decodes concatenate to the decode of the claim (the ``_segmenter_spans`` anchors).
            clean = prof.linear and all(one[i] in single and one[i] not in dirty for i in claims[-1])
            decode = (lambda seq: "".join(map(single.__getitem__, seq))) if clean else tokenizer.decode
            if joins_previous_claim(claims[-1], one, decode, prof.eos_ids):
                last = claims.pop()
                claims[-1] = claims[-1] + last
        results[g] = claims
    return results


def assign_many(
    token_end: np.ndarray, counts: np.ndarray, starts: np.ndarray, gen_start: np.ndarray, gen_stop: np.ndarray
) -> list[Claims]:
    """:func:`assign_tokens` of many generations at once, in global coordinates.

    Parameters
    ----------
    token_end : ndarray of shape (sum(counts),)
        End position of every token, generations laid end to end.
    counts : ndarray of shape (n,)
        Tokens per generation (each >= 1).
    starts : ndarray
        Sorted claim starts of all generations (global positions).
    gen_start, gen_stop : ndarray of shape (n,)
        Generation ``g``'s claim starts and token ends lie in ``[gen_start[g], gen_stop[g])``; the intervals are
        disjoint and increasing.
    """
    before = np.searchsorted(starts, token_end, side="left")  # claim starts strictly before each token end
    first = np.cumsum(counts) - counts
    # Starts consumed before token i: before[i - 1], or, for a generation's token 1, the starts of earlier
    # generations (token 0 never opens a claim and consumes nothing).
    consumed = np.r_[0, before[:-1]]
    has_second = counts > 1
    consumed[first[has_second] + 1] = np.searchsorted(starts, gen_start[has_second])
    step = before - consumed
    step[first] = 0
    # The reference consumes at most one start per token; past two starts at once, only its loop is exact.
    irregular = np.add.reduceat((step < 0) | (step > 1), first) > 0
    opening = np.flatnonzero(step == 1)
    cut = np.searchsorted(opening, np.r_[first, len(token_end)]).tolist()
    opening = opening.tolist()
    indices = list(range(int(counts.max()) + 1))  # slicing one list beats building a range per claim
    claims_of: list[Claims] = []
    for k, (offset, count) in enumerate(zip(first.tolist(), counts.tolist(), strict=True)):
        if irregular[k]:
            low, high = np.searchsorted(starts, [gen_start[k], gen_stop[k]])
            ends = (token_end[offset : offset + count] - gen_start[k]).tolist()
            claims_of.append(assign_tokens(ends, (starts[low:high] - gen_start[k]).tolist()))
            continue
        bounds = [0] + [i - offset for i in opening[cut[k] : cut[k + 1]]] + [count]
        claims_of.append([indices[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)])
    return claims_of
