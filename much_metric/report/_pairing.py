"""Which samples the rows of one table are scored on: the paired rule every comparison table follows.

A table that compares signals compares them **on the same samples and claims**. By default
(``EvaluationOptions(paired=True)``) every signal and every floor of :func:`much_metric.report.evaluate_signals` is
scored on the samples with ground truth that every listed signal covers: a learned detector's held-out rows (the
rows it trained or validated on are left out for every row of the table, not for its own row only), the rows an
internals pack holds, the rows a partial signal file has values for. :class:`RowPairing` records what was kept and
what was left out and why; :meth:`RowPairing.describe` is the one line the commands print under their header.

``paired=False`` (``much run --no-paired``, ``much evaluate --no-paired``) scores each signal on every sample it
covers and the floors on every sample with ground truth: full-data numbers, printed with each row's sample count and
a line saying that the rows are not comparable with one another.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

__all__ = ["RowPairing", "common_rows"]


def common_rows(rows_of: Mapping[str, list[int]]) -> list[int]:
    """The dataset rows every signal covers, in dataset order (``rows_of``: signal -> its covered rows)."""
    sets = [set(rows) for rows in rows_of.values()]
    if not sets:
        return []
    return sorted(set.intersection(*sets))


@dataclass(frozen=True, kw_only=True)
class RowPairing:
    """The samples of one table, as :func:`much_metric.report.evaluate_signals` chose them.

    Attributes
    ----------
    paired : bool
        Every row (signals and floors) on the same samples (True), or each signal on the samples it covers.
    n_samples : int
        Paired: the samples every row is scored on. Unpaired: the samples with ground truth.
    n_with_truth : int
        The samples with ground truth (before any signal's rows are left out).
    trained : dict
        Signal -> samples left out because they trained or validated it (a learned detector's metadata).
    missing : dict
        Signal -> samples with ground truth that have no values of it.
    reasons : dict
        Signal -> why it lacks values (e.g. ``"not in the internals pack PACK"``); default wording otherwise.
    samples_of : dict
        Unpaired: signal -> the samples its row is scored on (paired: empty, every row has ``n_samples``).

    Examples
    --------
    >>> from much_metric.report import RowPairing
    >>> RowPairing(paired=True, n_samples=262, n_with_truth=606, trained={"learned_x": 344}).describe()
    'paired: every row is scored on the same 262 of the 606 samples with ground truth; 344 left out: 344 trained or validated learned_x (--no-paired: each row on all its samples, not comparable)'
    >>> RowPairing(paired=True, n_samples=606, n_with_truth=606).describe() is None
    True
    """  # noqa: E501

    paired: bool
    n_samples: int
    n_with_truth: int
    trained: dict[str, int] = field(default_factory=dict)
    missing: dict[str, int] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)
    samples_of: dict[str, int] = field(default_factory=dict)

    @property
    def n_left_out(self) -> int:
        """Samples with ground truth that no row of a paired table is scored on (0 for an unpaired table)."""
        return self.n_with_truth - self.n_samples if self.paired else 0

    def causes(self, display: Callable[[str], str] = str) -> list[str]:
        """``["344 trained or validated Learned linear (...)", "151 not in the internals pack PACK (RAUQ)"]``: one
        entry per signal that leaves samples out (a sample may have several causes)."""
        out = [f"{count} trained or validated {display(name)}" for name, count in self.trained.items() if count]
        by_reason: dict[tuple[int, str], list[str]] = {}  # signals sharing a cause (one pack) are named together
        for name, count in self.missing.items():
            if count:
                by_reason.setdefault((count, self.reasons.get(name, "without values of")), []).append(display(name))
        for (count, reason), names in by_reason.items():
            out.append(f"{count} {reason} {', '.join(names)}")
        return out

    def describe(self, display: Callable[[str], str] = str) -> str | None:
        """The one line a command prints under its header: which samples the rows are scored on and what was left
        out and why; None for a paired table that left nothing out (every row on every sample with ground
        truth)."""
        if not self.paired:
            counts = ", ".join(f"{display(name)}: {count}" for name, count in self.samples_of.items())
            return (f"unpaired (--no-paired): each row is scored on the samples it covers ({counts}; floors: "
                    f"{self.n_with_truth}): the rows are on different samples and are not comparable with one another")
        if not self.n_left_out:
            return None
        return (f"paired: every row is scored on the same {self.n_samples} of the {self.n_with_truth} samples with "
                f"ground truth; {self.n_left_out} left out: {'; '.join(self.causes(display))} (--no-paired: each row "
                "on all its samples, not comparable)")
