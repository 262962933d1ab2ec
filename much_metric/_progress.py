"""When a nested progress bar is shown: only on a terminal.

A bar nested under another (tqdm ``position`` > 0: a signal's blocks under the signals bar, the NLI batches under
them) moves the cursor up with the ``ESC [A`` control sequence after each refresh. On a terminal that redraws the
bars in place; in a log file or a pipe it leaves a stray ``[A`` on every line. The outer bar stays (it writes
carriage returns only), so a redirected run still shows its progress.
"""

from __future__ import annotations

import sys

__all__ = ["nested_bar_disabled"]


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
