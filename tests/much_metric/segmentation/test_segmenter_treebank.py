"""nltk's Treebank rules on the standard-library engine: exactly nltk's output, or nltk's own tokenizer is used."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from much_metric.segmentation import _treebank as _segmenter_treebank
from much_metric.segmentation._treebank import nltk_treebank, tokenizer_for
from tests.much_metric.segmentation.test_segmenter import RAW_TEXTS, TEXTS

# Characters whose class differs between the engines (whitespace U+001C..U+001F for ``re`` only; digits of recent
# Unicode versions for ``regex`` only), next to the characters Treebank's rules use.
ENGINE_SENSITIVE = st.lists(st.sampled_from(
    ["\x1c", "\x1d", "\x1e", "\x1f", "\U00010d40", "\U00011f50", "\u0085", "\u00a0", "\u2028", "\u3000", "٣", "7",
     ",", ":", ".", " ", "\n", "'", '"', ")", "a", "x."]
), max_size=20).map("".join)


def _stdlib_only():
    fast, _ = _segmenter_treebank._stdlib_treebank()
    if fast is None:
        pytest.skip("the installed nltk already runs Treebank on the standard re engine")
    return fast


@settings(max_examples=400, deadline=None)
@given(text=RAW_TEXTS | TEXTS | ENGINE_SENSITIVE)
def test_tokenizer_for_equals_nltk(text):
    try:
        expected = nltk_treebank().tokenize(text)
    except Exception as error:  # noqa: BLE001 -- whatever nltk raises, ours must raise too
        with pytest.raises(type(error)):
            tokenizer_for(text).tokenize(text)
        return
    assert tokenizer_for(text).tokenize(text) == expected
    assert list(tokenizer_for(text).span_tokenize(text)) == list(nltk_treebank().span_tokenize(text))


@pytest.mark.parametrize("text", ["a,\U00010d40 b", "x.\x1c", "so:\U00011f50"])
def test_engine_differences_route_to_nltk(text):
    """The stdlib engine alone would differ on these texts; tokenizer_for hands them to nltk's own tokenizer."""
    fast = _stdlib_only()
    assert fast.tokenize(text) != nltk_treebank().tokenize(text)
    assert tokenizer_for(text) is nltk_treebank()


def test_ordinary_text_uses_the_stdlib_rules():
    fast = _stdlib_only()
    text = "Le Québec, « naïve » (1999)... can't -- it's 3.14, isn't it? 東京。"
    assert tokenizer_for(text) is fast
    assert fast.tokenize(text) == nltk_treebank().tokenize(text)
    assert all(isinstance(regexp, re.Pattern) for regexp, _ in fast.PUNCTUATION)


class TimedPattern:  # the name nltk.redos uses; flags other than UNICODE/VERSION0 are not recompiled
    def __init__(self, pattern: str, flags: int) -> None:
        self.pattern, self.flags = pattern, flags


def test_recompile_rules(monkeypatch):
    import regex

    # TimedPattern is recognised only on the nltk versions we tested (on others nltk's own tokenizer runs, see
    # test_untested_nltk_recompiles_nothing); this test is about the recompiling itself, on any installed nltk.
    monkeypatch.setattr(_segmenter_treebank, "tested_version", lambda package: True)
    classes: set[str] = set()
    rules = [(TimedPattern(r"([:,])([^\d])", regex.UNICODE | regex.VERSION0), r" \1 \2")]
    converted = _segmenter_treebank._recompile(rules, classes)
    assert converted[0][0].pattern == r"([:,])([^\d])" and isinstance(converted[0][0], re.Pattern)
    assert classes == {"d"}
    plain = [(re.compile("x"), "y")]
    assert _segmenter_treebank._recompile(plain, set()) is plain  # nltk < 3.10: nothing to do
    with pytest.raises(_segmenter_treebank._Unsupported):
        _segmenter_treebank._recompile(TimedPattern("a", regex.IGNORECASE), set())


def test_untested_nltk_recompiles_nothing(monkeypatch):
    import regex

    monkeypatch.setattr(_segmenter_treebank, "tested_version", lambda package: False)
    rules = [(TimedPattern(r"([:,])([^\d])", regex.UNICODE | regex.VERSION0), r" \1 \2")]
    assert _segmenter_treebank._recompile(rules, set()) is rules


def test_no_word_is_assumed_plain_when_the_contraction_rules_are_not_stdlib(monkeypatch):
    from much_metric.segmentation._words import plain_words

    assert plain_words(["Paris ", "cannot "]) == [((0, 5, False, False),), None]
    monkeypatch.setattr(_segmenter_treebank, "_contraction_rules", lambda: None)
    assert plain_words(["Paris ", "cannot "]) == [None, None]
