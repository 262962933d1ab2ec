"""The two boards in a real browser (headless Debian Chromium, as tests/much_leaderboard/test_browser.py): a
submission through the form with private values shows its private ROC-AUC and rank shift in the main table, the
"Private split" tab ranks every row on both splits, the "Label sources" tab compares the sample's hard and soft
labels. ``MUCH_SCREENSHOT_DIR=DIR`` saves the private board as ``leaderboard-private.png``."""

from __future__ import annotations

import pytest

from much_leaderboard import Leaderboard
from tests.much_leaderboard._browser import chromium_page, require_browser, shot
from tests.much_leaderboard._helpers import sample_signal, serving, valid_archive

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def private_page(tmp_path_factory, public_evaluation, private_split):
    require_browser()
    board = Leaderboard(tmp_path_factory.mktemp("browser-private") / "store", data=public_evaluation)
    board.add_baselines()
    board.attach_private(private_split)
    with serving(board) as url, chromium_page(1400) as page:
        yield board, page, url + "/"


def test_a_form_submission_shows_public_rank_private_rank_and_the_shift(private_page, tmp_path):
    board, page, url = private_page
    page.goto(url)
    page.wait_for_selector("#much-leaderboard tbody tr")
    archive = tmp_path / "submission.zip"
    archive.write_bytes(valid_archive(sample_signal(seed=31), name="browser_private"))
    page.get_by_role("tab", name="Submit").click()
    page.locator("#archive input[type=file]").set_input_files(str(archive))
    page.locator("#method-name textarea, #method-name input").first.fill("Browser method")
    page.locator("#authors textarea, #authors input").first.fill("browser")
    page.locator("#submit-button").click()
    message = page.wait_for_selector("#submit-message[data-status]")
    assert message.get_attribute("data-status") == "accepted", message.inner_text()
    assert "private split ROC-AUC (rounded to 2 decimals): browser_private 0." in message.inner_text()

    table = board.private.table(board.store.rows())
    mine = next(row for row in table["rows"] if row["signal"] == "browser_private")
    page.get_by_role("tab", name="Leaderboard").click()
    page.wait_for_function("document.querySelectorAll('#much-leaderboard tbody tr').length == 5")
    headers = page.locator("#much-leaderboard thead th").all_inner_texts()
    assert headers[-2:] == ["private ROC-AUC (2 dec.)", "rank shift (public → private)"]
    row = page.locator("#much-leaderboard tbody tr", has_text="Browser method")
    cells = [c.strip() for c in row.locator("td").all_inner_texts()]
    assert cells[-2] == f"{mine['private']:.2f}"

    page.get_by_role("tab", name="Private split").click()
    page.wait_for_selector("#much-private-board tbody tr")
    shown = page.locator("#much-private-board tbody tr", has_text="Browser method")
    cells = [c.strip() for c in shown.locator("td").all_inner_texts()]
    expected_shift = "=" if mine["shift"] == 0 else f"{'▲' if mine['shift'] > 0 else '▼'}{abs(mine['shift'])}"
    assert cells[0] == str(mine["private_rank"]) and cells[3] == str(mine["public_rank"])
    assert cells[4] == f"{mine['private']:.2f}" and cells[5] == expected_shift
    assert "Kendall's τ between the two rankings" in page.inner_text("#much-private-summary")
    shot(page, "leaderboard-private")

    page.get_by_role("tab", name="Label sources").click()
    page.wait_for_selector("#much-label-source-tau")
    assert page.locator("#much-label-source-table tbody tr").count() == 5
    assert "soft" in page.inner_text("#much-label-source-tau")
