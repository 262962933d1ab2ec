"""Reading JSONL files: one JSON value a line, blank lines skipped, a bad line named by its file and number.

The one line-by-line JSONL reader of the toolkit (signal files, Mu-SHROOM records, ``much segment`` input, exported
rows, text corpora for the neighbour statistics). The builder's artifact store has its own reader on top of this
rule, because it also repairs the torn lines a killed writer leaves (``builder/store.py``).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

__all__ = ["parse_jsonl_lines", "plain_json", "read_jsonl"]


def plain_json(value: Any) -> Any:
    """``value`` in JSON's own types, recursively: numpy scalars and arrays -> Python numbers and lists, tuples ->
    lists, mapping keys -> str, and NaN / infinities -> None (JSON has neither). The toolkit's one JSON sanitizer
    (``much run --json``, ``much evaluate --json``, the leaderboard's rows).

    >>> import numpy as np
    >>> from much_dataset.jsonl import plain_json
    >>> plain_json({"auc": np.float64("nan"), 1: (np.int64(2), float("inf")), "x": np.arange(2)})
    {'auc': None, '1': [2, None], 'x': [0, 1]}
    """
    if hasattr(value, "item") and not isinstance(value, str | bytes) and getattr(value, "ndim", 1) == 0:
        value = value.item()  # a numpy scalar or 0-d array
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): plain_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain_json(v) for v in value]
    if hasattr(value, "tolist"):
        return plain_json(value.tolist())
    return value


def parse_jsonl_lines(lines: Iterable[str], source: str | os.PathLike, *, error: type[Exception] = ValueError,
                      what: str = "not valid JSON", objects: bool = False) -> Iterator[tuple[int, Any]]:
    """``(line number, value)`` of each non-blank line (numbers from 1, blank lines counted).

    Parameters
    ----------
    lines : iterable of str
        The text lines (an open text file, or ``text.split("\\n")``).
    source : str or path
        Named in errors: ``"<source>:<line>: <what> (<json error>)"``.
    error : exception type, default ValueError
        Raised for a line that does not parse (and, with ``objects``, for a value that is not an object).
    what : str, default "not valid JSON"
        The message's words for a line that does not parse.
    objects : bool, default False
        Require every value to be a JSON object.
    """
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except ValueError as decode_error:  # JSONDecodeError, or an integer past Python's digit limit
            raise error(f"{source}:{number}: {what} ({decode_error})") from None
        if objects and not isinstance(value, dict):
            raise error(f"{source}:{number}: expected a JSON object, got {type(value).__name__}")
        yield number, value


def read_jsonl(path: str | os.PathLike, **options: Any) -> Iterator[tuple[int, Any]]:
    """``(line number, value)`` of each non-blank line of a UTF-8 JSONL file (``options``: see
    :func:`parse_jsonl_lines`)."""
    with open(path, encoding="utf-8") as handle:
        yield from parse_jsonl_lines(handle, path, **options)
