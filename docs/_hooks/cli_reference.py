"""MkDocs hook: replaces ``<!-- argparse: much -->`` / ``<!-- argparse: builder -->`` by the flag tables of the parsers.

The command-line page is generated from the argparse parsers themselves (``much_metric.cli.build_parser`` and
``builder.cli.build_parser``), so a flag added in the code appears in the docs with its help text and default, and a
removed one disappears; nothing is copied by hand.
"""

from __future__ import annotations

import argparse
import html
import importlib
import os
import re
import textwrap

_MARKER = re.compile(r"<!-- argparse: (much|builder) -->")
_PARSERS = {"much": "much_metric.cli", "builder": "builder.cli"}


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:  # argparse offers no public accessor for sub-parsers
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _rst_to_markdown(text: str) -> str:
    """Docstring-style text (double backticks, :mod: roles) as Markdown inline text."""
    text = re.sub(r":[a-z]+:`~?([^`]+)`", r"`\1`", text)
    return text.replace("``", "`")


def _cell(text: str) -> str:
    return html.escape(_rst_to_markdown(" ".join(text.split())), quote=False).replace("|", "&#124;")


def _description(text: str) -> list[str]:
    """Paragraphs of a parser description; a paragraph ending with ``::`` introduces a literal block."""
    lines: list[str] = []
    literal = False
    for paragraph in re.split(r"\n\s*\n", text.strip()):
        if literal:
            lines += ["```text", textwrap.dedent(paragraph).strip("\n"), "```", ""]
            literal = False
            continue
        joined = " ".join(paragraph.split())
        literal = joined.endswith("::")
        lines += [_rst_to_markdown(joined[:-1] if literal else joined), ""]
    return lines


def _flags(action: argparse.Action) -> str:
    if action.option_strings:
        metavar = ""
        if action.nargs != 0:
            metavar = action.metavar or action.dest.upper()
            metavar = " " + (metavar if isinstance(metavar, str) else " ".join(metavar))
        return "<br>".join(f"`{name}{metavar}`" for name in action.option_strings)
    return f"`{action.metavar or action.dest}`"


def _help(formatter: argparse.HelpFormatter, action: argparse.Action) -> str:
    if not action.help:
        return ""
    text = formatter._expand_help(action)  # expands %(default)s and friends as --help does
    if action.choices is not None and not isinstance(action, argparse._SubParsersAction) and "{" not in text:
        text += f" (choices: {', '.join(map(str, action.choices))})"
    return text


def _default(action: argparse.Action) -> str:
    if not action.option_strings or action.nargs == 0 or action.default in (None, argparse.SUPPRESS):
        return ""
    return f"`{action.default}`"


def _table(parser: argparse.ArgumentParser) -> list[str]:
    formatter = parser._get_formatter()
    rows = ["| argument | default | meaning |", "|---|---|---|"]
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)) or action.help == argparse.SUPPRESS:
            continue
        rows.append(f"| {_flags(action)} | {_default(action)} | {_cell(_help(formatter, action))} |")
    return rows


def render(name: str) -> str:
    os.environ["COLUMNS"] = "90"  # stable usage lines whatever the terminal
    parser = importlib.import_module(_PARSERS[name]).build_parser()
    prog = parser.prog
    lines = [f"Global options of `{prog}`:", "", *_table(parser), ""]
    for command, sub in _subcommands(parser).items():
        lines += [f"### `{prog} {command}`", ""]
        if sub.description:
            lines += _description(sub.description)
        lines += ["```text", sub.format_usage().strip(), "```", "", *_table(sub), ""]
    return "\n".join(lines)


def on_page_markdown(markdown: str, **kwargs) -> str:
    return _MARKER.sub(lambda match: render(match.group(1)), markdown)
