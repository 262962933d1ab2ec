"""What the leaderboard's browser tests share: the check that gradio, playwright, uvicorn and a Chromium binary are
there (a skip, or a failure under ``MUCH_REQUIRE_BROWSER=1``), and a headless Debian Chromium page (never a
downloaded browser; ``chromium`` on PATH or ``$MUCH_CHROMIUM``)."""

from __future__ import annotations

import importlib.util
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests._tools import require


def chromium() -> str | None:
    return os.environ.get("MUCH_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


def require_browser() -> None:
    """Skips the calling fixture's tests (fails them under MUCH_REQUIRE_BROWSER=1) when a piece is missing."""
    for module in ("gradio", "playwright", "uvicorn"):
        require("browser", importlib.util.find_spec(module) is not None,
                f"{module} is not installed (extra 'leaderboard')")
    require("browser", chromium() is not None, "no chromium binary (apt-get install chromium)")


@contextmanager
def chromium_page(width: int, height: int = 1000) -> Iterator:
    """A page of a headless Chromium with a ``width`` x ``height`` window and a 60 s default timeout."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium(), headless=True, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": width, "height": height})
        page.set_default_timeout(60_000)
        yield page
        browser.close()


def shot(page, name: str) -> None:
    """Saves the whole page as ``NAME.png`` in ``$MUCH_SCREENSHOT_DIR`` (for the docs), nothing without it."""
    folder = os.environ.get("MUCH_SCREENSHOT_DIR")
    if folder:
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True)
