"""How token scores become evaluated claim scores: one frozen options object, :class:`Aggregation`, passed as
``aggregation=`` to :func:`~much_metric.score`, :func:`~much_metric.compare` and
:func:`~much_metric.aggregate_claims` (a str is shorthand for ``Aggregation(aggregator=name)``, as scikit-learn's
``cv=5`` is for ``KFold(5)``). The metric's option vocabulary (:data:`AGGREGATORS`, :data:`STOPWORD_MODES`,
:data:`SCORE_TYPES` and their constraints) is declared here, once; the generic constraints come from
:mod:`much_dataset.params`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from much_dataset.params import BOOL, InvalidParameterError, OneOf, check_param

__all__ = ["AGGREGATOR", "AGGREGATORS", "SCORE_TYPE", "SCORE_TYPES", "STOPWORD_MODE", "STOPWORD_MODES", "Aggregation",
           "as_aggregation"]

#: Token-to-claim aggregators (docs/reference-behaviour.md#aggregators).
AGGREGATORS: tuple[str, ...] = ("product", "mean", "max", "geometric")
#: ``"null"``: stopword tokens scored 0 but counted in ``n`` (reference); ``"exclude"``: removed from the claim.
STOPWORD_MODES: tuple[str, ...] = ("null", "exclude")
#: ``"uncertainty"``: higher = more likely hallucinated; ``"confidence"``: probabilities, scored as ``1 - p``.
SCORE_TYPES: tuple[str, ...] = ("uncertainty", "confidence")

AGGREGATOR = OneOf(AGGREGATORS)
STOPWORD_MODE = OneOf(STOPWORD_MODES)
SCORE_TYPE = OneOf(SCORE_TYPES)


@dataclass(frozen=True, kw_only=True)
class Aggregation:
    """Token scores -> claim scores: the aggregator, the stopword rule, the EOS claim and what the scores mean.

    The defaults reproduce the reference evaluation (docs/reference-behaviour.md#evaluation).

    Parameters
    ----------
    aggregator : {"product", "mean", "max", "geometric"}, default "product"
        With ``s`` the claim's token scores and ``n`` their number (docs/reference-behaviour.md#aggregators):
        ``product`` = 1 - prod(1 - s) (noisy-OR, reference default), ``mean`` = mean(s), ``max`` = max(s),
        ``geometric`` = 1 - (prod(1 - s) + 1e-5) ** (1 / n). ``product`` and ``geometric`` assume s in [0, 1].
    stopword_handling : {"null", "exclude"}, default "null"
        ``"null"`` (reference, docs/reference-behaviour.md#stopword-rule; reproduces the paper's numbers): stopword
        tokens score 0 but still count in ``n``, so an all-stopword claim scores 0 (``geometric``: about
        -1e-5 / n). ``"exclude"`` (corrected): stopword tokens are removed from their claim; a claim made only of
        stopwords keeps all its tokens (it would otherwise have no score).
    drop_last_chunk : bool, default True
        Drop each sample's last chunk, the EOS claim (docs/reference-behaviour.md#evaluation-modes).
    score_type : {"uncertainty", "confidence"}, default "uncertainty"
        ``"confidence"``: the token scores are confidences (e.g. the sampled token's probability) in [0, 1],
        converted to uncertainties ``1 - p`` before aggregation (values outside [0, 1] are an error).

    Examples
    --------
    >>> from much_metric import Aggregation, aggregate_claims
    >>> Aggregation(aggregator="max", stopword_handling="exclude")
    Aggregation(aggregator='max', stopword_handling='exclude', drop_last_chunk=True, score_type='uncertainty')
    >>> scores, chunks, mask = [[0.5, 0.2, 0.5, 0.0]], [[[0], [1, 2], [3]]], [[False, False, True, False]]
    >>> [claims.tolist() for claims in aggregate_claims(scores, chunks, mask,
    ...                                                 aggregation=Aggregation(aggregator="mean"))]
    [[0.5, 0.1]]
    >>> Aggregation(aggregator="median")
    Traceback (most recent call last):
    ...
    much_dataset.params.InvalidParameterError: Aggregation: aggregator must be one of ('product', 'mean', 'max', 'geometric'), got 'median'
    """  # noqa: E501

    aggregator: str = "product"
    stopword_handling: Literal["null", "exclude"] = "null"
    drop_last_chunk: bool = True
    score_type: Literal["uncertainty", "confidence"] = "uncertainty"

    def __post_init__(self) -> None:
        check_param("aggregator", self.aggregator, AGGREGATOR, owner="Aggregation")
        check_param("stopword_handling", self.stopword_handling, STOPWORD_MODE, owner="Aggregation")
        check_param("drop_last_chunk", self.drop_last_chunk, BOOL, owner="Aggregation")
        check_param("score_type", self.score_type, SCORE_TYPE, owner="Aggregation")


def as_aggregation(aggregation: Any, owner: str) -> Aggregation:
    """``aggregation`` as an :class:`Aggregation`: an :class:`Aggregation` as is, a str as
    ``Aggregation(aggregator=aggregation)``; anything else is an :class:`~much_dataset.params.InvalidParameterError`
    naming ``owner`` (the public function) and the type received."""
    if isinstance(aggregation, Aggregation):
        return aggregation
    if isinstance(aggregation, str):
        try:
            return Aggregation(aggregator=aggregation)
        except InvalidParameterError as error:
            raise InvalidParameterError(f"{owner}: aggregation={aggregation!r} is not an aggregator name: "
                                        f"{error}") from None
    hint = (" (the options moved into one object: aggregation=Aggregation(aggregator=..., stopword_handling=..., "
            "drop_last_chunk=..., score_type=...))") if isinstance(aggregation, dict) else ""
    raise InvalidParameterError(f"{owner}: aggregation must be a much_metric.Aggregation or an aggregator name (one "
                                f"of {AGGREGATOR.options!r}), got {type(aggregation).__name__} {aggregation!r}{hint}")
