"""When ``tokenizer.decode`` is exactly the Rust backend's decoder, so that callers may use the backend directly.

transformers' ``decode`` converts its input to Python lists, then calls the backend and, when
``clean_up_tokenization_spaces`` is on, rewrites spaces around punctuation. With that option off and the stock
``decode`` / ``_decode`` methods, ``tokenizer.decode(ids) == backend.decode(ids, skip_special_tokens=False)`` for
every id list, and ``backend.decode_batch`` gives the same strings for many lists in one call. Any other tokenizer
(a subclass overriding decoding, a slow tokenizer, cleanup on) gets None, and callers keep ``tokenizer.decode``.
"""

from __future__ import annotations

from typing import Any

from much_metric._compat import tested_version

__all__ = ["stock_backend"]

_STOCK_DECODE = ("PreTrainedTokenizerBase.decode",)
_STOCK_PRIVATE_DECODE = ("TokenizersBackend._decode", "PreTrainedTokenizerFast._decode")


def _method_owner(tokenizer: Any, name: str) -> str:
    method = getattr(type(tokenizer), name, None)
    return getattr(method, "__qualname__", "")


def stock_backend(tokenizer: Any):
    """The ``tokenizers.Tokenizer`` whose ``decode(ids, skip_special_tokens=False)`` equals ``tokenizer.decode``,
    or None when that cannot be guaranteed."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    # The method owners below are transformers internals: trusted only on the versions we tested.
    if backend is None or not tested_version("transformers"):
        return None
    if getattr(tokenizer, "clean_up_tokenization_spaces", True):
        return None
    if _method_owner(tokenizer, "decode") not in _STOCK_DECODE:
        return None
    if _method_owner(tokenizer, "_decode") not in _STOCK_PRIVATE_DECODE:
        return None
    return backend
