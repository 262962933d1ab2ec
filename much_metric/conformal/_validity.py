"""Validity measured, not assumed: the realised violation rate of a guarantee over many seeded splits.

Given the data, each split is an independent random permutation of the units, so one Bernoulli event per split is
an independent draw with probability exactly the guaranteed quantity:

* answer level: a test answer drawn at random violates when it keeps a hallucinated claim -- P(event) is the
  probability the guarantee bounds by alpha;
* claim level: a kept test claim drawn at random is hallucinated (a split that keeps nothing is a trial without
  event) -- P(event) is E[hallucinated kept / max(kept, 1)], the false discovery rate bounded by alpha.

The count of events over the splits is binomial, so its Wilson interval is exact in coverage up to the Wilson
approximation; the mean over every test answer (every kept claim) of each split is reported too (same expectation,
lower variance, no binomial interval).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from much_metric.conformal._calibration import MIN_ANSWERS, calibrate
from much_metric.conformal._claims import ClaimSet
from much_metric.conformal._splits import ALPHAS, DEFAULT_SPLITS, Splits, split_masks

__all__ = ["Violations", "violation_rates", "wilson_interval"]


def wilson_interval(events: int, trials: int, confidence_level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion (``(nan, nan)`` for no trial)."""
    if trials == 0:
        return math.nan, math.nan
    from statistics import NormalDist

    z = NormalDist().inv_cdf(0.5 + confidence_level / 2.0)
    p = events / trials
    centre = (p + z * z / (2 * trials)) / (1 + z * z / trials)
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / (1 + z * z / trials)
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class Violations:
    """One (alpha, group) cell: ``events`` among ``trials`` one-per-split draws, their ``rate`` and Wilson
    ``interval``; ``mean_realised``: the mean over splits of the per-split violation fraction (answer level) or
    false discovery proportion (claim level)."""

    alpha: float
    group: str
    events: int
    trials: int
    mean_realised: float

    @property
    def rate(self) -> float:
        return self.events / self.trials if self.trials else math.nan

    @property
    def interval(self) -> tuple[float, float]:
        """The 95 % Wilson interval of :attr:`rate`."""
        return wilson_interval(self.events, self.trials)

    def exceeds(self, confidence_level: float = 0.95) -> bool:
        """The bound lies below the Wilson interval at ``confidence_level``: a violation rate above alpha beyond
        sampling error (checking many cells at once, raise the level: Bonferroni)."""
        return wilson_interval(self.events, self.trials, confidence_level)[0] > self.alpha


def _answer_violations(test: ClaimSet, kept: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per distinct test answer: whether it keeps a hallucinated claim; and the answers' ids."""
    answers, inverse = np.unique(test.answer.astype(str), return_inverse=True)
    bad = np.zeros(answers.size, dtype=bool)
    np.logical_or.at(bad, inverse, kept & test.hallucinated)
    return bad, answers


def violation_rates(claims: ClaimSet, *, guarantee: str = "answer", alphas: Sequence[float] = ALPHAS,
                    by: str | None = None, splits: Splits = DEFAULT_SPLITS) -> list[Violations]:
    """Over seeded calibration/test ``splits``, the violation events of ``guarantee`` per alpha, overall (group
    ``""``) and per group: of ``by`` when given (calibrated per group: group-conditional), else per ``lang`` when the
    claims have it (a pooled calibration, read per language)."""
    masks = split_masks(claims, splits)
    rng = np.random.default_rng(splits.random_state + 1)
    report_by = by if by is not None else "lang"
    report = claims.group_values(report_by) if report_by in claims.groups else claims.group_values(None)
    names = [""] + sorted(set(report) - {""})
    counts = {(a, g): [0, 0, 0.0, 0] for a in alphas for g in names}  # events, trials, sum realised, n realised
    for in_calibration in masks:
        test = claims.subset(~in_calibration)
        test_report = report[~in_calibration]
        for alpha in alphas:
            fitted = calibrate(claims.subset(in_calibration), alpha=alpha, guarantee=guarantee, by=by,
                               min_answers=MIN_ANSWERS)
            kept = fitted.apply(test).kept
            for name in names:
                mine = np.ones(len(test), dtype=bool) if name == "" else test_report == name
                cell = counts[(alpha, name)]
                if guarantee == "answer":
                    bad, _ = _answer_violations(test.subset(mine), kept[mine])
                    if bad.size == 0:
                        continue
                    cell[0] += int(bad[rng.integers(bad.size)])
                    cell[1] += 1
                    cell[2] += float(bad.mean())
                    cell[3] += 1
                else:
                    kept_hallucinated = test.hallucinated[mine][kept[mine]]
                    cell[2] += float(kept_hallucinated.mean()) if kept_hallucinated.size else 0.0
                    cell[3] += 1
                    cell[1] += 1  # nothing kept is a trial without event: P(event) = E[FDP] exactly
                    if kept_hallucinated.size:
                        cell[0] += int(kept_hallucinated[rng.integers(kept_hallucinated.size)])
    return [Violations(alpha=a, group=g, events=c[0], trials=c[1], mean_realised=c[2] / c[3] if c[3] else math.nan)
            for (a, g), c in counts.items()]
