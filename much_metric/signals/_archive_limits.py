"""What an untrusted submission archive may hold (:class:`ArchiveLimits`, :data:`SIGNAL_NAME_PATTERN`) and the one
error a refused submission raises (:class:`SubmissionRejected`): shared by the archive reader
(:mod:`much_metric.signals._archive`) and the signal-file parser (:mod:`much_metric.signals._archive_signals`)."""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["DEFAULT_LIMITS", "SIGNAL_NAME_PATTERN", "ArchiveLimits", "SubmissionRejected"]

#: Signal names a submission may use (letters, digits, ``_ . - + @``): safe in a page, a file name and a URL.
SIGNAL_NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+@-]{0,79}$")


class SubmissionRejected(ValueError):
    """The submission is refused; the message says why (shown to the submitter as is)."""


@dataclass(frozen=True)
class ArchiveLimits:
    """Upper bounds on an untrusted archive (defaults fit a MUCH-sized submission of a few signals).

    ``max_unused_bytes`` bounds each file the board keeps but does not use (``README.md``, hidden files, macOS
    forks); ``max_json_bytes`` bounds ``timings.json`` and ``hardware.json``."""

    max_archive_bytes: int = 64 * 2**20
    max_entries: int = 32
    max_entry_bytes: int = 64 * 2**20
    max_total_bytes: int = 256 * 2**20
    max_ratio: float = 100.0
    max_line_bytes: int = 2**20
    max_json_bytes: int = 64 * 2**10
    max_signals: int = 8
    max_rows: int = 200_000
    max_row_groups: int = 256
    max_footer_bytes: int = 4 * 2**20
    max_metadata_bytes: int = 2**20
    max_unused_bytes: int = 64 * 2**10


DEFAULT_LIMITS = ArchiveLimits()
