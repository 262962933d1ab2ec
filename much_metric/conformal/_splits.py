"""Seeded calibration/test splits by answer or by Wikipedia article, and the "claims kept" metric over many of them.

A split never cuts an answer: all its claims are on one side. ``unit="article"`` keeps every answer about one
Wikipedia article on one side too (as the learned track's protocols do, :mod:`much_metric.learned.splits`: MUCH
translates its questions, so answers in four languages share an article); an answer without an article is its own
unit.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from much_dataset.params import OPEN_FRACTION, POSITIVE_INT, InvalidParameterError, OneOf, check_param
from much_metric.conformal._calibration import MIN_ANSWERS, calibrate
from much_metric.conformal._claims import ClaimSet

__all__ = [
    "ALPHAS", "BOARD_SPLITS", "ClaimsKept", "Splits", "claims_kept", "claims_kept_of_table", "claims_kept_summary",
    "split_masks",
]

#: The alphas "claims kept" is reported at.
ALPHAS = (0.05, 0.1, 0.2)

UNITS = ("answer", "article")


def _units(claims: ClaimSet, unit: str) -> np.ndarray:
    answers = claims.answer.astype(str)
    if unit == "answer":
        return answers
    if "article" not in claims.groups:
        raise InvalidParameterError("conformal split: unit='article' needs an 'article' column in the claims' groups "
                                    "(claims_from_result(..., articles=...))")
    article = np.asarray([str(a) for a in claims.groups["article"]], dtype=object)
    return np.where(article != "", "article:" + article, "answer:" + answers.astype(object))


@dataclass(frozen=True)
class Splits:
    """Seeded calibration/test splits: ``n_splits`` draws of a ``calibration_fraction`` of the units (``"answer"`` or
    ``"article"``), seeded by ``random_state``."""

    n_splits: int = 200
    unit: str = "answer"
    calibration_fraction: float = 0.5
    random_state: int = 0

    def __post_init__(self) -> None:
        check_param("n_splits", self.n_splits, POSITIVE_INT, owner="Splits")
        check_param("calibration_fraction", self.calibration_fraction, OPEN_FRACTION, owner="Splits")
        check_param("unit", self.unit, OneOf(UNITS), owner="Splits")


#: 200 splits of half the answers, seed 0.
DEFAULT_SPLITS = Splits()


def split_masks(claims: ClaimSet, splits: Splits = DEFAULT_SPLITS) -> np.ndarray:
    """``(n_splits, n_claims)`` bool: True where a claim is in split ``s``'s calibration set. Each split draws a
    seeded random ``calibration_fraction`` of the units (answers or articles); the same seed gives the same splits
    for every detector scored on the same claims (paired)."""
    distinct, inverse = np.unique(_units(claims, splits.unit), return_inverse=True)
    n_cal = int(round(splits.calibration_fraction * distinct.size))
    if n_cal < 1 or n_cal >= distinct.size:
        raise InvalidParameterError(f"split_masks: {distinct.size} {splits.unit}s leave no calibration or no test "
                                    f"{splits.unit}")
    rng = np.random.default_rng(splits.random_state)
    keys = rng.random((splits.n_splits, distinct.size))
    ranks = np.argsort(np.argsort(keys, axis=1), axis=1)
    return (ranks < n_cal)[:, inverse]


@dataclass(frozen=True)
class ClaimsKept:
    """Per detector and alpha, over the same splits: ``kept[detector][alpha]`` and ``correct_kept[...]``, arrays of
    shape ``(n_splits,)`` -- the fraction of the test claims (of the correct test claims) the calibrated filter
    keeps. :meth:`summary` gives means and intervals, :meth:`paired` the difference of two detectors."""

    guarantee: str
    by: str | None
    alphas: tuple[float, ...]
    n_splits: int
    kept: dict[str, dict[float, np.ndarray]]
    correct_kept: dict[str, dict[float, np.ndarray]]
    confidence_level: float = 0.95

    def _interval(self, values: np.ndarray) -> tuple[float, float]:
        tail = (1.0 - self.confidence_level) / 2.0
        low, high = np.quantile(values, [tail, 1.0 - tail])
        return float(low), float(high)

    def summary(self, detector: str, alpha: float) -> dict[str, float | tuple[float, float]]:
        """Mean over the splits and the central ``confidence_level`` range of the splits' values (how much one
        calibration/test split moves the number)."""
        kept, correct = self.kept[detector][alpha], self.correct_kept[detector][alpha]
        return {"kept": float(kept.mean()), "kept_interval": self._interval(kept),
                "correct_kept": float(correct.mean()), "correct_kept_interval": self._interval(correct)}

    def paired(self, detector: str, other: str, alpha: float) -> dict[str, float | tuple[float, float]]:
        """``detector`` minus ``other`` on the same splits: mean difference of the fraction kept, its range over the
        splits, and the fraction of splits where ``detector`` keeps more."""
        difference = self.kept[detector][alpha] - self.kept[other][alpha]
        return {"difference": float(difference.mean()), "interval": self._interval(difference),
                "wins": float(np.mean(difference > 0))}

    def to_dict(self) -> dict[str, object]:
        return {"guarantee": self.guarantee, "by": self.by, "n_splits": self.n_splits,
                "confidence_level": self.confidence_level,
                "detectors": {name: {str(alpha): self.summary(name, alpha) for alpha in self.alphas}
                              for name in self.kept}}


def claims_kept(claims_by_detector: Mapping[str, ClaimSet], *, alphas: Sequence[float] = ALPHAS,
                guarantee: str = "answer", by: str | None = None, splits: Splits = DEFAULT_SPLITS) -> ClaimsKept:
    """"Claims kept at alpha": for each detector, calibrate on each split's calibration answers, filter its test
    claims, and record the fraction of test claims (and of correct test claims) kept. Every detector sees the same
    splits (drawn from the first detector's claims: the detectors must score the same claims, as the paired
    evaluation table's rows do)."""
    if not claims_by_detector:
        raise InvalidParameterError("claims_kept: no detector given")
    names = list(claims_by_detector)
    reference = claims_by_detector[names[0]]
    for name in names[1:]:
        other = claims_by_detector[name]
        if len(other) != len(reference) or not np.array_equal(other.answer, reference.answer):
            raise InvalidParameterError(f"claims_kept: detector {name!r} does not score the same claims as "
                                        f"{names[0]!r} (pair them: much evaluate --paired)")
    masks = split_masks(reference, splits)
    n_splits = splits.n_splits
    alphas = tuple(float(a) for a in alphas)
    kept: dict[str, dict[float, np.ndarray]] = {name: {a: np.zeros(n_splits) for a in alphas} for name in names}
    correct_kept: dict[str, dict[float, np.ndarray]] = {name: {a: np.zeros(n_splits) for a in alphas}
                                                        for name in names}
    for s, in_calibration in enumerate(masks):
        for name in names:
            claims = claims_by_detector[name]
            calibration_set, test = claims.subset(in_calibration), claims.subset(~in_calibration)
            correct = ~test.hallucinated
            for alpha in alphas:
                fitted = calibrate(calibration_set, alpha=alpha, guarantee=guarantee, by=by, min_answers=MIN_ANSWERS)
                selection = fitted.apply(test)
                kept[name][alpha][s] = selection.kept.mean()
                correct_kept[name][alpha][s] = selection.kept[correct].mean() if correct.any() else np.nan
    return ClaimsKept(guarantee=guarantee, by=by, alphas=alphas, n_splits=n_splits, kept=kept,
                      correct_kept=correct_kept)


def claims_kept_of_table(table: Any, *, alphas: Sequence[float] = ALPHAS, guarantee: str = "answer",
                         splits: Splits = DEFAULT_SPLITS, display: Callable[[str], str] = str) -> ClaimsKept:
    """:func:`claims_kept` of every row of a paired :class:`much_metric.report.EvaluationTable` (``much evaluate``):
    each (signal, aggregator) row is a detector, named ``display(signal)`` (with its aggregator when the table has
    several), all on the same splits by answer."""
    from much_metric.conformal._claims import claims_from_result

    several = len({r.aggregator for r in table.results}) > 1
    detectors = {(display(r.signal_name) + (f" ({r.aggregator or 'claim'})" if several else "")):
                 claims_from_result(r, table.generation_ids) for r in table.results}
    return claims_kept(detectors, alphas=alphas, guarantee=guarantee, splits=splits)


#: The board's splits: fewer than the report's 200, scored once per submitted signal (about a second each).
BOARD_SPLITS = Splits(n_splits=50)


def claims_kept_summary(result: Any, generation_ids: Sequence[str],
                        splits: Splits = BOARD_SPLITS) -> dict[str, dict[str, Any]] | None:
    """JSON "claims kept at alpha" of one evaluation row (the public board's, computed by its server on the data it
    scores): ``{"0.05": {"kept", "kept_interval", "correct_kept", "correct_kept_interval"}, ...}`` for the
    answer-level filter, or None when the data hold too few answers to calibrate at alpha 0.05."""
    from much_metric.conformal._claims import claims_from_result

    try:
        kept = claims_kept({"row": claims_from_result(result, generation_ids)}, splits=splits)
    except InvalidParameterError:
        return None
    return {f"{alpha:g}": {key: list(value) if isinstance(value, tuple) else value
                           for key, value in kept.summary("row", alpha).items()} for alpha in kept.alphas}
