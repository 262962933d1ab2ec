"""Plain-text tables and JSON conversion shared by the ``much`` subcommands."""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import re
import sys
import textwrap
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from much_dataset.jsonl import plain_json

#: Width every table and table footnote of the ``much`` commands fits in (columns beyond it go to a next block).
TABLE_WIDTH = 120

#: What the embedded sample is, said wherever its numbers are printed: they are not MUCH's.
SAMPLE_DESCRIPTION = ("the embedded sample: Mu-SHROOM outputs scored with a small proxy model (SmolLM2-135M-Instruct), "
                      "not MUCH; numbers are not comparable with the paper's")


#: The floors' legend, printed under every table that lists them: why the constant floor's PR-AUC is high (the
#: reference's trapezoid PR-AUC draws a segment from (recall 0, precision 1) to (recall 1, precision = prevalence)
#: for a score that ties every claim) and why a per-token random signal beats the random floor (claim length).
FLOOR_NOTE = ("[floor: random] = seeded uniform random claim scores. [floor: constant] = one score for every claim: "
              "ROC-AUC 0.5, AP = prevalence, and PR-AUC = (1 + prevalence) / 2 because the reference's trapezoid "
              "PR-AUC joins (recall 0, precision 1) to (recall 1, prevalence): its PR-AUC can beat every method, so "
              "read PR-AUC against it (AP has no such bonus). [floor: length] = the claim's number of non-stopword "
              "tokens: under the product aggregator a longer claim scores higher even with random token scores, so "
              "a per-token random signal lands near this floor, above [floor: random].")


def footnote(text: str, width: int = TABLE_WIDTH) -> str:
    """``text`` wrapped to ``width`` columns (a table's legend); words, paths and ``[floor: x]`` never split."""
    kept = text.replace("[floor: ", "[floor:\0")
    return textwrap.fill(kept, width, break_long_words=False, break_on_hyphens=False).replace("\0", " ")


def fit_line(line: str, width: int = TABLE_WIDTH) -> str:
    """``line`` (one printed line, no newline) wrapped to ``width`` columns, continuation lines indented by two
    spaces; words and paths never split. A line that fits, or that has a run of two spaces (a table's row, whose
    columns :func:`text_table` already fits unless one is wider), is returned as is.

    >>> print(fit_line("note: " + "word " * 6, width=20))
    note: word word word
      word word word
    >>> fit_line("a  b", width=2)
    'a  b'
    """
    if len(line) <= width or "  " in line.strip():
        return line
    return textwrap.fill(line, width, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False)


class _FittingWriter(io.TextIOBase):
    """A text stream that passes every complete line through :func:`fit_line` to ``target``."""

    def __init__(self, target: Any, width: int) -> None:
        self._target, self._width, self._pending = target, width, ""

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return bool(getattr(self._target, "isatty", lambda: False)())

    def write(self, text: str) -> int:
        *lines, self._pending = (self._pending + text).split("\n")
        for line in lines:
            self._target.write(fit_line(line, self._width) + "\n")
        return len(text)

    def flush(self) -> None:
        self._target.flush()

    def finish(self) -> None:
        if self._pending:
            self._target.write(fit_line(self._pending, self._width))
            self._pending = ""
        self.flush()


_Command = TypeVar("_Command", bound=Callable[..., Any])


def fits_width(command: _Command) -> _Command:
    """Decorate a subcommand's ``run`` so that every line it prints on stdout fits in :data:`TABLE_WIDTH` columns:
    its prose (headers, ``note:`` lines) is wrapped by :func:`fit_line`, line by line as it is printed."""

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        writer = _FittingWriter(sys.stdout, TABLE_WIDTH)
        try:
            with contextlib.redirect_stdout(writer):
                return command(*args, **kwargs)
        finally:
            writer.finish()

    return run  # type: ignore[return-value]


_ROLE = re.compile(r":(?:mod|func|class|meth|data|attr|obj|exc|ref|doc):`~?([^`]+)`")


def plain_text(text: str | None) -> str | None:
    """A docstring's reST as the plain text a terminal shows: roles and ````literals```` lose their markup, a
    paragraph ending ``::`` ends with ``:``. ``:func:`~a.b.f``` -> ``f``, ``:mod:`a.b``` -> ``a.b``."""
    if not text:
        return text
    text = _ROLE.sub(lambda m: m.group(1).rsplit(".", 1)[-1] if m.group(0).count("~") else m.group(1), text)
    text = re.sub(r"``([^`]+)``", r"\1", text)
    return re.sub(r"(?<=\S)::(?=\s*$)", ":", text, flags=re.M)


def plain_help(parser: argparse.ArgumentParser) -> None:
    """Rewrite, in place, the description, epilog and every argument help of ``parser`` and its subcommands' parsers
    with :func:`plain_text` (the command modules reuse their docstrings as help)."""
    parser.description = plain_text(parser.description)
    parser.epilog = plain_text(parser.epilog)
    for action in parser._actions:
        if isinstance(action.help, str):
            action.help = plain_text(action.help)
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                choice.help = plain_text(choice.help)
            for sub in dict.fromkeys(action.choices.values()):
                plain_help(sub)


def data_title(data: str, what: str) -> str:
    """``what`` on ``data`` for a header or a report title, saying plainly when ``data`` is the embedded sample."""
    from much_metric.report.published import is_much

    if str(data) == "sample":
        return f"{what} on {SAMPLE_DESCRIPTION}"
    return f"{'MUCH ' + what.lower() if is_much(data) else what} on {data}"


def text_table(rows: Sequence[Sequence[str]], header: Sequence[str], *, width: int = TABLE_WIDTH,
               keep: int = 1) -> str:
    """Left-aligned columns separated by two spaces, with a dashed rule under the header.

    A table wider than ``width`` is split into blocks of columns, one under the other (a blank line between), each
    repeating the first ``keep`` columns (the row names), so that every line fits in ``width`` unless a single
    column is wider.
    """
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

    def render(columns: Sequence[int]) -> str:
        def line(cells: Sequence[str]) -> str:
            return "  ".join(cells[i].ljust(widths[i]) for i in columns).rstrip()

        return "\n".join([line(header), "  ".join("-" * widths[i] for i in columns), *(line(row) for row in rows)])

    keep = min(keep, len(header))
    fixed = list(range(keep))
    used = sum(widths[i] + 2 for i in fixed)
    blocks: list[list[int]] = [[]]
    for i in range(keep, len(header)):
        if blocks[-1] and used + sum(widths[j] + 2 for j in blocks[-1]) + widths[i] > width:
            blocks.append([])
        blocks[-1].append(i)
    return "\n\n".join(render(fixed + block) for block in blocks)


def jsonable(value: Any) -> Any:
    """JSON's types (NaN and infinities -> None): :func:`much_dataset.jsonl.plain_json`, the one sanitizer."""
    return plain_json(value)
