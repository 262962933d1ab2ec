"""Plain-text tables and JSON conversion shared by the ``much`` subcommands."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from much_dataset.jsonl import plain_json

#: What the embedded sample is, said wherever its numbers are printed: they are not MUCH's.
SAMPLE_DESCRIPTION = ("the embedded sample: Mu-SHROOM outputs scored with a small proxy model (SmolLM2-135M-Instruct), "
                      "not MUCH; numbers are not comparable with the paper's")


#: The floors' legend: why the constant floor's PR-AUC is high (the reference's trapezoid PR-AUC draws a segment
#: from (recall 0, precision 1) to (recall 1, precision = prevalence) for a score that ties every claim).
FLOOR_NOTE = ("[floor: random] = seeded uniform random claim scores; [floor: constant] = one score for every claim: "
              "ROC-AUC 0.5, AP = prevalence, and PR-AUC = (1 + prevalence) / 2 because the reference's trapezoid "
              "PR-AUC joins (recall 0, precision 1) to (recall 1, prevalence) -- a high PR-AUC is read against it")


def data_title(data: str, what: str) -> str:
    """``what`` on ``data`` for a header or a report title, saying plainly when ``data`` is the embedded sample."""
    from much_metric.signals import is_much

    if str(data) == "sample":
        return f"{what} on {SAMPLE_DESCRIPTION}"
    return f"{'MUCH ' + what.lower() if is_much(data) else what} on {data}"


def text_table(rows: Sequence[Sequence[str]], header: Sequence[str]) -> str:
    """Left-aligned columns separated by two spaces, with a dashed rule under the header."""
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=True)).rstrip()

    return "\n".join([line(header), "  ".join("-" * width for width in widths), *(line(row) for row in rows)])


def jsonable(value: Any) -> Any:
    """JSON's types (NaN and infinities -> None): :func:`much_dataset.jsonl.plain_json`, the one sanitizer."""
    return plain_json(value)
