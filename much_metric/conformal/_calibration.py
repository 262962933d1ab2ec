"""Calibrate a conformal filter on labelled claims (:func:`calibrate`), apply it to new ones
(:meth:`ConformalCalibration.apply`, :func:`filter_claims`), save and load it as a JSON threshold file."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from much_dataset.params import POSITIVE_INT, InvalidParameterError, OneOf, check_param
from much_metric.conformal._claims import ClaimSet
from much_metric.conformal._core import (
    answer_level_threshold,
    answer_risk_scores,
    check_alpha,
    min_answers_for,
    select_claims,
)

__all__ = ["GUARANTEES", "MIN_ANSWERS", "ConformalCalibration", "GroupCalibration", "Selection", "calibrate",
           "filter_claims", "load_calibration"]

#: What each method promises, under exchangeable calibration and new answers (claims for "claim").
GUARANTEES = {
    "answer": "P(every kept claim of a new answer is correct) >= 1 - alpha (Mohri & Hashimoto 2024)",
    "claim": "E[fraction of hallucinated claims among the kept claims] <= alpha (conformal selection, Jin & Candes "
             "2023)",
}

#: Default least number of calibration answers per group: below it a group's guarantee rests on too few answers.
MIN_ANSWERS = 20

#: Version of the threshold file's layout.
FILE_FORMAT = "much-conformal/1"


@dataclass(frozen=True)
class GroupCalibration:
    """One group's calibration: its sizes, the answer-level ``threshold`` (keep uncertainty < it) or the claim-level
    ``null_scores`` (sorted uncertainties of its hallucinated calibration claims, for the conformal p-values)."""

    n_answers: int
    n_claims: int
    n_hallucinated: int
    threshold: float | None = None
    null_scores: np.ndarray | None = None


@dataclass(frozen=True)
class Selection:
    """What a calibration keeps of some claims: ``kept`` (bool per claim) and ``covered`` (the claim's group was
    calibrated, so the guarantee applies; uncovered claims are never kept); ``uncovered_groups``: their groups."""

    kept: np.ndarray
    covered: np.ndarray
    uncovered_groups: tuple[str, ...] = ()

    @property
    def within_guarantee(self) -> bool:
        return bool(self.covered.all())


@dataclass(frozen=True)
class ConformalCalibration:
    """A calibrated conformal filter: ``guarantee`` (``"answer"`` or ``"claim"``, :data:`GUARANTEES`), ``alpha``,
    ``by`` (the grouping column, None = one pooled group ``""``), the per-group calibrations, the signal it was
    calibrated for (``signal``, ``aggregation``: how its claim scores were made) and the calibration answers
    (``calibration_rows``: generation ids; ``calibration_hash``: SHA-256 of them and of their claims)."""

    guarantee: str
    alpha: float
    by: str | None
    groups: dict[str, GroupCalibration]
    min_answers: int
    calibration_rows: tuple[str, ...]
    calibration_hash: str
    signal: str = ""
    aggregation: dict[str, Any] = field(default_factory=dict)

    def for_signal(self, signal: str, aggregation: dict[str, Any]) -> ConformalCalibration:
        """This calibration, recording the signal and the aggregation its claim scores came from."""
        return replace(self, signal=str(signal), aggregation=dict(aggregation))

    def describe(self) -> str:
        sizes = ", ".join(f"{name or 'all'}: {g.n_answers} answers / {g.n_claims} claims"
                          for name, g in sorted(self.groups.items()))
        return (f"{self.guarantee}-level conformal filter at alpha={self.alpha:g}"
                f"{f' per {self.by}' if self.by else ''} ({sizes}); guarantee: {GUARANTEES[self.guarantee]}")

    def group(self, value: str | None) -> GroupCalibration:
        """The calibration of the group ``value`` (of the ``by`` column; None for a pooled calibration), or
        :class:`InvalidParameterError` when it is outside the guarantee (not calibrated, or no group given)."""
        if self.by is None:
            return self.groups[""]
        if value is None:
            raise InvalidParameterError(f"the conformal calibration is per {self.by} ({sorted(self.groups)}): name "
                                        f"the answer's {self.by}")
        if str(value) not in self.groups:
            raise InvalidParameterError(f"{self.by}={value!r} is outside the guarantee: the calibration holds "
                                        f"{self.by} {sorted(self.groups)} only")
        return self.groups[str(value)]

    def flag_threshold(self, value: str | None = None) -> float:
        """Answer level: the finite threshold of "flag claims with score >= threshold" (:class:`ClaimMonitor`'s
        rule) equal to this filter on finite scores (keep nothing: the lowest float; keep all: the highest)."""
        if self.guarantee != "answer":
            raise InvalidParameterError("a claim-level (conformal selection) calibration has no fixed threshold: "
                                        "it selects among an answer's claims once the answer is complete")
        threshold = self.group(value).threshold
        return float(np.clip(threshold, -np.finfo(np.float64).max, np.finfo(np.float64).max))

    def apply(self, claims: ClaimSet) -> Selection:
        """Which of ``claims`` to keep. Each claim uses its group's calibration; a claim of a group that was not
        calibrated is outside the guarantee: not kept, and named in ``Selection.uncovered_groups``. The claim-level
        selection is made jointly over the given claims of each group (Benjamini-Hochberg over that batch)."""
        values = claims.group_values(self.by)
        kept = np.zeros(len(claims), dtype=bool)
        covered = np.isin(values, list(self.groups))
        for name, group in self.groups.items():
            mine = values == name
            if not mine.any():
                continue
            scores = claims.claim_scores[mine]
            if self.guarantee == "answer":
                kept[mine] = scores < group.threshold
            else:
                kept[mine] = select_claims(scores, group.null_scores, group.n_claims, self.alpha)
        return Selection(kept=kept, covered=covered, uncovered_groups=tuple(sorted(set(values[~covered]))))

    def to_dict(self) -> dict[str, Any]:
        """The threshold file's JSON object (infinite thresholds written as the strings ``"inf"`` / ``"-inf"``)."""
        return {"format": FILE_FORMAT, "method": f"conformal-{self.guarantee}", "guarantee": self.guarantee,
                "statement": GUARANTEES[self.guarantee], "assumption": "calibration and new answers exchangeable",
                "alpha": self.alpha, "signal": self.signal, "aggregation": self.aggregation, "by": self.by,
                "min_answers": self.min_answers,
                "groups": {name: {"n_answers": g.n_answers, "n_claims": g.n_claims,
                                  "n_hallucinated": g.n_hallucinated,
                                  "threshold": None if g.threshold is None else _number(g.threshold),
                                  "null_scores": None if g.null_scores is None else g.null_scores.tolist()}
                           for name, g in sorted(self.groups.items())},
                "calibration_rows": list(self.calibration_rows), "calibration_hash": self.calibration_hash}

    def save(self, path: str | Path) -> Path:
        from much_metric.fileio import atomic_write_bytes

        path = Path(path)
        atomic_write_bytes(path, json.dumps(self.to_dict(), indent=1).encode("utf-8"))
        return path


