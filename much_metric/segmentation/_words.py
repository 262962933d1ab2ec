"""Claim-start characters of a generation: Treebank words, stopword rule, EOS cut (much-segmenter's first half).

A claim starts at a word that is a stopword (or punctuation, or follows a word ending with ".") when the previous
word was not; words from the first EOS/EOT marker on are cut off. The result always ends with ``len(generation)``.

Words are nltk's ``TreebankWordTokenizer.span_tokenize``, computed piecewise with a cache: the text is cut before
every non-space character that follows a literal space, and each piece is tokenized on its own (all pieces but the
last with a sentinel word appended, so that no end-of-text rule fires). This gives the same words as tokenizing the
whole text because every Treebank rule that looks across a piece boundary sees a literal space there -- exactly what
it sees at the start of a string, where Treebank pads with a space -- and the end-of-text rules (final period,
final ``:``/``,``) can only fire in the last piece. Quote tokens are paired with the text's quotes piece by piece;
if a piece does not pair them one to one (or anything else fails) the whole text is tokenized by nltk in one go,
which then decides. Pieces repeat across generations (they are about one word each), so most are cache hits.

Pieces made of one alphanumeric word need no Treebank call at all (:func:`plain_words`), and Treebank itself runs
nltk's rules on the standard ``re`` engine where that is exact (:mod:`much_metric.segmentation._treebank`).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from much_dataset.stopwords import PUNCTUATION, SEGMENTER_STOPWORDS
from much_metric.segmentation._treebank import nltk_treebank, split_by_contractions, tokenizer_for

__all__: list[str] = []

#: Versions of much-segmenter whose output can be reproduced.
COMPAT_VERSIONS: tuple[str, ...] = ("0.3.0", "0.2.1")


class SegmenterInputError(ValueError, IndexError):
    """Input that much-segmenter itself rejects (it raises ``IndexError`` or ``ValueError`` there)."""


#: nltk's own tokenizer (the definition of the words); :func:`tokenizer_for` gives an exact, faster equivalent.
treebank = nltk_treebank

PIECE_START = re.compile(r"(?<= )(?=\S)")
_QUOTES = re.compile(r"``|'{2}|\"")
_QUOTE_TOKENS = frozenset(['"', "``", "''"])
_SENTINEL = "x"


#: (piece, is_last_piece) -> its words as (start, stop, is_stopword, ends_with_period), relative to the piece.
_PIECE_CACHE: dict[tuple[str, bool], tuple[tuple[int, int, bool, bool], ...]] = {}
_PIECE_CACHE_LIMIT = 1 << 18


def cached_piece_words(piece: str, is_last: bool) -> tuple[tuple[int, int, bool, bool], ...] | None:
    """The Treebank words already found for a text piece (None if not seen yet); see :func:`remember_pieces`."""
    return _PIECE_CACHE.get((piece, is_last))


def forget_pieces() -> None:
    """Empty the piece cache (benchmarks measure cold passes; tests check it changes no result)."""
    _PIECE_CACHE.clear()


def tokenize_pieces(pieces: list[str], last_is_final: bool) -> list[tuple[tuple[int, int, bool, bool], ...]] | None:
    """Words of each piece, from ONE Treebank call on the pieces laid end to end (a sentinel word closes the
    text unless the last piece is the generation's last). None when a piece does not pair its quote tokens with
    its own quotes, a token crosses pieces, or nltk fails: the caller then tokenizes the whole text with nltk."""
    if not last_is_final:
        pieces = [*pieces, _SENTINEL]  # then exactly one word must lie in this extra piece, the sentinel itself
    text = "".join(pieces)
    bounds = [0]
    for piece in pieces:
        bounds.append(bounds[-1] + len(piece))
    try:
        tokens = tokenizer_for(text).tokenize(text)
        quoted = '"' in text or "''" in text or "``" in text
        if quoted:
            matched = _QUOTES.findall(text)
            if sum(token in _QUOTE_TOKENS for token in tokens) != len(matched):
                return None
            quotes = iter(matched)
            tokens = [next(quotes) if token in _QUOTE_TOKENS else token for token in tokens]
    except Exception:  # nltk on the whole text raises (or not) with the reference's own error
        return None
    stop_flags, dot_flags = word_flags(tokens)
    # nltk's align_tokens (each token is found from the end of the previous one), fused with the piece lookup.
    per_piece: list[list[tuple[int, int, bool, bool]]] = [[] for _ in pieces]
    k, point, limit = 0, 0, bounds[1]
    for token, is_stop, ends_dot in zip(tokens, stop_flags, dot_flags, strict=True):
        start = text.find(token, point)
        if start < 0:
            return None  # align_tokens raises: the caller lets nltk decide on the whole text
        point = start + len(token)
        while start >= limit:
            k += 1
            limit = bounds[k + 1]
        if point > limit:
            return None
        per_piece[k].append((start - bounds[k], point - bounds[k], is_stop, ends_dot))
    if quoted:
        for piece, found in zip(pieces, per_piece, strict=True):
            # A piece without quote characters can hold no quote token.
            if ('"' in piece or "''" in piece or "``" in piece) and sum(
                piece[a:b] in _QUOTE_TOKENS for a, b, _, _ in found
            ) != len(_QUOTES.findall(piece)):
                return None
    if not last_is_final:
        if [(a, b) for a, b, _, _ in per_piece.pop()] != [(0, len(_SENTINEL))]:
            return None
    return [tuple(found) for found in per_piece]


_PLAIN_PIECE = re.compile(r"([^\W_]+) *")  # [^\W_] is exactly str.isalnum(), character by character


def plain_words(pieces: list[str]) -> list[tuple[tuple[int, int, bool, bool], ...] | None]:
    """The words of each piece made of one alphanumeric word and literal spaces, without running Treebank; None
    for the other pieces.

    Every Treebank rule but the contraction rules needs a punctuation mark, a quote, a bracket or whitespace other
    than a space, so such a piece is exactly one word unless a contraction rule splits it ("cannot"), which
    nltk's own contraction patterns decide. Most pieces are plain words, so this skips most regex passes.
    """
    matches = list(map(_PLAIN_PIECE.fullmatch, pieces))
    candidates = [k for k, match in enumerate(matches) if match is not None]
    for k in split_by_contractions([matches[k][1] for k in candidates]):
        matches[candidates[k]] = None
    return [
        None if match is None else ((0, match.end(1), match[1].lower() in SEGMENTER_STOPWORDS, False),)
        for match in matches
    ]


def _pieces_words(generation: str) -> tuple[list[str], list]:
    """The pieces of ``generation`` and the words of each (cached per piece)."""
    pieces = PIECE_START.split(generation)
    last = len(pieces) - 1
    found = [plain or _PIECE_CACHE.get((piece, k == last)) for k, (piece, plain) in enumerate(
        zip(pieces, plain_words(pieces), strict=True))]
    missing = [k for k, words_ in enumerate(found) if words_ is None]
    if missing:
        last_missing = missing[-1] == last
        fresh = tokenize_pieces([pieces[k] for k in missing], last_is_final=last_missing)
        if fresh is None:
            spans = list(tokenizer_for(generation).span_tokenize(generation))
            stop, dot = word_flags([generation[a:b] for a, b in spans])
            return [generation], [[(a, b, s, d) for (a, b), s, d in zip(spans, stop, dot, strict=True)]]
        remember_pieces([((pieces[k], k == last), words_) for k, words_ in zip(missing, fresh, strict=True)])
        for k, words_ in zip(missing, fresh, strict=True):
            found[k] = words_
    return pieces, found


def remember_pieces(entries: list[tuple[tuple[str, bool], tuple]]) -> None:
    """Add ``((piece, is_last_piece), words)`` entries to the piece cache, emptying it first when it would
    outgrow its limit."""
    if len(_PIECE_CACHE) + len(entries) > _PIECE_CACHE_LIMIT:
        _PIECE_CACHE.clear()
    _PIECE_CACHE.update(entries)


# A last piece whose words could depend on being at the very end of the text: Treebank's end-of-text rules split a
# final period (possibly followed by closing brackets/quotes) and a final ":" or ","; a final "'" is split only when
# a space follows it. Other last pieces have the same words with a space and more text after them.
END_SENSITIVE = re.compile(r"(?:[:,']|\.[\]\)}>\"']*)\s*$")
#: Characters of pieces per Treebank call when many pieces are tokenized together.
BATCH_CHARS = 20_000


def words(generation: str) -> list[tuple[int, int, bool, bool]]:
    """Treebank words of ``generation`` as ``(start, stop, is_stopword, ends_with_period)``, start/stop in chars."""
    result: list[tuple[int, int, bool, bool]] = []
    offset = 0
    for piece, piece_words in zip(*_pieces_words(generation), strict=True):
        result.extend((a + offset, b + offset, s, d) for a, b, s, d in piece_words)
        offset += len(piece)
    return result


def eos_index(generation: str, eos_strings: list[str]) -> int:
    """Index of the first listed EOS string occurring in ``generation`` (list order, not position), else its length."""
    for text in eos_strings:
        if text in generation:
            return generation.index(text)
    return len(generation)


def word_flags(words: list[str]) -> tuple[list[bool], list[bool]]:
    """Per word: ``(is_stopword_or_punctuation, ends_with_period)`` of ``word.lower().strip()``."""
    lowered = [word.lower().strip() for word in words]
    # word[-1] as in the reference: a Treebank word is never empty or whitespace-only.
    return [word in SEGMENTER_STOPWORDS for word in lowered], [word[-1] == "." for word in lowered]


def claim_starts(generation: str, eos_strings: list[str], *, compat: str) -> list[int]:
    """Sorted character positions where a new claim starts, ending with ``len(generation)`` (and EOS, if found)."""
    eos = eos_index(generation, eos_strings)
    starts = []
    previous, next_is_stop, reached_eos = False, False, False
    pieces, piece_words = _pieces_words(generation)
    offset = 0
    for piece, found in zip(pieces, piece_words, strict=True):
        for start, stop, is_stop, ends_dot in found:
            if stop + offset >= eos:  # words reaching EOS are cut; the first of them marks the EOS boundary
                reached_eos = True
                break
            is_stop = is_stop or next_is_stop
            if is_stop and not previous and start + offset != 0:
                starts.append(start + offset)
            previous, next_is_stop = is_stop, ends_dot
        if reached_eos:
            break
        offset += len(piece)
    if reached_eos and (compat == "0.2.1" or eos < len(generation)):
        starts.append(eos)
    return close_starts(starts, len(generation), compat=compat)


def close_starts(starts: list[int], length: int, *, compat: str) -> list[int]:
    """Append ``length`` as the last boundary unless it is already there (0.2.1 fails on an empty list, as it did)."""
    if not starts:
        if compat == "0.2.1":
            raise SegmenterInputError(
                "much-segmenter 0.2.1 cannot segment this generation: it finds no claim boundary (no stopword, "
                "no EOS and no word ending at the very end; e.g. an empty text or one ending with a space) and "
                "raises IndexError"
            )
        return [length]
    if starts[-1] != length:
        starts.append(length)
    return starts


def joins_previous_claim(last: list[int], ids, decode: Callable[[list[int]], str], eos_ids) -> bool:
    """0.3.0's final merge rule: the last claim joins the previous one when it decodes to punctuation (or blank),
    unless it is the EOS token alone. ``decode`` is ``tokenizer.decode`` or an exact equivalent."""
    if len(last) == 1 and ids[last[0]] in eos_ids:
        return False
    return decode([ids[k] for k in last]).strip() in PUNCTUATION
