"""Differential tests of much_metric.segmentation against much-segmenter 0.3.0 and 0.2.1 (PyPI), on real tokenizers.

The full Mu-SHROOM run is in test_segmenter_parity.py, the real-time segmenter in test_segmenter_incremental.py.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from much_dataset.stopwords import PUNCTUATION
from much_metric.segmentation import SegmenterInputError, segment, segment_many
from much_metric.segmentation import _batch as _segmenter_batch
from much_metric.segmentation import _spans as _segmenter_spans
from much_metric.segmentation import _words as _segmenter_words
from tests import assets

TOKENIZERS = assets.TOKENIZER_NAMES
COMPATS = ("0.3.0", "0.2.1")

# The cases the issue names: EOS present/absent (added per test), empty string, emoji and accents split across
# tokens, newlines, "U.S.", contractions, guillemets; plus quotes, ellipses, CJK and RTL punctuation.
EDGE_TEXTS = [
    "",
    " ",
    "\n\n",
    "Hello",
    "Hello ",
    "Paris is the capital of France.",
    "The U.S. is a country. It has 50 states.",
    "I don't think it's true, isn't it? They'll see; we can't.",
    "« Le Québec » est une province du Canada… Voilà !",
    "Der Fluss fließt durch München und Köln; Straße.",
    "¿Dónde está el niño? ¡Aquí!",
    "Party 🎉🎉 time 👩‍👩‍👧 with naïve café crème.",
    "First line.\nSecond line\n\n- item one\n- item two.",
    'He said "yes" and \'no\' -- then left...',
    "東京は日本の首都です。人口は約1400万人です。",
    "الرياض، عاصمة السعودية؟ نعم؛",
    "Value: 3.14, 2,000 and 1:30 (approx.) [see] {x} <y>.",
    "Mr. Smith went to Washington D.C. in 1999.",
    "cannot gonna 'tis wanna stop.",
    "The end .",
    "\ufffd replacement char \ufffd",
]


def outcome(function, *args, **kwargs):
    """The result, or ``("raises", type)`` -- so that an input the reference rejects must be rejected too."""
    try:
        return function(*args, **kwargs)
    except (ValueError, IndexError) as error:
        return ("raises", type(error))


def assert_same(reference, ours, context):
    if isinstance(reference, tuple):
        assert isinstance(ours, tuple), f"reference raised {reference[1].__name__}, ours returned {ours}: {context}"
        return
    assert ours == reference, context


@pytest.fixture(scope="module")
def references():
    return assets.reference_segmenters()


def _generations(tokenizer, text):
    """``text`` without EOS, with EOS (as MUCH outputs have it), with two EOS and with a later-listed marker."""
    eos = tokenizer.decode(tokenizer.eos_token_id)
    yield text, None
    yield text + eos, tokenizer.eos_token_id
    yield text + eos + eos, None
    yield "<end_of_turn>" + text + eos + "<|eot_id|>", None


@pytest.mark.parametrize("name", TOKENIZERS)
def test_edge_cases_match_reference(name, references):
    tokenizer = assets.tokenizer(name)
    checked = 0
    for text in EDGE_TEXTS:
        for generation, eos_id in _generations(tokenizer, text):
            if eos_id is not None:  # the MUCH layout: the model's own ids with EOS appended
                variants = [tokenizer.encode(text, add_special_tokens=False) + [eos_id]]
            else:
                variants = [tokenizer.encode(generation, add_special_tokens=False)]
            for token_ids in [None, *variants]:
                for compat in COMPATS:
                    expected = outcome(references[compat], generation, tokenizer, token_ids)
                    got = outcome(segment, generation, tokenizer, token_ids, compat=compat)
                    assert_same(expected, got, (name, compat, generation, token_ids))
                    checked += 1
    assert checked == len(EDGE_TEXTS) * 4 * 2 * 2


TEXT_ALPHABET = st.sampled_from(
    [" ", "  ", "\n", "\n\n", ".", ",", "!", "?", ";", ":", "'", '"', "''", "``", "«", "»", "…", "(", ")", "-", "--",
     "the", "The", "and", "of", "le", "la", "der", "die", "el", "y", "U.S.", "Dr.", "don't", "can't", "it's",
     "Paris", "France", "capital", "1999", "3.14", "é", "ß", "ñ", "🎉", "👩‍👧", "東京", "。", "、", "，", "¿", "¡",
     "\ufffd", "Québec", "naïve", "x", "A", "'tis", "cannot", "gonna", "\t", "\u00a0", "...", "<|eot_id|>",
     "<end_of_turn>", "<|im_end|>", "<", ">", "n't", "'s", "``x''"]
)
TEXTS = st.lists(TEXT_ALPHABET, max_size=25).map("".join)


# Raw characters that exercise Treebank's rules (quotes, contractions, end-of-text punctuation, odd whitespace).
RAW_TEXTS = st.lists(st.sampled_from(
    list(" \n\t\u00a0\u2028\x1c.,;:!?'\"`()[]{}<>-_&@#$%…«»“”¿¡。aAnTtsSlLdDmMrR1é🎉")
    + ["can", "not", "'t", "is", "was", "gon", "na", "wan", "--", "...", "''", "``", "<|eot_id|>"]
), max_size=30).map("".join)


def _nltk_spans(text):
    try:
        return list(_segmenter_words.treebank().span_tokenize(text))
    except Exception as error:  # noqa: BLE001 -- whatever nltk raises, ours must raise too
        return ("raises", type(error))


def _our_spans(text):
    try:
        return [(a, b) for a, b, _, _ in _segmenter_words.words(text)]
    except Exception as error:  # noqa: BLE001
        return ("raises", type(error))


@settings(max_examples=300, deadline=None)
@given(texts=st.lists(RAW_TEXTS | TEXTS, min_size=1, max_size=4))
def test_piecewise_treebank_words_equal_nltk(texts):
    """The cached piecewise tokenization equals nltk's span_tokenize on the whole text (cold and warm cache,
    and after the batch engine filled the cache)."""
    _segmenter_words.forget_pieces()
    expected = [_nltk_spans(text) for text in texts]
    assert [_our_spans(text) for text in texts] == expected  # cold: one Treebank call per text
    assert [_our_spans(text) for text in texts] == expected  # warm: cache hits
    _segmenter_words.forget_pieces()
    _segmenter_batch._Words(texts, np.zeros(len(texts), dtype=np.int64))
    assert [_our_spans(text) for text in texts] == expected  # batch-filled cache


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(RAW_TEXTS | TEXTS, min_size=1, max_size=5), with_eos=st.booleans())
def test_segment_many_matches_reference(references, texts, with_eos):
    tokenizer = assets.llama3_tokenizer()
    generations = [text + ("<|eot_id|>" if with_eos else "") for text in texts]
    ids = [tokenizer.encode(generation, add_special_tokens=False) or None for generation in generations]
    expected = [outcome(references["0.3.0"], g, tokenizer, i) for g, i in zip(generations, ids, strict=True)]
    _segmenter_words.forget_pieces()
    if any(isinstance(result, tuple) for result in expected):
        with pytest.raises((ValueError, IndexError, RuntimeError)):
            segment_many(generations, tokenizer, ids)
    else:
        assert segment_many(generations, tokenizer, ids) == expected


def test_segment_many_validates():
    tokenizer = assets.llama3_tokenizer()
    with pytest.raises(ValueError, match="token_ids has 1 entries for 2 generations"):
        segment_many(["a", "b"], tokenizer, [[1]])
    with pytest.raises(TypeError, match="generations"):
        segment_many(["a", None], tokenizer)


@pytest.mark.parametrize("name", ["llama3", "gemma3"])
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=TEXTS, with_eos=st.booleans())
def test_random_text_matches_reference(name, references, text, with_eos):
    tokenizer = assets.tokenizer(name)
    generation = text + (tokenizer.decode(tokenizer.eos_token_id) if with_eos else "")
    ids = tokenizer.encode(generation, add_special_tokens=False)
    for token_ids in (None, ids):
        for compat in COMPATS:
            expected = outcome(references[compat], generation, tokenizer, token_ids)
            got = outcome(segment, generation, tokenizer, token_ids, compat=compat)
            assert_same(expected, got, (compat, generation, token_ids))


@functools.cache
def _byte_table(tokenizer) -> tuple:
    """Per byte value, the id of the single-byte token spelling it, or None: ``<0xNN>`` (SentencePiece byte
    fallback) or the GPT-2 byte-level symbol."""
    vocab = tokenizer.get_vocab()
    table = []
    for byte in range(256):
        token = f"<0x{byte:02X}>" if f"<0x{byte:02X}>" in vocab else _byte_level_symbol(byte)
        table.append(vocab.get(token))
    return tuple(table)


def _byte_token_ids(tokenizer, data: bytes) -> list[int]:
    """Ids of single-byte tokens spelling ``data`` (bytes without such a token are left out)."""
    table = _byte_table(tokenizer)
    return [table[byte] for byte in data if table[byte] is not None]


def _byte_level_symbol(byte: int) -> str:
    # GPT-2 byte-to-unicode table: printable latin-1 bytes map to themselves, the others to 256 + rank.
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(
        range(ord("®"), ord("ÿ") + 1))
    if byte in printable:
        return chr(byte)
    return chr(256 + [b for b in range(256) if b not in printable].index(byte))


@st.composite
def token_sequences(draw, tokenizer):
    """Token ids mixing ordinary ids, special ids and characters spelled byte by byte (split multi-byte chars)."""
    size = len(tokenizer)
    special = sorted(tokenizer.all_special_ids)
    pieces = draw(st.lists(st.one_of(
        st.integers(0, size - 1).map(lambda i: [i]),
        st.sampled_from(special).map(lambda i: [i]),
        st.text(min_size=1, max_size=3).map(lambda s: _byte_token_ids(tokenizer, s.encode("utf-8"))),
        st.text(min_size=1, max_size=2).map(lambda s: _byte_token_ids(tokenizer, s.encode("utf-8"))[:-1]),
    ), min_size=1, max_size=10))
    return [token_id for piece in pieces for token_id in piece] or [0]


@pytest.mark.parametrize("name", TOKENIZERS)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_precomputed_spans_equal_prefix_decoding(name, data):
    """The linear span computation equals the reference's definition on arbitrary ids (incl. split characters)."""
    tokenizer = assets.tokenizer(name)
    ids = data.draw(token_sequences(tokenizer))
    expected = [len(tokenizer.decode(ids[: i + 1])) for i in range(len(ids))]
    assert _segmenter_spans.token_ends_precomputed(ids, tokenizer) == expected


