"""Building blocks of the segmenter that benchmarks and tools time or reset on their own
(``benchmarks/bench_segmenter.py``): the per-tokenizer profile cache (:func:`profile`, :func:`forget_profile`), the
per-piece Treebank word cache (:func:`forget_pieces`), the text pieces (:data:`PIECE_START`, :func:`plain_words`)
and the two Treebank engines (:func:`tokenizer_for`: nltk's rules recompiled for the standard ``re`` engine where
they were checked, :func:`nltk_treebank`: nltk's own).

Not the user API (that is :mod:`much_metric.segmentation`'s ``__all__``): nothing here changes a claim.
"""

from much_metric.segmentation._spans import forget_profile, profile
from much_metric.segmentation._treebank import nltk_treebank, tokenizer_for
from much_metric.segmentation._words import PIECE_START, forget_pieces, plain_words

__all__ = ["PIECE_START", "forget_pieces", "forget_profile", "nltk_treebank", "plain_words", "profile",
           "tokenizer_for"]
