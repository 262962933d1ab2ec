"""How signals are evaluated: :class:`EvaluationOptions`, the one options object of
:func:`much_metric.report.evaluate_signals` and :func:`much_metric.benchmark.run_benchmark` (which re-exports it),
frozen, keyword-only, each constraint declared once and checked when the object is built -- before anything is
loaded. The resample bounds every bootstrap option obeys are :class:`~much_metric.scoring.Bootstrap`'s own (one
rule, :data:`much_metric.scoring.RESAMPLES`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from much_dataset.params import FRACTION, RANDOM_STATE, InvalidParameterError, OneOf, check_param
from much_dataset.schema import HUMAN_LABELS_0, HUMAN_LABELS_1, LABELS
from much_metric.scoring import Bootstrap
from much_metric.scoring.engine import AGGREGATOR, STOPWORD_MODE

__all__ = ["BREAKDOWNS", "LABEL_CHOICES", "MIN_COVERAGE", "EvaluationOptions"]

#: ``by=`` choices: dataset columns, or a field of the generation config
#: (docs/reference-behaviour.md#generation-configs).
BREAKDOWNS = ("lang", "generation_config", "model", "temperature")
#: ``labels=`` choices: a label column, or the labels both human annotators agree on.
LABEL_CHOICES = (LABELS, HUMAN_LABELS_0, HUMAN_LABELS_1, "human-agreed")
#: Default least fraction of the dataset's samples a signal must cover (``min_coverage``).
MIN_COVERAGE = 0.95

BREAKDOWN = OneOf(BREAKDOWNS)
LABEL = OneOf(LABEL_CHOICES)


def _names(owner: str, name: str, value: Any, constraint: OneOf, *, empty: bool) -> tuple[str, ...]:
    """``value`` (one name or a sequence of names) as a tuple without repeats, each checked against ``constraint``."""
    names = (value,) if isinstance(value, str) else value
    if not isinstance(names, Sequence) or (not empty and not names):
        raise InvalidParameterError(f"{owner}: {name} must be a name or a {'' if empty else 'non-empty '}sequence "
                                    f"of names, each {constraint.description}, got {value!r}")
    for item in names:
        check_param(name, item, constraint, owner=owner)
    return tuple(dict.fromkeys(names))


@dataclass(frozen=True, kw_only=True)
class EvaluationOptions:
    """How signals are evaluated (:func:`much_metric.report.evaluate_signals`,
    :func:`much_metric.benchmark.run_benchmark`).

    Attributes
    ----------
    aggregator : str or sequence of str, default "product"
        Token scores -> claim scores: one of ``("product", "mean", "max", "geometric")``, or several
        (``evaluate_signals`` scores each; ``run_benchmark`` takes one). :attr:`aggregators` is the tuple.
    stopword_handling : {"null", "exclude"}, default "null"
        As in :func:`much_metric.score`.
    by : str or sequence of str, default ()
        Breakdowns (:data:`BREAKDOWNS`): per-group metrics in each row's ``score.by``.
    bootstrap : Bootstrap or None, default Bootstrap()
        Resampling of the samples for 95 % intervals (40 to 100000 resamples, as every Bootstrap); None: no
        intervals.
    min_coverage : float, default 0.95
        Least fraction of the samples with ground truth a signal must cover (0 accepts any partial coverage).
    labels : str, default "labels"
        The ground truth (:data:`LABEL_CHOICES`); samples without it are left out and counted.
    claim_signals : str or sequence of str, default ()
        Names of claim-level signals (one value per chunk) besides those ending with ``@claim``.
    floors : bool, default True
        Add the random, constant and length reference rows (``EvaluationTable.floors``).
    random_state : int or None, default None
        Seed of the random floor (None: the bootstrap's ``random_state``, 0 without bootstrap).
    include_training_rows : bool, default False
        A signal whose metadata names the rows it was trained on (a learned detector) is scored on the other rows
        only; True scores every row (``training_rows`` of ``evaluate_signals`` is then ignored).

    Examples
    --------
    >>> from much_metric.report import EvaluationOptions
    >>> EvaluationOptions(aggregator=["mean", "max"], bootstrap=None).aggregators
    ('mean', 'max')
    >>> EvaluationOptions(aggregator="median")
    Traceback (most recent call last):
    ...
    much_dataset.params.InvalidParameterError: EvaluationOptions: aggregator must be one of ('product', 'mean', 'max', 'geometric'), got 'median'
    """  # noqa: E501

    aggregator: str | tuple[str, ...] = "product"
    stopword_handling: Literal["null", "exclude"] = "null"
    by: str | tuple[str, ...] = ()
    bootstrap: Bootstrap | None = field(default_factory=Bootstrap)
    min_coverage: float = MIN_COVERAGE
    labels: str = LABELS
    claim_signals: str | tuple[str, ...] = ()
    floors: bool = True
    random_state: int | None = None
    include_training_rows: bool = False

    def __post_init__(self) -> None:
        owner = "EvaluationOptions"
        aggregators = _names(owner, "aggregator", self.aggregator, AGGREGATOR, empty=False)
        if not isinstance(self.aggregator, str):  # a sequence is kept as a tuple (hashable, frozen)
            object.__setattr__(self, "aggregator", aggregators)
        check_param("stopword_handling", self.stopword_handling, STOPWORD_MODE, owner=owner)
        object.__setattr__(self, "by", _names(owner, "by", self.by, BREAKDOWN, empty=True))
        check_param("min_coverage", self.min_coverage, FRACTION, owner=owner)
        check_param("labels", self.labels, LABEL, owner=owner)
        claim_signals = (self.claim_signals,) if isinstance(self.claim_signals, str) else self.claim_signals
        if not isinstance(claim_signals, Sequence) or not all(isinstance(n, str) for n in claim_signals):
            raise InvalidParameterError(f"{owner}: claim_signals must be a sequence of signal names, got "
                                        f"{self.claim_signals!r}")
        object.__setattr__(self, "claim_signals", tuple(claim_signals))
        check_param("random_state", self.random_state, RANDOM_STATE, owner=owner)
        for flag in ("floors", "include_training_rows"):
            if not isinstance(getattr(self, flag), bool):
                raise InvalidParameterError(f"{owner}: {flag} must be True or False, got {getattr(self, flag)!r}")
        if self.bootstrap is not None:
            if not isinstance(self.bootstrap, Bootstrap):
                raise InvalidParameterError(f"{owner}: bootstrap must be a much_metric.Bootstrap or None, "
                                            f"got {type(self.bootstrap).__name__}")

    @property
    def aggregators(self) -> tuple[str, ...]:
        """The aggregator(s) as a tuple, in the order given."""
        return (self.aggregator,) if isinstance(self.aggregator, str) else tuple(self.aggregator)

    @property
    def floor_random_state(self) -> int:
        """The random floor's seed: ``random_state``, else the bootstrap's, else 0."""
        if self.random_state is not None:
            return self.random_state
        return self.bootstrap.random_state if self.bootstrap is not None else 0
