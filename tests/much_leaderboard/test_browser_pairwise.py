"""The pairwise comparison tab in a real browser (headless Debian Chromium via Playwright, as test_browser.py):
the matrix and the cost figure are visible, fit 1,280 and 1,440 px windows without the page scrolling sideways, and
no two texts of the figure overlap. ``MUCH_REQUIRE_BROWSER=1`` turns a missing piece into a failure;
``MUCH_SCREENSHOT_DIR=DIR`` saves the pages seen."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from much_leaderboard import Leaderboard
from tests.much_leaderboard._browser import chromium_page, require_browser
from tests.much_leaderboard._helpers import sample_signal, serving, valid_archive

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def server(tmp_path_factory, evaluation):
    require_browser()
    board = Leaderboard(tmp_path_factory.mktemp("browser-pairwise") / "store", data=evaluation)
    board.add_baselines()  # the sample board: every built-in baseline (KTC included), each with a measured cost
    outcome = board.submit(valid_archive(sample_signal(seed=5), name="no_cost_method"),
                           {"method": "A submission without a declared cost", "authors": "browser"})
    assert outcome.status == "accepted", outcome.message
    with serving(board) as url:
        yield board, url + "/"


@pytest.fixture(scope="module")
def page(server):
    with chromium_page(1280) as page:
        yield page


# Boxes of the tab's parts and of every text of the figure, measured in the page.
_MEASURE = """() => {
    const box = e => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
    const wrap = document.querySelector('#much-pairwise-wrap');
    return {matrix: box(document.querySelector('#much-pairwise')), wrap: box(wrap),
            wrap_fits: wrap.scrollWidth <= wrap.clientWidth,
            figure: box(document.querySelector('#much-cost-figure')),
            texts: [...document.querySelectorAll('#much-cost-figure text')].map(t => [t.textContent, box(t)]),
            page_width: document.documentElement.scrollWidth, window_width: window.innerWidth};
}"""


def _overlap(a, b) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def test_the_matrix_and_the_cost_figure_are_visible_fit_and_do_not_overlap(server, page):
    board, url = server
    payload = board.pairwise()
    assert payload is not None and len(payload["keys"]) == 5
    for width in (1280, 1440):
        page.set_viewport_size({"width": width, "height": 1000})
        page.goto(url)
        page.wait_for_selector("#much-leaderboard tbody tr")
        page.get_by_role("tab", name="Pairwise comparison & cost").click()
        page.wait_for_selector("#much-pairwise")
        assert page.locator("#much-pairwise").is_visible() and page.locator("#much-cost-figure").is_visible()
        assert page.locator("#much-pairwise td[data-i]").count() == 25
        assert "A submission without a declared cost" in page.inner_text("#much-no-cost")
        assert page.locator("#much-cost-figure g.point").count() == 4  # the four baselines, each with a cost
        seen = page.evaluate(_MEASURE)
        assert seen["window_width"] == width and seen["page_width"] <= width, seen
        assert seen["wrap_fits"] and seen["matrix"][2] <= seen["wrap"][2] <= width, seen
        assert seen["figure"][2] <= width and seen["figure"][2] - seen["figure"][0] > 500, seen
        texts = seen["texts"]
        assert len(texts) >= 4 + 3
        clashes = [(a[0], b[0]) for k, a in enumerate(texts) for b in texts[k + 1:] if _overlap(a[1], b[1])]
        assert not clashes, clashes
        folder = os.environ.get("MUCH_SCREENSHOT_DIR")
        if folder:
            page.screenshot(path=str(Path(folder) / f"pairwise-{width}.png"), full_page=True)
