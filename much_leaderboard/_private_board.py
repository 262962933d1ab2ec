"""The private board: a submission's private values scored, stored rounded, ranked against the public board.

:class:`PrivateBoard` is what :class:`much_leaderboard.Leaderboard` holds once a private split is attached
(:meth:`much_leaderboard.Leaderboard.attach_private`): it separates a submission's private values
(:meth:`PrivateSplit.separate`), counts the daily quota, scores and stores what the board shows
(:class:`much_leaderboard._private_store.PrivateStore`), computes the built-in baselines on the private rows, and
builds the two-board table: every row's public rank, private rank and the shift between them (ranks among the rows
that have both values; the private rank from the rounded values), with Kendall's tau between the two rankings.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from much_leaderboard._admission import DAY_SECONDS, name_key
from much_leaderboard._private import PrivateSplit
from much_leaderboard._private_store import PrivateStore
from much_leaderboard._ranks import competition_ranks, kendall_tau
from much_metric.signals import SubmissionRejected, read_archive

__all__ = ["PrivateBoard", "PRIVATE_METRIC"]

_log = logging.getLogger("much_leaderboard")
#: The one metric the private board shows.
PRIVATE_METRIC = "roc_auc"


class PrivateBoard:
    """The private split of a board whose store is in ``folder``."""

    def __init__(self, split: PrivateSplit, folder: Any) -> None:
        self.split = split
        self.policy = split.policy
        self.store = PrivateStore(folder)

    # -- submissions -------------------------------------------------------------------------------------------
    def reserve(self, submission: str, form: Mapping[str, Any], *, now: float | None = None) -> None:
        """Count a submission with private values against its submitter's daily quota, or refuse it."""
        now = time.time() if now is None else now
        submitter = name_key(form.get("authors", ""))
        full = self.store.reserve(submission, submitter, now, since=now - DAY_SECONDS,
                                  limit=self.policy.daily_limit, board_limit=self.policy.board_daily_limit)
        if full is not None:
            scope, oldest = full
            again = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(oldest + DAY_SECONDS))
            if scope == "board":
                raise SubmissionRejected(
                    f"this board takes at most {self.policy.board_daily_limit} submission(s) with private-split "
                    "values in 24 hours from all submitters together (the board-wide quota that bounds what the "
                    f"private labels can leak); try again after {again}, or submit without the private split's "
                    "values")
            who = f"authors {form.get('authors')!r}" if submitter else "anonymous submitters (no authors)"
            raise SubmissionRejected(
                f"{who}: at most {self.policy.daily_limit} submission(s) with private-split values in 24 hours on "
                f"this board (the quota that bounds what the private labels can leak); try again after {again}, or "
                "submit without the private split's values")

    def forget(self, submission: str) -> None:
        """The submission was refused after all: its quota line and results go."""
        self.store.forget(submission)

    def score(self, submission: str, private: Mapping[str, Mapping[str, np.ndarray]]) -> dict[str, float | None]:
        """Score and store a submission's private values (an empty mapping records "no private values")."""
        try:
            values = self.split.score(private)
        except RuntimeError as error:
            self.store.save(submission, dict.fromkeys(private), self.split.labels_sha256, note=str(error))
            return dict.fromkeys(private)
        self.store.save(submission, values, self.split.labels_sha256)
        return values

    def describe(self, values: Mapping[str, float | None]) -> str:
        """The answer's sentence about the private split."""
        if not values:
            return "no private-split values (the private board lists this entry without them)"
        shown = ", ".join(f"{name} {'n/a' if value is None else f'{value:.{self.policy.decimals}f}'}"
                          for name, value in sorted(values.items()))
        return f"private split ROC-AUC (rounded to {self.policy.decimals} decimals): {shown}"

    def catch_up(self, board: Any) -> None:
        """Score what the store holds but this label file has not scored: the built-in baselines (computed on the
        private rows) and every accepted submission's private values (from its stored archive)."""
        done = self.store.scored(self.split.labels_sha256)
        for entry in board.store.submissions(status="accepted"):
            submission = entry["id"]
            if submission in done:
                continue
            try:
                if entry["kind"] == "baseline":
                    self.score_builtins(submission, [r["signal"] for r in board.store.rows()
                                                     if r["submission"] == submission],
                                        board.baseline_resource_options())
                    continue
                parsed = read_archive(board.store.archive_path(submission).read_bytes(), limits=board.limits)
                _, private = self.split.separate(parsed)
            except SubmissionRejected as error:  # accepted before the private split existed, its values do not fit
                self.store.save(submission, {}, self.split.labels_sha256, note=f"private values not used: {error}")
                continue
            listed = {r["signal"] for r in board.store.rows() if r["submission"] == submission}
            self.score(submission, {name: values for name, values in private.items() if name in listed})

    def score_builtins(self, submission: str, names: Sequence[str], resources: Any = None
                       ) -> dict[str, float | None]:
        """A built-in baseline's entry: its signals computed on the private rows by the server, with the public
        board's ``resources`` (:meth:`much_leaderboard.Leaderboard.baseline_resource_options`: KTC's token-neighbour
        statistics found for the public rows), then scored."""
        from much_metric.baselines import compute_signals

        runs = compute_signals(self.split.rows, list(names), progress=False,
                               **({} if resources is None else {"resources": resources}))
        return self.score(submission, {name: {gid: np.asarray(v, np.float64) for gid, v in runs[name].values.items()}
                                       for name in names})

    # -- the two boards ----------------------------------------------------------------------------------------
    def table(self, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """Every stored row with its public ROC-AUC, private ROC-AUC (as shown), public rank, private rank and
        shift (public - private: positive = the row climbs on the private split); ranks among the rows with both
        values. ``tau``: Kendall's tau-b between the two rankings (None under two rows)."""
        results = self.store.results(self.split.labels_sha256)
        out = []
        for row in rows:
            value, note = results.get((row["submission"], row["signal"]), (None, None))
            out.append({"key": f"{row['submission']}/{row['signal']}", "submission": row["submission"],
                        "signal": row["signal"], "kind": row["kind"], "form": row["form"],
                        "public": row["metrics"]["overall"].get(PRIVATE_METRIC), "private": value, "note": note})
        both = [r for r in out if r["public"] is not None and r["private"] is not None]
        public_ranks = competition_ranks([r["public"] for r in both])
        private_ranks = competition_ranks([r["private"] for r in both])
        for r, public_rank, private_rank in zip(both, public_ranks, private_ranks, strict=True):
            r.update(public_rank=public_rank, private_rank=private_rank, shift=public_rank - private_rank)
        tau = kendall_tau([r["public"] for r in both], [r["private"] for r in both]) if len(both) > 1 else None
        out.sort(key=lambda r: (r.get("private_rank") is None, r.get("private_rank") or 0,
                                -(r["public"] if r["public"] is not None else -np.inf)))
        return {"rows": out, "tau": tau, "n_ranked": len(both), "n_claims": self.split.n_claims,
                "n_samples": len(self.split.ids), "decimals": self.policy.decimals,
                "daily_limit": self.policy.daily_limit, "board_daily_limit": self.policy.board_daily_limit,
                "min_claims": self.policy.min_claims}
