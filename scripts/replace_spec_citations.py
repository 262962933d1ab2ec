"""Replace citations of the reference specification (a file users do not have) by the docs page that states the fact.

The code used to cite sections of a behavioural specification of the authors' pipeline by number ("spec" followed by
a section number, alone, in lists such as "1.1, 1.2", ranges such as "4.3-4.4", or as "section 5", "11, point 4",
"9.4, bug 11.16"). Each section now has an anchor on ``docs/reference-behaviour.md``; this script rewrites every
citation into ``docs/reference-behaviour.md#anchor`` (several anchors separated by ", #"). It is idempotent: run it
again after merging a branch that still cites the specification.

    python scripts/replace_spec_citations.py            # rewrite the default folders in place
    python scripts/replace_spec_citations.py --check    # list remaining citations, exit 1 if any

``tests/test_docs_citations.py`` checks that none remain and that every anchor cited in the code exists.
"""

from __future__ import annotations

import argparse
import ast
import io
import re
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = "docs/reference-behaviour.md"
#: Where citations are rewritten and checked (files with these suffixes under these paths).
DEFAULT_PATHS = ("much_dataset", "much_metric", "builder", "scripts", "tests", "BENCHMARKS.md", "README.md")
SUFFIXES = (".py", ".md", ".sh", ".sbatch")
#: This script and its test name the pattern on purpose.
SKIP = ("scripts/replace_spec_citations.py", "tests/test_docs_citations.py")

#: Section of the specification -> anchor of docs/reference-behaviour.md. A subsection missing here falls back to
#: its section (``2.5`` -> ``2``).
ANCHORS = {
    "1": "config-ids", "1.1": "config-ids", "1.2": "question-id", "1.3": "generation-id",
    "2": "hub-columns", "2.1": "hub-columns", "2.2": "trash-dataset", "2.3": "generation-configs",
    "2.4": "signal-files", "2.5": "export",
    "3": "questions",
    "4": "generation", "4.1": "generation-config-defaults", "4.2": "generation-config-defaults", "4.3": "prompt",
    "4.4": "sampling", "4.5": "captured-distribution", "4.6": "generation-time-estimate",
    "5": "segmentation",
    "6": "annotation", "6.1": "wikipedia", "6.2": "rag-context", "6.3": "judge-prompt", "6.4": "filters",
    "6.5": "human-annotation",
    "7": "export", "7.1": "mushroom-import",
    "8": "signals",
    "9": "evaluation", "9.1": "evaluation-modes", "9.2": "stopword-rule", "9.3": "aggregators", "9.4": "metrics",
    "9.5": "evaluation-modes", "9.6": "runtime",
    "10": "generation",
    "11": "known-bugs", "11.2": "nli-label-mapping", "11.3": "nli-label-mapping", "11.4": "ktc-options",
    "11.5": "context-window", "11.6": "duplicate-signal-rows", "11.7": "judge-prompt", "11.8": "evaluation-modes",
    "11.9": "last-chunk", "11.10": "mushroom-import", "11.11": "stopword-rule", "11.12": "wikipedia",
    "11.13": "captured-distribution", "11.16": "partial-pr-auc", "11.17": "runtime", "11.18": "segmenter-version",
    "11.19": "mushroom-import",
    "12": "reference-numbers",
    "13": "hub-columns",
}

#: Whole phrases that read badly once the number is replaced: rewritten as sentences first.
PHRASES = {
    "generated them (spec 7.1 of the \"\n            \"reference); labels from Mu-SHROOM's human annotations.\")":
        "generated them \"\n            \"(the reference's Mu-SHROOM import, "
        "docs/reference-behaviour.md#mushroom-import); \"\n            \"labels from Mu-SHROOM's human annotations.\")",
    "in the order of the spec's table": "in the order of the reference's config table",
    "Precision: spec 2.4 gives ``values`` as ``list[float]``:": "Precision: the published signal files "
    "(docs/reference-behaviour.md#signal-files) hold ``values`` as ``list[float]``:",
    "loops written from the spec (": "loops written from docs/reference-behaviour.md (",
    "implementing the spec formulas (": "implementing the reference formulas of docs/reference-behaviour.md (",
}

_NUMBER = r"(?:1[0-3]|[0-9])(?:\.\d+)?(?!\d)"  # the specification has sections 0 to 13
#: "spec" + optional "section(s)"/"§" + a list of section numbers joined by , / - – "and" (items may read "bug N" or
#: "point N").
CITATION = re.compile(
    rf"\b(?i:spec(?:ification)?(?:\s+sections?|\s*§)?)\s+(?P<refs>{_NUMBER}"
    rf"(?:\s*(?:,|/|-|–|\band\b)\s*(?:bug\s+|point\s+)?{_NUMBER}(?![\w.]*[a-zA-Z]))*)"
)
#: Residual mentions the test refuses too: "the spec" as a source, "spec's".
RESIDUAL = re.compile(r"(?i)\bthe spec\b|\bspec's\b")


def anchors_of(refs: str) -> list[str]:
    """Anchors for a citation's section list, in order, without repeats."""
    sections: list[str] = []
    for kind, number in re.findall(rf"(bug\s+|point\s+)?({_NUMBER})", refs):
        if kind.startswith("point") and sections:
            number = f"{sections[-1].split('.')[0]}.{number}"
            sections.pop()
        sections.append(number)
    anchors: list[str] = []
    for section in sections:
        anchor = ANCHORS.get(section) or ANCHORS.get(section.split(".")[0])
        if anchor is None:
            raise ValueError(f"no anchor for section {section} (citation {refs!r}): add it to ANCHORS")
        if anchor not in anchors:
            anchors.append(anchor)
    return anchors


