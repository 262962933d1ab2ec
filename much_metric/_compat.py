"""Version gates for the few private internals of other libraries that the fast paths rely on.

Each gate answers "is this library a version whose internals we have tested?"; when it is not, callers take the
public path, which gives the same result more slowly (tests check both paths agree). Nothing here changes any
library's state.
"""

from __future__ import annotations

import functools
import importlib.metadata
import re

__all__ = ["tested_version", "sre_parser"]

#: Major.minor prefixes whose private attributes the fast paths were written and tested against.
TESTED = {
    "datasets": ("4.", "5."),  # Dataset._indices / _format_type behind a Column
    "nltk": ("3.9", "3.10"),  # TreebankWordTokenizer rule lists of TimedPattern (3.10) or re.Pattern (3.9)
    "transformers": ("4.", "5."),  # qualified names of the stock decode / _decode methods
    "tokenizers": ("0.",),  # Tokenizer.to_str() JSON layout of the decoder
    "evaluate": ("0.4.",),  # evaluate.loading's module-cache writer, used to install the name "much"
}


@functools.cache
def tested_version(package: str) -> bool:
    """Whether the installed ``package`` is a version whose internals the fast paths were tested against."""
    try:
        version = importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return False
    return version.startswith(TESTED[package])


def sre_parser():
    """CPython's regular-expression parser module (``re._parser`` since 3.11, ``sre_parse`` before), or None."""
    parser = getattr(re, "_parser", None)
    if parser is not None and hasattr(parser, "parse"):
        return parser
    try:
        import sre_parse  # Python 3.10; deprecated alias on 3.11+
    except ImportError:
        return None
    return sre_parse