def _number(value: float) -> float | str:
    return value if math.isfinite(value) else ("inf" if value > 0 else "-inf")


def _float(value: Any) -> float:
    return float(value)  # float("inf") / float("-inf") read the strings back


def load_calibration(path: str | Path) -> ConformalCalibration:
    """Read a threshold file written by :meth:`ConformalCalibration.save` (``much calibrate --conformal``)."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("format") != FILE_FORMAT:
            raise ValueError(f"format is {data.get('format')!r}, not {FILE_FORMAT!r}")
        groups = {name: GroupCalibration(
            n_answers=int(g["n_answers"]), n_claims=int(g["n_claims"]), n_hallucinated=int(g["n_hallucinated"]),
            threshold=None if g["threshold"] is None else _float(g["threshold"]),
            null_scores=None if g["null_scores"] is None else np.asarray(g["null_scores"], dtype=np.float64))
            for name, g in data["groups"].items()}
        calibration = ConformalCalibration(
            guarantee=check_param("guarantee", data["guarantee"], OneOf(tuple(GUARANTEES))),
            alpha=check_alpha(data["alpha"], "load_calibration"), by=data["by"], groups=groups,
            min_answers=int(data["min_answers"]), calibration_rows=tuple(data["calibration_rows"]),
            calibration_hash=str(data["calibration_hash"]), signal=str(data.get("signal", "")),
            aggregation=dict(data.get("aggregation") or {}))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        raise InvalidParameterError(f"conformal threshold file {path}: not readable ({type(error).__name__}: "
                                    f"{error}); write one with `much calibrate --conformal`") from None
    return calibration


def _hash(claims: ClaimSet) -> str:
    # independent of the claims' order: sorted by answer, then score, then label
    order = np.lexsort((claims.hallucinated, claims.claim_scores, claims.answer.astype(str)))
    digest = hashlib.sha256()
    digest.update("\n".join(claims.answer[order].astype(str)).encode("utf-8"))
    digest.update(np.ascontiguousarray(claims.claim_scores[order], dtype="<f8").tobytes())
    digest.update(np.ascontiguousarray(claims.hallucinated[order], dtype=bool).tobytes())
    return digest.hexdigest()


def calibrate(claims: ClaimSet, *, alpha: float = 0.1, guarantee: str = "answer", by: str | None = None,
              min_answers: int = MIN_ANSWERS) -> ConformalCalibration:
    """Calibrate a conformal claim filter on labelled ``claims`` (the calibration answers).

    ``guarantee="answer"`` (Mohri & Hashimoto 2024): for a new answer exchangeable with the calibration answers,
    P(every kept claim is correct) >= 1 - alpha. ``guarantee="claim"`` (conformal selection, Jin & Candès 2023):
    for new claims exchangeable with the calibration claims, E[fraction of hallucinated among the kept] <= alpha.
    ``by`` (a column of ``claims.groups``: ``lang``, ``generation_config`` ...): one calibration per group, so the
    guarantee holds within each group (for answers exchangeable within it), not only on average over groups (at
    claim level the FDR is then bounded per group only: a ratio's expectation does not mix over groups).
    A group with fewer than ``min_answers`` calibration answers -- or, at answer level, fewer than the
    ``(1 - alpha) / alpha`` answers needed to keep anything -- is refused (:class:`InvalidParameterError` naming
    the group and its size). :meth:`ConformalCalibration.for_signal` records which signal the scores came from.

    Examples
    --------
    Forty answers, each with a correct claim (uncertainty 0.1) and a hallucinated one (0.9): the answer-level filter
    keeps a new answer's claims below 0.9.

    >>> import numpy as np
    >>> from much_metric.conformal import ClaimSet, calibrate
    >>> answers = np.repeat([f"g{i}" for i in range(40)], 2)
    >>> labelled = ClaimSet(claim_scores=np.tile([0.1, 0.9], 40), answer=answers,
    ...                     hallucinated=np.tile([False, True], 40))
    >>> fitted = calibrate(labelled, alpha=0.1)
    >>> fitted.groups[""].threshold, fitted.groups[""].n_answers
    (0.9, 40)
    >>> new = ClaimSet(claim_scores=np.array([0.2, 0.95]), answer=np.array(["new", "new"]))
    >>> fitted.apply(new).kept.tolist()
    [True, False]
    """
    alpha = check_alpha(alpha, "calibrate")
    check_param("guarantee", guarantee, OneOf(tuple(GUARANTEES)), owner="calibrate")
    check_param("min_answers", min_answers, POSITIVE_INT, owner="calibrate")
    if claims.hallucinated is None:
        raise InvalidParameterError("calibrate: the calibration claims need labels (hallucinated)")
    least = max(min_answers, min_answers_for(alpha)) if guarantee == "answer" else min_answers
    values = claims.group_values(by)
    groups: dict[str, GroupCalibration] = {}
    for name in sorted(set(values)):
        mine = claims.subset(values == name)
        n_answers = len(np.unique(mine.answer))
        if n_answers < least:
            where = f"group {by}={name!r}" if by else "the calibration set"
            raise InvalidParameterError(
                f"calibrate: {where} has {n_answers} calibration answers, fewer than the minimum {least} (alpha="
                f"{alpha:g}, min_answers={min_answers}): label more answers of it, raise alpha or group coarser")
        sizes = {"n_answers": n_answers, "n_claims": len(mine), "n_hallucinated": int(mine.hallucinated.sum())}
        if guarantee == "answer":
            risk = answer_risk_scores(mine.claim_scores, mine.hallucinated, mine.answer)
            groups[name] = GroupCalibration(**sizes, threshold=answer_level_threshold(risk, alpha))
        else:
            groups[name] = GroupCalibration(**sizes, null_scores=np.sort(mine.claim_scores[mine.hallucinated]))
    return ConformalCalibration(guarantee=guarantee, alpha=alpha, by=by, groups=groups, min_answers=min_answers,
                                calibration_rows=tuple(sorted(set(claims.answer.astype(str)))),
                                calibration_hash=_hash(claims))


def filter_claims(calibration: ConformalCalibration | str | Path, claim_scores: Sequence[float], *,
                  group: str | None = None, drop: bool = True) -> list[int] | list[bool]:
    """Filter one stored answer's claim uncertainties (already aggregated as the calibration's signal was) with a
    calibration or a threshold file: the indices of the kept claims (``drop=True``) or one keep-flag per claim.
    ``group``: the answer's value of the calibration's ``by`` column (its language ...); a group that was not
    calibrated is outside the guarantee and raises :class:`InvalidParameterError`."""
    if not isinstance(calibration, ConformalCalibration):
        calibration = load_calibration(calibration)
    scores = np.asarray(claim_scores, dtype=np.float64)
    try:
        calibration.group(group)
    except InvalidParameterError as error:
        raise InvalidParameterError(f"filter_claims: {error} (group=)") from None
    name = "" if calibration.by is None else str(group)
    claims = ClaimSet(claim_scores=scores, answer=np.zeros(len(scores), dtype=object),
                      groups={} if calibration.by is None else {calibration.by: np.full(len(scores), name, object)})
    selection = calibration.apply(claims)
    return np.flatnonzero(selection.kept).tolist() if drop else selection.kept.tolist()
