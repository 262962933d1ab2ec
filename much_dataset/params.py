"""Parameter constraints, declared once, checked by one function (the shape of scikit-learn's
``utils/_param_validation.py``, much smaller).

A constraint is an object with ``is_satisfied_by(value)`` and a ``description`` ("one of ('null', 'exclude')",
"a positive integer"); :func:`check_param` raises :class:`InvalidParameterError` (a ``ValueError``, and a
``TypeError`` where the value has the wrong type) with one message shape::

    <owner>: <name> must be <description>, got <value!r>

The generic constraints live here, at the bottom of the import graph (``much_dataset`` imports nothing of
``much_metric``), so every package reads the same declaration: :data:`BOOL`, :data:`POSITIVE_INT`,
:data:`OPTIONAL_POSITIVE_INT`, :data:`FRACTION`, :data:`OPEN_FRACTION`, :data:`RANDOM_STATE`. The metric's own
vocabulary (aggregators, stopword modes, score types) is the metric's: :mod:`much_metric.scoring`.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "BOOL", "FRACTION", "OPEN_FRACTION", "OPTIONAL_POSITIVE_INT", "POSITIVE_INT", "RANDOM_STATE", "Constraint",
    "InvalidParameterError", "Interval", "NoneOr", "OneOf", "UnknownNameError", "check_param", "check_params",
    "KNOWN_NAMES_SHOWN", "unknown_name",
]


class InvalidParameterError(ValueError, TypeError):
    """A parameter outside its declared constraint. A ``ValueError`` and a ``TypeError`` (as scikit-learn's), so
    callers that catch either keep working whether the value has the wrong type or the wrong value."""


class UnknownNameError(InvalidParameterError, KeyError):
    """A name that is not registered (a baseline, a signal of a file, a detector kind): a ``KeyError`` for code that
    looks names up like a dict, and an :class:`InvalidParameterError` (a ``ValueError``) for the commands, which
    report it as the user's mistake (exit code 2), not as a bug."""

    def __str__(self) -> str:  # KeyError would print the repr of its argument
        return str(self.args[0]) if self.args else ""


class Constraint:
    """What a parameter accepts: :meth:`is_satisfied_by` and a :attr:`description` completing "must be ..."."""

    description: str = ""

    def is_satisfied_by(self, value: Any) -> bool:  # pragma: no cover - abstract
        """Whether ``value`` satisfies the constraint."""
        raise NotImplementedError


@dataclass(frozen=True)
class OneOf(Constraint):
    """One of a fixed tuple of values (``aggregator``, ``stopword_handling`` ...)."""

    options: tuple[Any, ...]

    def is_satisfied_by(self, value: Any) -> bool:
        """Whether ``value`` is one of :attr:`options` (a hashable value; an unhashable one never is)."""
        try:
            return value in self.options
        except TypeError:
            return False

    @property
    def description(self) -> str:  # type: ignore[override]
        return f"one of {self.options!r}"


@dataclass(frozen=True)
class Interval(Constraint):
    """A real or integral number in an interval; ``None`` bounds are infinite. ``bool`` is never a number here."""

    kind: type  # numbers.Integral or numbers.Real
    left: float | None
    right: float | None
    closed: str = "both"  # "both", "left", "right" or "neither"

    def is_satisfied_by(self, value: Any) -> bool:
        """Whether ``value`` has the kind and lies in the interval (NaN never does)."""
        if isinstance(value, bool) or not isinstance(value, self.kind):
            return False
        if isinstance(value, numbers.Real) and math.isnan(value):
            return False
        if self.left is not None and (value < self.left or (value == self.left and self.closed in ("right",
                                                                                                   "neither"))):
            return False
        return not (self.right is not None and (value > self.right or (value == self.right
                                                                        and self.closed in ("left", "neither"))))

    @property
    def description(self) -> str:  # type: ignore[override]
        integral = self.kind is numbers.Integral
        kind = "an integer" if integral else "a number"
        if integral and self.left == 1 and self.right is None and self.closed in ("both", "left"):
            return "a positive integer"

        def bound(value: float) -> str:
            return f"{int(value):,}" if integral and math.isfinite(value) else f"{value:g}"

        low = "-inf" if self.left is None else bound(self.left)
        high = "inf" if self.right is None else bound(self.right)
        opening = "[" if self.closed in ("both", "left") and self.left is not None else "("
        closing = "]" if self.closed in ("both", "right") and self.right is not None else ")"
        return f"{kind} in {opening}{low}, {high}{closing}"


@dataclass(frozen=True)
class NoneOr(Constraint):
    """``None`` or what ``constraint`` accepts."""

    constraint: Constraint

    def is_satisfied_by(self, value: Any) -> bool:
        """Whether ``value`` is None or satisfies :attr:`constraint`."""
        return value is None or self.constraint.is_satisfied_by(value)

    @property
    def description(self) -> str:  # type: ignore[override]
        return f"{self.constraint.description} or None"


@dataclass(frozen=True)
class IsBool(Constraint):
    """``True`` or ``False`` (a ``bool``; ``0``/``1`` and numpy bools are not)."""

    description = "a bool"

    def is_satisfied_by(self, value: Any) -> bool:
        """Whether ``value`` is a ``bool``."""
        return isinstance(value, bool)


BOOL = IsBool()
POSITIVE_INT = Interval(numbers.Integral, 1, None)
OPTIONAL_POSITIVE_INT = NoneOr(POSITIVE_INT)
#: A fraction in [0, 1] (a coverage, a share of samples).
FRACTION = Interval(numbers.Real, 0, 1)
#: A fraction in (0, 1) (a confidence level).
OPEN_FRACTION = Interval(numbers.Real, 0, 1, closed="neither")
#: A seed: a non-negative int or None (numpy's ``default_rng`` rejects negative seeds).
RANDOM_STATE = NoneOr(Interval(numbers.Integral, 0, None))


def check_param(name: str, value: Any, constraint: Constraint, *, owner: str | None = None, hint: str = "") -> Any:
    """``value`` when it satisfies ``constraint``; else :class:`InvalidParameterError`
    ``"<owner>: <name> must be <description>, got <value!r> (<hint>)"`` (no ``owner:`` prefix when None, no
    parenthesis without a hint).

    Examples
    --------
    >>> from much_dataset.params import POSITIVE_INT, OneOf, check_param
    >>> check_param("aggregator", "mean", OneOf(("product", "mean")))
    'mean'
    >>> check_param("stopword_handling", "drop", OneOf(("null", "exclude")), owner="score")
    Traceback (most recent call last):
    ...
    much_dataset.params.InvalidParameterError: score: stopword_handling must be one of ('null', 'exclude'), got 'drop'
    >>> check_param("n_resamples", 0, POSITIVE_INT)
    Traceback (most recent call last):
    ...
    much_dataset.params.InvalidParameterError: n_resamples must be a positive integer, got 0
    """
    if constraint.is_satisfied_by(value):
        return value
    prefix = f"{owner}: " if owner else ""
    suffix = f" ({hint})" if hint else ""
    raise InvalidParameterError(f"{prefix}{name} must be {constraint.description}, got {value!r}{suffix}")


def check_params(values: Mapping[str, Any], constraints: Mapping[str, Constraint] | Iterable[tuple[str, Constraint]],
                 *, owner: str | None = None) -> None:
    """:func:`check_param` for each ``name -> constraint`` whose name is in ``values`` (the first failure raises)."""
    for name, constraint in dict(constraints).items():
        if name in values:
            check_param(name, values[name], constraint, owner=owner)


#: How many known names an unknown-name message lists (after the closest ones), instead of the whole list.
KNOWN_NAMES_SHOWN = 12


def unknown_name(kind: str, name: str, known: Iterable[str], *, hint: str = "",
                 aliases: Mapping[str, str] | None = None) -> UnknownNameError:
    """The error for ``name``, not one of ``known`` (a ``kind``: "signal", "baseline"): the closest known names
    first ("did you mean"), then at most :data:`KNOWN_NAMES_SHOWN` of the others, not the whole list. ``aliases``:
    other spellings of the known names (``{"max_likelihood": "Max Likelihood"}``), matched too and suggested as the
    known name they stand for.

    >>> from much_dataset.params import unknown_name
    >>> print(unknown_name("signal", "token_entrop_24", ["token_entropy_24", "max_likelihood", "ccp"]))
    unknown signal 'token_entrop_24': did you mean 'token_entropy_24'? (known: token_entropy_24, max_likelihood, ccp)
    """
    import difflib

    names = [str(n) for n in dict.fromkeys(known)]
    spellings = {n.lower(): n for n in names}
    for alias, target in (aliases or {}).items():
        spellings.setdefault(str(alias).lower(), str(target))
    lowered = str(name).lower()
    close = [spellings[s] for s in difflib.get_close_matches(lowered, list(spellings), n=6, cutoff=0.6)]
    if not close and lowered:  # a prefix: 'token_entropy' for 'token_entropy_24'
        close = [target for spelling, target in spellings.items() if spelling.startswith(lowered)]
    close = list(dict.fromkeys(close))[:3]
    guess = f": did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    if not names:
        listing = "none is available"
    else:
        limit = KNOWN_NAMES_SHOWN
        listing = "known: " + ", ".join(names[:limit]) + (f", ... ({len(names)} in all)" if len(names) > limit else "")
    return UnknownNameError(f"unknown {kind} {name!r}{guess} ({listing}){hint}")
