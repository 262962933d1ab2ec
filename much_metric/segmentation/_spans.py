"""Character spans of LLM tokens, as ``much-segmenter`` defines them, in linear time.

The reference defines the end of token ``i`` as ``len(tokenizer.decode(tokens[:i + 1]))`` and decodes every prefix,
which is quadratic. Here each position is decoded once, inside a short *window* that starts at an **anchor**: a token
position ``c`` where the decoded prefix is known to be *concatenative*, i.e.::

    decode(tokens[:n]) == decode(tokens[:c]) + decode(tokens[c:n])      for every n >= c          (*)

so that ``end[i] = len(decode(tokens[:c])) + len(decode(tokens[c:i + 1]))`` exactly. Why (*) holds, per decoder
(``tokenizer.backend_tokenizer.decoder``, the only decoders the fast path accepts):

* ``ByteLevel`` (Llama-3, Tekken, SmolLM2): the decoder concatenates the tokens' bytes and decodes them with
  ``String::from_utf8_lossy``. UTF-8 is self-synchronising: after a complete, valid character the lossy decoder is
  back in its initial state, so (*) holds whenever ``decode(tokens[:c])`` does not end with U+FFFD (a prefix ending
  mid-character always ends with U+FFFD; a genuine U+FFFD in the text only makes us keep the window open longer).
* ``Sequence`` of ``Replace`` / ``ByteFallback`` / ``Fuse`` (Gemma-3): ``Replace`` acts on each token alone;
  ``ByteFallback`` decodes each maximal *run* of ``<0xNN>`` byte tokens as a whole (one U+FFFD per byte token when
  the run is not valid UTF-8, e.g. ``[E2 82 AC E2]`` gives four U+FFFD, not ``"€"`` plus one). So (*) holds at ``c``
  when, in addition, ``tokens[c - 1]`` and ``tokens[c]`` are not both byte tokens.

Any other tokenizer (another decoder, ``clean_up_tokenization_spaces=True``, a tokenizer whose ``decode`` is
overridden, a slow tokenizer) takes the reference's own prefix-decoding definition: exact, but quadratic.
The differential tests (``tests/much_metric/test_segmenter_parity.py``) check the result against ``much-segmenter``
on real tokenizers, real outputs and random token sequences (split multi-byte characters included).
"""

from __future__ import annotations

import json
import re
import weakref
from bisect import bisect_right
from itertools import accumulate

from much_metric._cache import BoundedCache
from much_metric.segmentation.decoding import stock_backend

__all__: list[str] = []

_REPLACEMENT = "\ufffd"
_BYTE_TOKEN = re.compile(r"<0x[0-9A-Fa-f]{2}>")
# Decoder steps that keep (*) true at the anchors described in the module docstring.
_PER_TOKEN_STEPS = frozenset({"Replace", "ByteFallback", "Fuse"})
#: Markers that ``much-segmenter`` treats as end of turn when they encode to a single token (after eos_token_id).
EOT_MARKERS: tuple[str, ...] = ("<end_of_turn>", "<|eot_id|>", "<EOT>", "<end>")


