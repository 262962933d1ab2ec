"""The code cites the reference pipeline through anchors of docs/reference-behaviour.md, never a section number of the
reference specification (a file users do not have), and every anchor it cites exists on the page; every repository
path a page of the docs (or a README, BENCHMARKS.md) cites exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "reference-behaviour.md"
#: Where citations are checked (files with these suffixes under these paths).
PATHS = ("much_dataset", "much_metric", "builder", "benchmarks", "scripts", "tests", "plugins", "BENCHMARKS.md",
         "README.md")
SUFFIXES = (".py", ".md", ".sh", ".sbatch")

_NUMBER = r"(?:1[0-3]|[0-9])(?:\.\d+)?(?!\d)"  # the specification has sections 0 to 13
#: "spec" + optional "section(s)"/"§" + a list of section numbers joined by , / - – "and" (items may read "bug N" or
#: "point N").
CITATION = re.compile(
    rf"\b(?i:spec(?:ification)?(?:\s+sections?|\s*§)?)\s+(?P<refs>{_NUMBER}"
    rf"(?:\s*(?:,|/|-|–|\band\b)\s*(?:bug\s+|point\s+)?{_NUMBER}(?![\w.]*[a-zA-Z]))*)"
)
#: Residual mentions refused too: "the spec" as a source, "spec's".
RESIDUAL = re.compile(r"(?i)\bthe spec\b|\bspec's\b")
CITED_ANCHORS = re.compile(r"docs/reference-behaviour\.md#([\w-]+)((?:,\s*(?:#:?\s*)?#[\w-]+)*)")


def _files() -> list[Path]:
    found = []
    for name in PATHS:
        path = ROOT / name
        for candidate in [path] if path.is_file() else sorted(path.rglob("*")):
            if candidate.is_file() and candidate.suffix in SUFFIXES and candidate != Path(__file__) \
                    and "__pycache__" not in candidate.parts:
                found.append(candidate)
    return found


def _page_anchors() -> set[str]:
    text = PAGE.read_text(encoding="utf-8")
    return set(re.findall(r"\{#([\w-]+)\}", text)) | set(re.findall(r'<a id="([\w-]+)"></a>', text))


def citations(text: str) -> list[int]:
    """Line numbers of ``text`` that cite the specification."""
    return [number for number, line in enumerate(text.splitlines(), 1)
            if CITATION.search(line) or RESIDUAL.search(line)]


def test_the_check_finds_every_citation_form():
    forms = ["(" + "spec 9.2)", "spec section 5, step 3", "spec sections 2 and 13", "(spec 1.1, 1.2, 2.3)",
             "spec 9.4, bug 11.16", "spec 11, point 4", "spec 4.3-4.4:", "spec 9.2/11.11;", "Spec 8 pair by pair",
             "as the spec says", "the spec's table"]
    assert citations("\n".join(forms)) == list(range(1, len(forms) + 1))
    assert citations("a specific case\ndocs/reference-behaviour.md#stopword-rule\nspecial 9.2") == []


def test_no_spec_citations_remain_and_every_cited_anchor_exists():
    remaining = [f"{path.relative_to(ROOT)}:{number}" for path in _files()
                 for number in citations(path.read_text(encoding="utf-8"))]
    assert not remaining, "cite docs/reference-behaviour.md#<anchor> instead:\n" + "\n".join(remaining)
    cited: set[str] = set()
    for path in _files():
        for match in CITED_ANCHORS.finditer(path.read_text(encoding="utf-8")):
            cited.add(match.group(1))
            cited.update(re.findall(r"#([\w-]+)", match.group(2)))
    assert {"stopword-rule", "config-ids", "signals"} <= cited
    missing = sorted(cited - _page_anchors())
    assert not missing, f"cited anchors missing from docs/reference-behaviour.md: {missing}"


# --- every repository path a page cites exists ------------------------------------------------------------------

#: Backticked paths (``much_metric/x.py``, ``scripts/tools/``, ``tests/x.py::test_y``).
CITED_PATH = re.compile(r"`([\w.-]+/[^`\s]*)`")
#: Pages whose cited paths are checked.
PAGES = (*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md", ROOT / "BENCHMARKS.md",
         *sorted(ROOT.glob("*/README.md")))
#: Paths a page tells the reader to create (not in the repository by design).
TO_CREATE = {"much_metric/baselines/methods/my_method.py"}


def cited_paths(text: str) -> list[tuple[int, str]]:
    """``(line, path)`` of each backticked path of ``text`` that starts with a top-level entry of the repository
    (a test id's ``::name``, an anchor and a ``:line`` dropped; globs and placeholders such as ``<folder>`` skipped)."""
    tops = {entry.name for entry in ROOT.iterdir()} - {".git", ".cache"}
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for match in CITED_PATH.finditer(line):
            path = re.split(r"::|#|\(|:", match.group(1))[0].rstrip(".,;")
            if path.split("/")[0] in tops and not any(c in path for c in "*<>{}$[]|"):
                found.append((number, path))
    return found


def test_every_repository_path_cited_in_the_docs_exists():
    missing = [f"{page.relative_to(ROOT)}:{number}: {path}" for page in PAGES
               for number, path in cited_paths(page.read_text(encoding="utf-8"))
               if path not in TO_CREATE and not (ROOT / path).exists()]
    assert not missing, "the docs cite paths that do not exist:\n" + "\n".join(missing)


def test_the_path_scan_reads_test_ids_folders_and_skips_placeholders():
    text = ("`much_metric/commands.py` (`run_command`), `tests/test_docs_citations.py::test_x`, `scripts/tools/`\n"
            "`<folder>/data/x.parquet`, `benchmarks/*.txt`, `rows/configs.jsonl`, `much_metric/gone.py:12`\n")
    assert cited_paths(text) == [(1, "much_metric/commands.py"), (1, "tests/test_docs_citations.py"),
                                 (1, "scripts/tools/"), (2, "much_metric/gone.py")]
