"""nltk's ``TreebankWordTokenizer``, with its own rules, run by the standard-library regex engine when that is exact.

Since nltk 3.10 every Treebank rule is a ``nltk.redos.TimedPattern``: the third-party ``regex`` engine plus a
wall-clock timeout per call. That guard costs more than the matching itself on short texts, and Treebank's rules
are fixed patterns without nested quantifiers, which is what nltk ran with the standard ``re`` up to 3.9.x (the
version that built MUCH). :func:`tokenizer_for` returns a subclass of nltk's tokenizer whose class-level rules are
the same pattern sources compiled by ``re``, so nltk's own ``tokenize`` method runs unchanged.

The two engines agree on these patterns except where their character classes differ: the Unicode version behind
``\\d`` and ``\\s`` (e.g. U+001C..U+001F are whitespace for ``re`` only; digits added in recent Unicode versions
are digits for ``regex`` only). :func:`tokenizer_for` therefore checks each distinct character of the text against
both engines, for the classes the patterns use, and returns nltk's own tokenizer for a text with any character on
which they disagree. The check is cached per character. With a pre-3.10 nltk (plain ``re`` patterns) or rules
compiled with flags we do not recognise, nltk's own tokenizer is always used.
"""

from __future__ import annotations

import functools
import re
from bisect import bisect_right

from much_metric._compat import sre_parser, tested_version

__all__: list[str] = []

# Class escapes whose meaning depends on the engine's Unicode tables; \b and \B depend on \w.
_CLASS_ESCAPE = re.compile(r"\\([dDsSwWbB])")
_CLASS_OF_ESCAPE = {"d": "d", "s": "s", "w": "w", "b": "w"}


class _Unsupported(Exception):
    """A rule we cannot recompile faithfully: keep nltk's own tokenizer."""


@functools.lru_cache(maxsize=1)
def nltk_treebank():
    """nltk's ``TreebankWordTokenizer`` (imported lazily: nltk is slow to import and needs no data for this)."""
    from nltk.tokenize.treebank import TreebankWordTokenizer

    return TreebankWordTokenizer()


def _is_timed(value) -> bool:
    # nltk's TimedPattern is private: recognised only on the nltk versions we tested (see much_metric._compat);
    # on any other version nothing is recompiled and nltk's own tokenizer runs (the public, slower path).
    return (tested_version("nltk") and type(value).__name__ == "TimedPattern" and hasattr(value, "pattern")
            and hasattr(value, "flags"))


def _recompile(value, classes: set[str]):
    """``value`` with every ``TimedPattern`` inside it (lists and tuples are walked) compiled by ``re``."""
    if _is_timed(value):
        import regex

        if value.flags & ~(regex.UNICODE | regex.VERSION0):
            raise _Unsupported(f"rule {value.pattern!r} has flags {value.flags:#x}")
        classes.update(_CLASS_OF_ESCAPE[letter.lower()] for letter in _CLASS_ESCAPE.findall(value.pattern))
        return re.compile(value.pattern)
    if isinstance(value, list | tuple):
        items = [_recompile(item, classes) for item in value]
        if any(new is not old for new, old in zip(items, value, strict=True)):
            return type(value)(items)
    return value


class _EngineCheck:
    """Per character: do ``re`` and ``regex`` agree on the character classes the recompiled rules use?"""

    def __init__(self, classes: set[str]) -> None:
        import regex

        self._pairs = [(re.compile(rf"\{c}"), regex.compile(rf"\{c}")) for c in sorted(classes)]
        self._agrees: dict[str, bool] = {}

    def exact_for(self, text: str) -> bool:
        agrees = self._agrees
        for char in set(text).difference(agrees):
            agrees[char] = all(
                (ours.match(char) is None) == (theirs.match(char) is None) for ours, theirs in self._pairs
            )
        return all(agrees[char] for char in set(text))


@functools.lru_cache(maxsize=1)
def _stdlib_treebank():
    """``(tokenizer, engine_check)``, or ``(None, None)`` when nltk's own tokenizer must always be used."""
    base = type(nltk_treebank())
    classes: set[str] = set()
    try:
        overrides = {
            name: converted
            for name, value in vars(base).items()
            if not name.startswith("__") and (converted := _recompile(value, classes)) is not value
        }
    except (_Unsupported, re.error):
        return None, None
    if not overrides:  # nltk < 3.10: its rules already are ``re`` patterns
        return None, None
    subclass = type("StdlibTreebankWordTokenizer", (base,), overrides)
    return subclass(), _EngineCheck(classes)


def tokenizer_for(text: str):
    """A Treebank tokenizer giving exactly nltk's result on ``text``: the ``re`` one when that is exact, else nltk's."""
    fast, check = _stdlib_treebank()
    if fast is not None and check.exact_for(text):
        return fast
    return nltk_treebank()


# A rule that matches whole words only: it starts at a word boundary (or at the space before a word) and ends at
# one (or before whitespace).
_WHOLE_WORD_RULE = re.compile(r"^(?:\(\?i\))?(?:\\b| ).*(?:\\b|\(\?=\\s\))$")


@functools.lru_cache(maxsize=1)
def _contraction_rules() -> tuple[list[re.Pattern], tuple[int, int]] | None:
    """nltk's contraction rules (the only Treebank rules that can split a purely alphanumeric word), combined
    into one pattern when they all carry the same leading ``(?i)``, and the word lengths they can match: a rule
    match has a fixed range of widths, and a whole-word rule can only match a word whose length is in it.

    None when nltk does not run them on the standard ``re`` engine (nltk 3.10 does): then no word is assumed plain.
    """
    rules = [*type(nltk_treebank()).CONTRACTIONS2, *type(nltk_treebank()).CONTRACTIONS3]
    if not all(isinstance(rule, re.Pattern) for rule in rules):
        return None
    sources = [rule.pattern for rule in rules]
    if all(isinstance(source, str) and source.startswith("(?i)") for source in sources):
        compiled = [re.compile("|".join(f"(?:{source[4:]})" for source in sources), re.IGNORECASE)]
    else:
        compiled = rules
    lengths = (0, 1 << 30)
    parser = sre_parser()
    if parser is not None and all(isinstance(source, str) and _WHOLE_WORD_RULE.match(source) for source in sources):
        widths = [parser.parse(rule.pattern, rule.flags).getwidth() for rule in compiled]
        # A match may include the space before the word, so the word can be one character shorter.
        lengths = (min(low for low, _ in widths) - 1, max(high for _, high in widths))
    return compiled, lengths


def split_by_contractions(words: list[str]) -> set[int]:
    """Indices of the alphanumeric ``words`` that Treebank's contraction rules split ("cannot", "gImme", ...).

    The words are laid out one space apart, as a plain word is followed by a space in the text (or by Treebank's
    end padding), and every rule is run once over that text. The rules match whole words with Unicode case
    folding, which is why a word list ("cannot", "gimme", ...) would not be exact: "gımme" (dotless i) is split
    too. Only words whose length a rule can match are looked at.
    """
    known = _contraction_rules()
    if known is None:
        return set(range(len(words)))
    rules, (shortest, longest) = known
    checked = [k for k, word in enumerate(words) if shortest <= len(word) <= longest]
    joined = " " + " ".join(words[k] for k in checked) + " "
    starts = [0] * len(checked)
    position = 1
    for i, k in enumerate(checked):
        starts[i] = position
        position += len(words[k]) + 1
    found: set[int] = set()
    for rule in rules:
        for match in rule.finditer(joined):
            found.add(checked[bisect_right(starts, match.end() - 1) - 1])  # a character inside the match
    return found