@pytest.mark.parametrize("name", TOKENIZERS)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_token_ids_match_reference(name, references, data):
    tokenizer = assets.tokenizer(name)
    ids = data.draw(token_sequences(tokenizer))
    generation = tokenizer.decode(ids)
    for compat in COMPATS:
        expected = outcome(references[compat], generation, tokenizer, ids)
        got = outcome(segment, generation, tokenizer, ids, compat=compat)
        assert_same(expected, got, (compat, generation, ids))
        if not isinstance(got, tuple):  # claims partition the tokens, in order
            assert [i for claim in got for i in claim] == list(range(len(ids)))
            assert all(claim for claim in got)


class _CountingBackend:
    """Proxy of a tokenizers backend that counts how many token ids all decode calls received."""

    def __init__(self, backend):
        self._backend = backend
        self.decoded_ids = 0

    def decode(self, ids, skip_special_tokens=False):
        self.decoded_ids += len(ids)
        return self._backend.decode(ids, skip_special_tokens=skip_special_tokens)

    def decode_batch(self, batch, skip_special_tokens=False):
        self.decoded_ids += sum(len(ids) for ids in batch)
        return self._backend.decode_batch(batch, skip_special_tokens=skip_special_tokens)

    def __getattr__(self, name):
        return getattr(self._backend, name)


