"""How signals are evaluated: :class:`EvaluationOptions`, the one options object of
:func:`much_metric.report.evaluate_signals` and :func:`much_metric.benchmark.run_benchmark` (which re-exports it),
frozen, keyword-only, each constraint declared once and checked when the object is built -- before anything is
loaded. The resample bounds every bootstrap option obeys are :class:`~much_metric.scoring.Bootstrap`'s own (one
rule, :data:`much_metric.scoring.RESAMPLES`)."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from much_dataset.params import FRACTION, RANDOM_STATE, InvalidParameterError, OneOf, check_param
from much_dataset.schema import HUMAN_LABELS_0, HUMAN_LABELS_1, LABELS
from much_metric.scoring import Aggregation, Bootstrap
from much_metric.scoring.engine import AGGREGATOR, STOPWORD_MODE, as_aggregation

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


def _aggregations(owner: str, value: Any) -> tuple[Aggregation, ...]:
    """``aggregation=``: one Aggregation or aggregator name, or a non-empty sequence of them, as a tuple without
    repeats; each drops the EOS claim and reads uncertainties (the signal files' convention), all with one stopword
    rule."""
    items = (value,) if isinstance(value, str | Aggregation) else value
    if not isinstance(items, Sequence) or not items:
        raise InvalidParameterError(f"{owner}: aggregation must be an Aggregation, an aggregator name (one of "
                                    f"{AGGREGATOR.options!r}) or a non-empty sequence of them, got {value!r}")
    aggregations = tuple(dict.fromkeys(as_aggregation(item, owner) for item in items))
    for aggregation in aggregations:
        if not aggregation.drop_last_chunk or aggregation.score_type != "uncertainty":
            raise InvalidParameterError(f"{owner}: aggregation must keep drop_last_chunk=True and score_type="
                                        f"'uncertainty' (signal files hold uncertainties; the EOS claim is never "
                                        f"evaluated), got {aggregation!r}")
    if len({aggregation.stopword_handling for aggregation in aggregations}) > 1:
        raise InvalidParameterError(f"{owner}: the aggregations of one evaluation share one stopword_handling (the "
                                    f"table's claims), got {[a.stopword_handling for a in aggregations]}")
    return aggregations


@dataclass(frozen=True, kw_only=True)
class EvaluationOptions:
    """How signals are evaluated (:func:`much_metric.report.evaluate_signals`,
    :func:`much_metric.benchmark.run_benchmark`, :func:`much_metric.benchmark.evaluate_files`).

    Attributes
    ----------
    aggregation : Aggregation, str or sequence of them, default "product"
        Token scores -> claim scores, as everywhere in the toolkit: an :class:`~much_metric.Aggregation`
        (aggregator and stopword rule) or an aggregator name, or several (``evaluate_signals`` scores each;
        ``run_benchmark`` takes one), all with one stopword rule. Stored as a tuple of Aggregation
        (:attr:`aggregators` and :attr:`stopword_handling` read it). ``aggregator=`` and ``stopword_handling=``, the
        flat spelling of before, still work with a ``FutureWarning``.
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
    paired : bool, default True
        Score every signal and the floors on the same samples: those with ground truth that every signal covers
        and that trained none of them (:class:`much_metric.report.RowPairing` says what was left out and why).
        False: each signal on every sample it covers, the floors on every sample with ground truth -- full-data
        numbers that are not comparable with one another (``--no-paired``).
    progress : bool, default True
        Progress bars (on a terminal) while scoring and scoring spans; False: none (``--no-progress``).

    Examples
    --------
    >>> from much_metric import Aggregation
    >>> from much_metric.report import EvaluationOptions
    >>> EvaluationOptions(aggregation=["mean", "max"], bootstrap=None).aggregators
    ('mean', 'max')
    >>> EvaluationOptions(aggregation=Aggregation(aggregator="max", stopword_handling="exclude")).stopword_handling
    'exclude'
    >>> EvaluationOptions(aggregation="median")
    Traceback (most recent call last):
    ...
    much_dataset.params.InvalidParameterError: EvaluationOptions: aggregation='median' is not an aggregator name: Aggregation: aggregator must be one of ('product', 'mean', 'max', 'geometric'), got 'median'
    """  # noqa: E501

    aggregation: Any = "product"
    by: str | tuple[str, ...] = ()
    bootstrap: Bootstrap | None = field(default_factory=Bootstrap)
    min_coverage: float = MIN_COVERAGE
    labels: str = LABELS
    claim_signals: str | tuple[str, ...] = ()
    floors: bool = True
    random_state: int | None = None
    include_training_rows: bool = False
    paired: bool = True
    progress: bool = True

    def __post_init__(self) -> None:
        owner = "EvaluationOptions"
        object.__setattr__(self, "aggregation", _aggregations(owner, self.aggregation))
        object.__setattr__(self, "by", _names(owner, "by", self.by, BREAKDOWN, empty=True))
        check_param("min_coverage", self.min_coverage, FRACTION, owner=owner)
        check_param("labels", self.labels, LABEL, owner=owner)
        names = (self.claim_signals,) if isinstance(self.claim_signals, str) else self.claim_signals
        if not isinstance(names, Sequence) or not all(isinstance(n, str) for n in names):
            raise InvalidParameterError(f"{owner}: claim_signals must be a sequence of signal names, got "
                                        f"{self.claim_signals!r}")
        object.__setattr__(self, "claim_signals", tuple(names))
        check_param("random_state", self.random_state, RANDOM_STATE, owner=owner)
        for flag in ("floors", "include_training_rows", "paired", "progress"):
            if not isinstance(getattr(self, flag), bool):
                raise InvalidParameterError(f"{owner}: {flag} must be True or False, got {getattr(self, flag)!r}")
        if self.bootstrap is not None and not isinstance(self.bootstrap, Bootstrap):
            raise InvalidParameterError(f"{owner}: bootstrap must be a much_metric.Bootstrap or None, "
                                        f"got {type(self.bootstrap).__name__}")

    @property
    def aggregators(self) -> tuple[str, ...]:
        """The aggregator of each aggregation, in the order given."""
        return tuple(aggregation.aggregator for aggregation in self.aggregation)

    @property
    def stopword_handling(self) -> str:
        """The stopword rule the aggregations share."""
        return self.aggregation[0].stopword_handling

    @property
    def floor_random_state(self) -> int:
        """The random floor's seed: ``random_state``, else the bootstrap's, else 0."""
        if self.random_state is not None:
            return self.random_state
        return self.bootstrap.random_state if self.bootstrap is not None else 0


def _accepting_renamed_keywords(init: Any) -> Any:
    """The dataclass's ``__init__``, also taking the flat ``aggregator=`` / ``stopword_handling=`` of before (with a
    ``FutureWarning``); its signature stays the dataclass's."""
    import functools

    @functools.wraps(init)
    def __init__(self: Any, **options: Any) -> None:
        renamed = {name: options.pop(name) for name in ("aggregator", "stopword_handling") if name in options}
        if renamed:
            options["aggregation"] = _renamed_aggregation("EvaluationOptions", options.get("aggregation", "product"),
                                                          renamed)
        init(self, **options)

    return __init__


EvaluationOptions.__init__ = _accepting_renamed_keywords(EvaluationOptions.__init__)  # type: ignore[method-assign]


def _renamed_aggregation(owner: str, aggregation: Any, renamed: dict[str, Any]) -> Any:
    """The flat ``aggregator=`` (a name or several) / ``stopword_handling=`` of before one ``aggregation=``
    everywhere, folded into Aggregations with a ``FutureWarning``; any other keyword is a ``TypeError``."""
    warnings.warn(f"{owner}({', '.join(f'{k}=...' for k in renamed)}) is deprecated and will be removed: pass "
                  "aggregation=Aggregation(aggregator=..., stopword_handling=...), an aggregator name, or a sequence "
                  "of them, the one aggregation option of the toolkit", FutureWarning, stacklevel=3)
    stopwords = renamed.get("stopword_handling", "null")
    check_param("stopword_handling", stopwords, STOPWORD_MODE, owner=owner)
    names = renamed.get("aggregator", aggregation)
    names = _names(owner, "aggregator", names, AGGREGATOR, empty=False) if not isinstance(names, Aggregation) \
        else (names.aggregator,)
    return tuple(Aggregation(aggregator=name, stopword_handling=stopwords) for name in names)
