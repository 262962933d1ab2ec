"""When a nested progress bar is shown: only on a terminal.

A bar nested under another (tqdm ``position`` > 0: a signal's blocks under the signals bar, the NLI batches under
them) moves the cursor up with the ``ESC [A`` control sequence after each refresh. On a terminal that redraws the
bars in place; in a log file or a pipe it leaves a stray ``[A`` on every line. The outer bar stays (it writes
carriage returns only), so a redirected run still shows its progress.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["library_bars_off", "nested_bar_disabled"]


def nested_bar_disabled(progress: bool) -> bool:
    """``disable=`` for a nested tqdm bar: disabled when progress is off or stderr (tqdm's stream) is not a
    terminal."""
    if not progress:
        return True
    isatty = getattr(sys.stderr, "isatty", None)
    try:
        return not (callable(isatty) and isatty())
    except ValueError:  # a closed stream
        return True


@contextmanager
def library_bars_off(off: bool) -> Iterator[None]:
    """With ``off`` (a command's ``--no-progress``), the libraries' own bars too -- datasets' "Generating split",
    transformers' "Loading weights", the hub's downloads -- which print even into a pipe; restored after, so an
    in-process caller keeps its settings. Without ``off`` nothing is imported or changed."""
    if not off:
        yield
        return
    import datasets
    import huggingface_hub.utils as hub
    from transformers.utils import logging as transformers_logging

    was = (datasets.is_progress_bar_enabled(), not hub.are_progress_bars_disabled(),
           transformers_logging.is_progress_bar_enabled())
    datasets.disable_progress_bars()
    hub.disable_progress_bars()
    transformers_logging.disable_progress_bar()
    try:
        yield
    finally:
        for enabled, enable in zip(was, (datasets.enable_progress_bars, hub.enable_progress_bars,
                                         transformers_logging.enable_progress_bar), strict=True):
            if enabled:
                enable()