@pytest.mark.parametrize("name", TOKENIZERS)
def test_precomputed_path_is_linear(name, monkeypatch):
    """Decoding work grows linearly: at most 4 decoded ids per token on a long text full of split characters."""
    tokenizer = assets.tokenizer(name)
    prof = _segmenter_spans.profile(tokenizer)
    assert prof.linear, f"{name} should take the linear path"
    counting = _CountingBackend(prof.backend)
    monkeypatch.setattr(prof, "backend", counting)
    monkeypatch.setattr(prof, "_single", {})
    text = "Le café « naïve » 🎉 à Zürich, 東京。 " * 200
    ids = tokenizer.encode(text, add_special_tokens=False)
    generation = tokenizer.decode(ids)
    claims = segment(generation, tokenizer, ids)
    assert [i for claim in claims for i in claim] == list(range(len(ids)))
    assert len(ids) > 2000
    assert counting.decoded_ids <= 4 * len(ids)


def test_precomputed_length_mismatch_is_an_error():
    tokenizer = assets.llama3_tokenizer()
    ids = tokenizer.encode("Paris is nice.", add_special_tokens=False)
    with pytest.raises(SegmenterInputError, match="decode to 14 characters but generation has 15"):
        segment("Paris is nice!!", tokenizer, ids)
    with pytest.raises(SegmenterInputError, match="empty"):
        segment("Paris", tokenizer, [])


