"""One rule for every stored answer text: it is its token ids decoded by the model's tokenizer, special tokens kept
(as every engine writes it: ``tokenizer.decode(output_tokens, skip_special_tokens=False)``).

``builder verify`` applies it to generate rows (rule ``output``), the samples reader
(:func:`much_dataset.samples.check_sample_texts`, ``much run --samples``) and a resumed ``builder samples`` to every
sample. A text edited while its
tokens were kept (or tokens replaced under the old text) is found; the report says at which character the stored and
the decoded texts part, with 20 characters of each.

The rule needs the tokenizer of the model that wrote the tokens; where none is known without a hub call the texts are
not compared, and the reader says so (:class:`UncheckedTextWarning`), never passing them as checked.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from much_dataset.params import InvalidParameterError

__all__ = ["Decoder", "UncheckedTextWarning", "text_decoder", "text_difference", "text_problems"]

#: ``decode([ids of text 0, ids of text 1, ...]) -> [text 0, text 1, ...]``.
Decoder = Callable[[list[list[int]]], list[str]]

#: Characters of each text shown where they part.
SHOWN = 20


class UncheckedTextWarning(UserWarning):
    """Texts were read without being compared with their decoded tokens (no tokenizer was known)."""


def text_decoder(tokenizer: Any) -> Decoder:
    """A :data:`Decoder` of ``tokenizer``: its ``batch_decode`` (special tokens kept), else its ``decode`` per text;
    a callable that is neither is taken to be a :data:`Decoder` already."""
    if hasattr(tokenizer, "batch_decode"):
        return lambda batch: list(tokenizer.batch_decode(batch, skip_special_tokens=False))
    if hasattr(tokenizer, "decode"):
        return lambda batch: [tokenizer.decode(ids, skip_special_tokens=False) for ids in batch]
    if callable(tokenizer):
        return tokenizer
    raise InvalidParameterError(f"tokenizer must be a tokenizer (batch_decode or decode) or a batch decoding function, "
                                f"got {type(tokenizer).__name__}")


def text_difference(stored: Any, decoded: str) -> str | None:
    """None when ``stored`` is ``decoded``; else where they part: ``differs from the decoded tokens at character N
    ('stored...' vs 'decoded...')``."""
    if stored == decoded:
        return None
    text = stored if isinstance(stored, str) else ""
    at = next((i for i, (a, b) in enumerate(zip(text, decoded, strict=False)) if a != b), min(len(text), len(decoded)))
    what = repr(text[at:at + SHOWN]) if isinstance(stored, str) else f"no text ({stored!r})"
    return f"differs from the decoded tokens at character {at} ({what} vs {decoded[at:at + SHOWN]!r})"


def text_problems(texts: Sequence[Any], token_ids: Sequence[Sequence[int]], decode: Decoder) -> list[tuple[int, str]]:
    """``(index, where it parts)`` for every text that is not its tokens decoded (one :data:`Decoder` call for all)."""
    if not len(texts):
        return []
    decoded = decode([list(ids) for ids in token_ids])
    if len(decoded) != len(texts):
        raise ValueError(f"the decoder returned {len(decoded)} texts for {len(texts)} token lists")  # a caller's bug
    differ = np.flatnonzero(np.asarray(list(texts), dtype=object) != np.asarray(decoded, dtype=object))
    return [(int(i), str(text_difference(texts[i], decoded[i]))) for i in differ]
