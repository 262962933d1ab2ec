"""Lexical support of a claim by a text: ROUGE-1 / ROUGE-L precision and named-entity overlap (the multilingual
detection seed's lexical metrics, section 2.2 and appendix B), as pure functions of strings.

* Words: lower-cased ``\\w+`` runs (Unicode), so the four MUCH languages split alike.
* ROUGE-1 precision: the share of the claim's words found in the other text (multiset overlap), stopwords removed
  first as the seed does (NLTK's lists of the four languages, :data:`much_dataset.stopwords.NLTK_STOPWORDS`); a claim
  made only of stopwords keeps them. ROUGE-L precision: LCS(claim, text) / claim words, stopwords kept.
* Named entities: by default a language-independent pattern (ours): runs of capitalised words that do not open a
  sentence, and numbers (years, dates, amounts). It misses lower-case entities and, in German, takes every noun for
  one. ``entities="spacy"`` uses spaCy's pipeline of the row's language (``en_core_web_sm``, ``fr_core_news_sm``,
  ``de_core_news_sm``, ``es_core_news_sm``; the seed's tagger) -- install spaCy and those models yourself; none is
  part of this package.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache

from much_dataset.stopwords import NLTK_STOPWORDS

__all__ = ["ENTITY_TAGGERS", "entities", "rouge1_precision", "rougel_precision", "words"]

ENTITY_TAGGERS = ("pattern", "spacy")
SPACY_MODELS = {"en": "en_core_web_sm", "fr": "fr_core_news_sm", "de": "de_core_news_sm", "es": "es_core_news_sm"}

_WORD = re.compile(r"\w+")
_CAPITALISED = re.compile(r"\b[^\W\d_][\w'’.-]*")
_NUMBER = re.compile(r"\d[\d.,:/-]*\d|\d")
_SENTENCE_START = re.compile(r"(?:^|[.!?:;]\s+|[\"«“(]\s*)$")


@lru_cache(maxsize=200_000)
def words(text: str) -> tuple[str, ...]:
    """Lower-cased word tokens of ``text``."""
    return tuple(_WORD.findall(text.lower()))


def _content(tokens: Sequence[str]) -> tuple[str, ...]:
    content = tuple(t for t in tokens if t not in NLTK_STOPWORDS)
    return content or tuple(tokens)


def rouge1_precision(claim: str, text: str) -> float:
    """Share of the claim's content words found in ``text`` (1.0 for a claim without words)."""
    mine = _content(words(claim))
    if not mine:
        return 1.0
    theirs = Counter(words(text))
    found = Counter(mine) & theirs
    return sum(found.values()) / len(mine)


def _lcs(a: Sequence[str], b: Sequence[str]) -> int:
    if not a or not b:
        return 0
    previous = [0] * (len(b) + 1)
    for x in a:
        current = [0]
        for j, y in enumerate(b):
            current.append(previous[j] + 1 if x == y else max(previous[j + 1], current[j]))
        previous = current
    return previous[-1]


def rougel_precision(claim: str, text: str) -> float:
    """LCS of the claim's and ``text``'s words over the claim's words (1.0 for a claim without words)."""
    mine = words(claim)
    if not mine:
        return 1.0
    return _lcs(mine, words(text)) / len(mine)


def best_rougel_precision(claim: str, texts: Sequence[str]) -> float:
    """max over ``texts`` of :func:`rougel_precision` (0.0 for none), pruned by the unigram bound LCS <= overlap."""
    mine = words(claim)
    if not mine:
        return 1.0
    counts = Counter(mine)
    bounds = sorted(((sum((counts & Counter(words(t))).values()), t) for t in texts), key=lambda b: -b[0])
    best = 0
    for bound, text in bounds:
        if bound <= best:
            break
        best = max(best, _lcs(mine, words(text)))
    return best / len(mine)


def _pattern_entities(text: str) -> frozenset[str]:
    found = {m.group(0) for m in _NUMBER.finditer(text)}
    run: list[str] = []
    run_end = 0
    for match in _CAPITALISED.finditer(text):
        token = match.group(0)
        if token[0].isupper() and not _SENTENCE_START.search(text[: match.start()]):
            if not (run and text[run_end : match.start()].strip() == ""):  # not adjacent: a new entity
                if run:
                    found.add(" ".join(run))
                run = []
            run.append(token)
            run_end = match.end()
        elif run:
            found.add(" ".join(run))
            run = []
    if run:
        found.add(" ".join(run))
    return frozenset(entity.casefold().strip(".,'’-") for entity in found if entity.strip(".,'’-"))


@lru_cache(maxsize=8)
def _spacy(language: str):
    try:
        import spacy
    except ImportError as error:
        raise ValueError("entities='spacy' needs spaCy (pip install spacy) and the model of each language "
                         f"({', '.join(SPACY_MODELS.values())})") from error
    model = SPACY_MODELS.get(language)
    if model is None:
        raise ValueError(f"no spaCy model is known for language {language!r} (known: {sorted(SPACY_MODELS)})")
    try:
        return spacy.load(model)
    except OSError as error:
        raise ValueError(f"spaCy model {model} is not installed (language {language})") from error


@lru_cache(maxsize=200_000)
def entities(text: str, tagger: str = "pattern", language: str = "en") -> frozenset[str]:
    """Case-folded named entities of ``text`` (see the module docstring for the taggers)."""
    if tagger == "pattern":
        return _pattern_entities(text)
    if tagger == "spacy":
        return frozenset(ent.text.casefold() for ent in _spacy(language)(text).ents)
    raise ValueError(f"entity tagger must be one of {ENTITY_TAGGERS}, got {tagger!r}")