def test_invalid_parameters():
    tokenizer = assets.llama3_tokenizer()
    with pytest.raises(ValueError, match="compat"):
        segment("Paris", tokenizer, compat="0.4")
    with pytest.raises(TypeError, match="generation must be a str"):
        segment(b"Paris", tokenizer)


def test_compat_021_rejects_wordless_generation():
    tokenizer = assets.llama3_tokenizer()
    with pytest.raises(SegmenterInputError, match="0.2.1 cannot segment"):
        segment("   ", tokenizer, compat="0.2.1")
    assert segment("   ", tokenizer) == [[0]]


def test_final_punctuation_merge_differs_between_versions():
    tokenizer = assets.llama3_tokenizer()
    # Another model's end marker then blank text (as in Mu-SHROOM): the last claim '>  \n' joins the previous one.
    text = "The league (BUAFL).<|im_end|>  \n"
    ids = tokenizer.encode(text, add_special_tokens=False)
    old = segment(text, tokenizer, ids, compat="0.2.1")
    new = segment(text, tokenizer, ids, compat="0.3.0")
    assert tokenizer.decode([ids[i] for i in old[-1]]).strip() in PUNCTUATION
    assert len(new) == len(old) - 1
    assert new[:-1] == old[:-2] and new[-1] == old[-2] + old[-1]


def test_slow_path_tokenizer_still_matches(references):
    """A tokenizer whose decode is overridden takes the exact prefix-decoding path (no linear shortcut)."""
    base = assets.gemma3_tokenizer()

    class Wrapped:
        def __init__(self, inner):
            self._inner = inner
            self.eos_token_id = inner.eos_token_id

        def decode(self, ids, **kwargs):
            return self._inner.decode(ids, **kwargs)

        def encode(self, text, **kwargs):
            return self._inner.encode(text, **kwargs)

        def __call__(self, text, **kwargs):
            return self._inner(text, **kwargs)

    wrapped = Wrapped(base)
    assert not _segmenter_spans.profile(wrapped).linear
    generation = "Le « café » 🎉 est bon." + base.decode(base.eos_token_id)
    ids = base.encode(generation, add_special_tokens=False)
    assert segment(generation, wrapped, ids) == references["0.3.0"](generation, base, ids)


PLAIN_WORDS = st.one_of(
    st.text(alphabet=st.characters(categories=("L", "N")), min_size=1, max_size=12),
    # Contractions in any case, with letters that case-fold onto theirs (dotless i, Kelvin sign, long s ...).
    st.builds("".join, st.lists(st.sampled_from(list("cannotgimmegonnagottalemmewannaCANNOTGIMMEıİKſ")),
                                min_size=4, max_size=7)),
    st.sampled_from(["cannot", "Gonna", "wanna", "GOTTA", "lemme", "gimme", "gımme", "gİmme", "can", "not", "Paris"]),
)


@settings(max_examples=400, deadline=None)
@given(words=st.lists(st.tuples(PLAIN_WORDS, st.integers(min_value=0, max_value=3)), min_size=1, max_size=6))
def test_plain_word_fast_path_equals_treebank(words):
    """A piece the fast path calls plain has exactly the words nltk finds in it (no nltk call needed)."""
    from much_metric.segmentation._treebank import nltk_treebank
    from much_metric.segmentation._words import plain_words

    pieces = [word + " " * spaces for word, spaces in words]
    for piece, fast in zip(pieces, plain_words(pieces), strict=True):
        if fast is None:
            continue  # left to nltk
        assert [(a, b) for a, b, _, _ in fast] == list(nltk_treebank().span_tokenize(piece)), piece
        if piece.endswith(" "):  # as a piece inside a text: followed by more words
            assert [(a, b) for a, b, _, _ in fast] == list(nltk_treebank().span_tokenize(piece + "x"))[:-1], piece


def test_plain_word_fast_path_leaves_contractions_to_nltk():
    from much_metric.segmentation._words import plain_words

    pieces = ["cannot ", "gımme", "Paris ", "WANNA  ", "gonnas "]
    assert [found is None for found in plain_words(pieces)] == [True, True, False, True, False]