class _Profile:
    """Per-tokenizer facts, computed once: EOS ids/strings, fast-path eligibility, single-token decode cache."""

    def __init__(self, tokenizer) -> None:
        self.vocabulary_size = _vocabulary_size(tokenizer)
        self.eos_ids = _known_eos_or_eot(tokenizer)
        # The reference decodes each id on its own (``decode(int)``) and looks the string up in the generation.
        self.eos_strings = [tokenizer.decode(token_id) for token_id in self.eos_ids]
        # The markers that would end a turn if the tokenizer learnt them as one token (add_special_tokens): only a
        # text holding one of them can segment differently under a grown vocabulary.
        self.unlearnt_markers = tuple(marker for marker in EOT_MARKERS if marker not in self.eos_strings)
        self.backend, self.byte_fallback = _fast_backend(tokenizer)
        self._single: dict[int, str] = {}
        self._byte: dict[int, bool] = {}
        # Ids whose single decode ends with U+FFFD or that the decoder may fuse with a neighbour: only sequences
        # containing one of them need windows; the others are a plain running sum of single-token lengths.
        self._length: dict[int, int] = {}
        self._dirty: set[int] = set()

    def current_for(self, tokenizer, text: str | None) -> bool:
        """Whether this profile still holds for ``tokenizer`` on ``text``. The vocabulary's size (about 5 us: the
        Rust backend counts its added tokens) is asked only when it can matter: for ``text`` None (a segmenter being
        set up, a batch), or a text holding an end-of-turn marker the profile does not know as one. On every other
        text a grown vocabulary gives the same claims, so the per-text hot path asks nothing."""
        if text is not None and not any(marker in text for marker in self.unlearnt_markers):
            return True
        return _vocabulary_size(tokenizer) == self.vocabulary_size

    @property
    def linear(self) -> bool:
        return self.backend is not None

    def singles(self, ids: list[int]) -> list[str]:
        """``decode([id])`` for each id (cached; unknown ids decoded in one batch call)."""
        cache = self._single
        missing = list(set(ids).difference(cache))
        if missing:
            texts = self.backend.decode_batch([[token_id] for token_id in missing], skip_special_tokens=False)
            cache.update(zip(missing, texts, strict=True))
            self._length.update(zip(missing, map(len, texts), strict=True))
            self._dirty.update(t for t, text in zip(missing, texts, strict=True) if text.endswith(_REPLACEMENT))
            if self.byte_fallback:
                for token_id in missing:
                    token = self.backend.id_to_token(token_id)
                    self._byte[token_id] = token is not None and _BYTE_TOKEN.fullmatch(token) is not None
                    if self._byte[token_id]:
                        self._dirty.add(token_id)
        return [cache[token_id] for token_id in ids]

    def joinable(self, token_id: int) -> bool:
        """Whether the decoder may fuse this token with a neighbour of the same kind (a ByteFallback byte token)."""
        return self.byte_fallback and self._byte.get(token_id, False)

    def decode(self, ids: list[int]) -> str:
        return self.backend.decode(ids, skip_special_tokens=False)


_PROFILES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
#: Tokenizers that cannot be weakly referenced: kept alive with their profile, keyed by identity, the oldest first out.
_UNWEAKABLE: BoundedCache[int, tuple[object, _Profile]] = BoundedCache(8)


def _vocabulary_size(tokenizer) -> int:
    try:
        return len(tokenizer)
    except TypeError:
        return -1


def profile(tokenizer, text: str | None = None) -> _Profile:
    """The cached :class:`_Profile` of ``tokenizer`` (like the reference's ``lru_cache`` on the tokenizer), rebuilt
    when the tokenizer's vocabulary has grown since (``add_special_tokens`` may add an end-of-turn marker).
    ``text``: the one generation about to be segmented, so that the growth check runs only when it can change that
    text's claims (:meth:`_Profile.current_for`); None checks always (once per batch or segmenter)."""
    try:
        found = _PROFILES.get(tokenizer)
        if found is None or not found.current_for(tokenizer, text):
            found = _PROFILES[tokenizer] = _Profile(tokenizer)
        return found
    except TypeError:  # not weak-referenceable / not hashable: keep it alive with its profile, keyed by identity
        entry = _UNWEAKABLE.get_or_compute(
            id(tokenizer), lambda: (tokenizer, _Profile(tokenizer)),
            valid=lambda found: found[0] is tokenizer and found[1].current_for(tokenizer, text))
        return entry[1]


def _known_eos_or_eot(tokenizer) -> list[int]:
    """``eos_token_id`` then each of :data:`EOT_MARKERS` that encodes to one token; duplicates dropped, order kept."""
    found = []
    if tokenizer.eos_token_id is not None:
        found.append(tokenizer.eos_token_id)
    for marker in EOT_MARKERS:
        encoded = tokenizer.encode(marker, add_special_tokens=False)
        if len(encoded) == 1:
            found.append(encoded[0])
    return list(dict.fromkeys(found))


def _fast_backend(tokenizer):
    """``(backend, byte_fallback)`` when ``tokenizer.decode`` is provably the backend's decoder and that decoder
    keeps the anchor property of the module docstring, else ``(None, False)``."""
    backend = stock_backend(tokenizer)
    if backend is None:
        return None, False
    decoder = backend.decoder
    if decoder is None:
        return None, False
    spec = json.loads(backend.to_str()).get("decoder") or {}  # the public serialisation of the whole pipeline
    if spec.get("type") == "ByteLevel":
        return backend, False
    if spec.get("type") == "Sequence":
        steps = [step.get("type") for step in spec.get("decoders", [])]
        if steps and set(steps) <= _PER_TOKEN_STEPS:
            return backend, "ByteFallback" in steps
    return None, False


def token_ends_offsets(generation: str, tokenizer) -> tuple[list[int], list[int]]:
    """Offset-mapping path: ``(token_ids, end_char_of_each_token)`` from the tokenizer's own offsets."""
    encoded = tokenizer(generation, add_special_tokens=False, return_offsets_mapping=True)
    return list(encoded["input_ids"]), [int(end) for _, end in encoded["offset_mapping"]]