def _replacement(match: re.Match) -> str:
    return f"{PAGE}#" + ", #".join(anchors_of(match.group("refs")))


def rewrite(text: str) -> str:
    for phrase, sentence in PHRASES.items():
        text = text.replace(phrase, sentence)
    return CITATION.sub(_replacement, text)


LINE_LENGTH = 120  # ruff's line-length for this project


def _strings_normalised(source: str) -> str:
    """The AST of ``source`` with whitespace runs in string constants collapsed (to compare code before/after)."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            node.value = " ".join(node.value.split())
    return ast.dump(tree)


def _split_line(line: str, row: int, tokens: list[tokenize.TokenInfo]) -> list[str] | None:
    """``line`` (row ``row``) cut at a space before the limit, inside a comment or a string; None if no safe cut."""
    depth_at: dict[tuple[int, int], int] = {}
    depth = 0
    for token in tokens:
        depth_at[token.start] = depth
        if token.type == tokenize.OP and token.string in "([{":
            depth += 1
        elif token.type == tokenize.OP and token.string in ")]}":
            depth -= 1
    indent = len(line) - len(line.lstrip())
    literals = [range(m.start(), m.end()) for m in re.finditer(r"``[^`]*``|`[^`]*`", line)]
    for col in range(min(LINE_LENGTH, len(line) - 1), indent + 10, -1):
        if line[col] != " " or line[col - 1] == " " or any(col in span for span in literals):
            continue
        for token in tokens:
            (start_row, start_col), (end_row, end_col) = token.start, token.end
            inside = (start_row, start_col) < (row, col) < (end_row, end_col)
            if not inside:
                continue
            if token.type == tokenize.COMMENT:
                if line[:start_col].strip():  # a comment after code: moved onto its own line above the code
                    return [" " * indent + token.string, line[:start_col].rstrip()]
                prefix = re.match(r"#:?\s*", token.string).group(0)
                if col < start_col + len(prefix) + 10:
                    break
                return [line[:col].rstrip(), " " * start_col + prefix + line[col + 1:].lstrip()]
            if token.type != tokenize.STRING:
                break
            body = token.string.lstrip("rRbBuUfF")
            quote = body[:3] if body[:3] in ('"""', "'''") else body[0]
            if len(quote) == 3:  # a docstring or multi-line string: a line break inside it
                body_indent = start_col if start_row == row else indent
                return [line[:col].rstrip(), " " * body_indent + line[col + 1:].lstrip()]
            if start_row != end_row or depth_at.get(token.start, 0) == 0:
                break  # implicit concatenation needs brackets around the literal
            prefix = token.string[: len(token.string) - len(body)]
            if "f" in prefix.lower() and line[start_col:col].count("{") != line[start_col:col].count("}"):
                break  # inside an f-string expression
            return [line[: col + 1] + quote, " " * start_col + prefix + quote + line[col + 1:]]
        else:
            continue
    return None


def reflow_python(source: str) -> tuple[str, list[int]]:
    """Cut the lines over the limit inside comments and strings; returns the text and the rows left too long."""
    while True:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
        lines = source.split("\n")
        long_rows = [row for row, line in enumerate(lines, 1) if len(line) > LINE_LENGTH and "noqa" not in line]
        for row in long_rows:
            pieces = _split_line(lines[row - 1], row, tokens)
            if pieces is not None:
                lines[row - 1: row] = pieces
                source = "\n".join(lines)
                break
        else:
            return source, long_rows


def rewrite_file(path: Path) -> bool:
    """Rewrite ``path`` in place; True if it changed. Python code other than strings and comments never changes."""
    text = path.read_text(encoding="utf-8")
    new = rewrite(text)
    if new == text:
        return False
    if path.suffix == ".py":
        new, too_long = reflow_python(new)
        if _strings_normalised(new) != _strings_normalised(rewrite(text)):
            raise RuntimeError(f"{path}: reflowing changed the code; fix by hand")
        for row in too_long:
            print(f"{path.relative_to(ROOT)}:{row}: still over {LINE_LENGTH} characters", file=sys.stderr)
    path.write_text(new, encoding="utf-8")
    return True


def files(paths: list[str]) -> list[Path]:
    found: list[Path] = []
    for name in paths:
        path = ROOT / name
        candidates = [path] if path.is_file() else sorted(path.rglob("*"))
        for candidate in candidates:
            relative = candidate.relative_to(ROOT).as_posix()
            if candidate.is_file() and candidate.suffix in SUFFIXES and relative not in SKIP \
                    and "__pycache__" not in relative:
                found.append(candidate)
    return found


def find_citations(paths: list[str]) -> list[str]:
    """``path:line: text`` of every remaining citation of the specification."""
    hits = []
    for path in files(paths):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if CITATION.search(line) or RESIDUAL.search(line):
                hits.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    return hits


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", default=list(DEFAULT_PATHS), help="files or folders (default: %(default)s)")
    parser.add_argument("--check", action="store_true", help="only list remaining citations; exit 1 if any")
    args = parser.parse_args(argv)
    if not args.check:
        changed = sum(rewrite_file(path) for path in files(args.paths))
        print(f"rewrote citations in {changed} files")
    remaining = find_citations(args.paths)
    for hit in remaining:
        print(hit, file=sys.stderr)
    return 1 if remaining else 0


if __name__ == "__main__":
    sys.exit(main())
