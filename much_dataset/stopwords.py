"""Stopword and punctuation sets shared by the claim segmenter and the metric.

The lists are NLTK's stopword corpus for the four MUCH languages (English, French, German, Spanish), vendored in
``much_dataset/data/stopwords/`` so that nothing is ever looked up in ``nltk.data`` or downloaded.

Two sets exist because the reference uses two:

* :data:`SEGMENTER_STOPWORDS` -- what ``much-segmenter`` treats as a claim-boundary word: the union of the four
  lists and :data:`PUNCTUATION` (docs/reference-behaviour.md#segmentation).
* :data:`EVALUATION_STOPWORDS` -- what the evaluation nulls at token level (docs/reference-behaviour.md#stopword-rule):
the segmenter set plus
  Treebank contraction pieces and quote tokens.

A token or word belongs to a set when ``text.lower().strip()`` is a member (see :func:`is_stopword`).
"""

from __future__ import annotations

import string
from importlib import resources

__all__ = [
    "LANGUAGES",
    "PUNCTUATION",
    "NLTK_STOPWORDS",
    "SEGMENTER_STOPWORDS",
    "EVALUATION_STOPWORDS",
    "is_stopword",
    "stopword_mask",
]

#: The four MUCH languages, as NLTK names its stopword lists.
LANGUAGES: tuple[str, ...] = ("english", "spanish", "french", "german")

#: ASCII punctuation, CJK/Arabic/Spanish/French punctuation, Treebank quote tokens, newline and the empty string.
PUNCTUATION: frozenset[str] = frozenset(string.punctuation) | frozenset(
    ["،", "؛", "؟", "，", "。", "、", "？", "！", "：", "；", "（", "）", "《", "》", "“", "”", "¿", "¡", "«", "»", "…",
     "''", "``", "\n", "", '""']
)


def _read_list(language: str) -> frozenset[str]:
    text = resources.files("much_dataset").joinpath("data", "stopwords", language).read_text(encoding="utf-8")
    # Exactly what nltk's WordListCorpusReader.words() returns: lines as they are, blank lines dropped.
    return frozenset(line for line in text.splitlines() if line.rstrip())


#: Union of NLTK's english, spanish, french and german stopword lists.
NLTK_STOPWORDS: frozenset[str] = frozenset().union(*(_read_list(lang) for lang in LANGUAGES))

#: Words that open a new claim in the segmenter (docs/reference-behaviour.md#segmentation, step 3).
SEGMENTER_STOPWORDS: frozenset[str] = NLTK_STOPWORDS | PUNCTUATION

#: Token strings whose score the evaluation nulls or excludes (docs/reference-behaviour.md#stopword-rule).
EVALUATION_STOPWORDS: frozenset[str] = SEGMENTER_STOPWORDS | frozenset(
    ["'s", "'re", "'ve", "'d", "'ll", "n't", "''", "``", '" "', '""']
)


def is_stopword(text: str, *, vocabulary: frozenset[str] = EVALUATION_STOPWORDS) -> bool:
    """Whether ``text`` (a word or one decoded token) is a stopword: ``text.lower().strip()`` in ``vocabulary``."""
    return text.lower().strip() in vocabulary


def stopword_mask(token_ids, tokenizer, *, vocabulary: frozenset[str] = EVALUATION_STOPWORDS):
    """Per token, whether that token **decoded alone** is a stopword (docs/reference-behaviour.md#stopword-rule).
    Returns a bool numpy array.

    ``tokenizer`` is any object with ``decode(list[int]) -> str`` (a Hugging Face tokenizer). Each distinct id is
    decoded once, so the cost is linear in the number of distinct ids.
    """
    import numpy as np

    ids = np.asarray(token_ids, dtype=np.int64).ravel()
    unique, inverse = np.unique(ids, return_inverse=True)
    flags = np.fromiter(
        (is_stopword(tokenizer.decode([int(token_id)]), vocabulary=vocabulary) for token_id in unique),
        dtype=bool,
        count=len(unique),
    )
    return flags[inverse]