def token_ends_precomputed(ids: list[int], tokenizer, prof: _Profile | None = None) -> list[int]:
    """``[len(tokenizer.decode(ids[:i + 1])) for i in range(len(ids))]``, in linear time when the decoder allows
    (``prof``: the tokenizer's profile when the caller has it already)."""
    prof = profile(tokenizer) if prof is None else prof
    if not prof.linear:
        return [len(tokenizer.decode(ids[: i + 1])) for i in range(len(ids))]
    singles = prof.singles(ids)
    if prof._dirty.isdisjoint(ids):
        # Every prefix ends on a clean anchor, so each token adds exactly its own decoded length.
        length = prof._length
        return list(accumulate(length[token_id] for token_id in ids))
    ends = [0] * len(ids)
    anchor, anchor_len = 0, 0
    last = len(ids) - 1
    for i, text in enumerate(singles):
        if anchor == i:
            window_text = text  # decode(ids[anchor:i + 1]) is the cached single-token decode
        else:
            window_text = prof.decode(ids[anchor : i + 1])
        end = anchor_len + len(window_text)
        ends[i] = end
        if not window_text.endswith(_REPLACEMENT) and not (
            i < last and prof.joinable(ids[i]) and prof.joinable(ids[i + 1])
        ):
            anchor, anchor_len = i + 1, end
    return ends


class IncrementalSpans:
    """Token ends computed one token at a time (same anchors as :func:`token_ends_precomputed`).

    Because the ByteFallback anchor rule looks one token ahead, the anchor after token ``i`` is confirmed when token
    ``i + 1`` arrives; ``end`` of token ``i`` itself is final as soon as it is pushed. ``text`` is the decoded
    prefix (its last characters may still change while a multi-byte character is incomplete).
    """

    def __init__(self, tokenizer) -> None:
        self._tokenizer = tokenizer
        self._prof = profile(tokenizer)
        self.ids: list[int] = []
        self.ends: list[int] = []
        self._pieces: list[str] = []  # decoded text before the anchor, one piece per anchor move
        self._piece_starts: list[int] = []
        self._anchor = 0
        self._anchor_len = 0
        self._window_text = ""
        self._pending_clean = False  # window ended clean, anchor move waits for the next token (ByteFallback)

    def push(self, token_id: int) -> int:
        """Add one token; return its end character (final)."""
        ids = self.ids
        ids.append(token_id)
        i = len(ids) - 1
        prof = self._prof
        if not prof.linear:
            text = self._tokenizer.decode(ids)
            self._window_text = text
            self.ends.append(len(text))
            return len(text)
        single = prof.singles([token_id])[0]
        if self._pending_clean and not (prof.joinable(ids[i - 1]) and prof.joinable(token_id)):
            self._add_piece(self._window_text)
            self._anchor, self._anchor_len = i, self.ends[-1]
        self._window_text = single if self._anchor == i else prof.decode(ids[self._anchor :])
        end = self._anchor_len + len(self._window_text)
        self.ends.append(end)
        self._pending_clean = not self._window_text.endswith(_REPLACEMENT)
        if self._pending_clean and not prof.joinable(token_id):
            # No look-ahead needed: the anchor may move right away.
            self._add_piece(self._window_text)
            self._anchor, self._anchor_len, self._window_text = i + 1, end, ""
            self._pending_clean = False
        return end

    def _add_piece(self, piece: str) -> None:
        self._piece_starts.append(self._anchor_len)
        self._pieces.append(piece)

    def text_from(self, start: int) -> str:
        """The decoded prefix from character ``start`` on; costs the length of that tail, not of the prefix."""
        k = max(bisect_right(self._piece_starts, start) - 1, 0)
        head = "".join(self._pieces[k:]) + self._window_text
        offset = self._piece_starts[k] if self._pieces else 0
        return head[start - offset :]

    @property
    def stable_length(self) -> int:
        """Characters of the decoded prefix that can no longer change (everything before the anchor)."""
        return self._anchor_len

    @property
    def text(self) -> str:
        """The whole decoded prefix."""
        return self.text_from(0)


def forget_profile(tokenizer) -> None:
    """Drop the cached :class:`_Profile` of ``tokenizer`` (its single-token decodes included), so that the next
    :func:`profile` call builds it again. Benchmarks use it to time a cold pass; no result depends on it. (A tokenizer
    that cannot be weakly referenced keeps its profile until it leaves the bounded identity table.)"""
    _PROFILES.pop(tokenizer, None)
