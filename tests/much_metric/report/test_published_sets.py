"""Issue 57: the paper's table 7 numbers are labelled with the evaluation set they come from, checked against the
reference notebook's figures in docs/reference-behaviour.md (they match its "auto" set to the rounding, not its
"manual" set: CCP-24-8 0.775 = 0.7749 auto, 0.6913 manual)."""

from __future__ import annotations

import re
from pathlib import Path

from much_metric.report.published import PAPER_TABLE7, PAPER_TABLE7_SET, REFERENCE_NOTEBOOK

PAGE = Path(__file__).resolve().parents[3] / "docs" / "reference-behaviour.md"

#: The notebook's method column (the page's spelling) -> the toolkit's signal name, where one exists.
SIGNALS = {"CCP, δ=24, σ=8, L": "ccp_24_8", "CCP, δ=24, σ=5, L": "ccp_24_5", "Token Entropy δ=24": "token_entropy_24",
           "Max Likelihood": "max_likelihood", "Token Likelihood": "token_likelihood"}


def _page_rows() -> list[tuple[str, str, float, float]]:
    section = PAGE.read_text(encoding="utf-8").split("## Reference numbers", 1)[1]
    return [(m[1], m[2].strip(), float(m[3]), float(m[4]))
            for m in re.finditer(r"^\| (manual|auto) \| ([^|]+) \| ([\d.]+) \| ([\d.]+) \|$", section, re.M)]


def test_the_module_holds_the_page_numbers():
    page = {(subset, roc, ppr) for subset, _, roc, ppr in _page_rows()}
    assert len(page) >= 7
    assert page <= {(subset, roc, ppr) for _, subset, roc, ppr in REFERENCE_NOTEBOOK}


def test_table7_matches_the_set_it_is_labelled_with_and_not_the_other():
    paper = {signal: roc for _, signal, _, roc, _, _ in PAPER_TABLE7 if signal}
    matched = {"auto": 0, "manual": 0}
    compared = 0
    for subset, method, roc, _ in _page_rows():
        signal = SIGNALS.get(method.split(" (")[0])
        if signal in paper:
            compared += 1
            matched[subset] += abs(roc - paper[signal]) <= 0.0005 + 1e-9  # the paper's 3 decimals of it
    assert compared >= 4
    other = "manual" if PAPER_TABLE7_SET == "auto" else "auto"
    assert matched[PAPER_TABLE7_SET] >= 2 and matched[other] == 0
    assert PAPER_TABLE7_SET == "auto"


def test_every_view_of_the_paper_rows_names_their_set():
    """much evaluate's reference rows (on orailix/MUCH) and the board's published table carry the set's name, not only
    the module: a reader of either sees which evaluation set the paper's numbers are."""
    import argparse

    from much_leaderboard._table import published_html
    from much_metric.cli._evaluate_tables import published_rows

    rows = published_rows(argparse.Namespace(source="orailix/MUCH"), "roc_auc")
    paper = [row[1] for row in rows if row[1].startswith("[paper table")]
    assert len(paper) == len(PAPER_TABLE7) and all(f", {PAPER_TABLE7_SET}] " in label for label in paper)
    assert published_rows(argparse.Namespace(source="sample"), "roc_auc") == []
    assert f'"{PAPER_TABLE7_SET}" evaluation set' in published_html()
