"""Plain-text tables and JSON conversion shared by the ``much`` subcommands."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any


def text_table(rows: Sequence[Sequence[str]], header: Sequence[str]) -> str:
    """Left-aligned columns separated by two spaces, with a dashed rule under the header."""
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=True)).rstrip()

    return "\n".join([line(header), "  ".join("-" * width for width in widths), *(line(row) for row in rows)])


def jsonable(value: Any) -> Any:
    """``value`` with NaN floats replaced by None (JSON has no NaN), recursively through dicts, lists and tuples."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return value
