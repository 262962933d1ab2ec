"""The typed, frozen result of :func:`much_metric.scoring.compare`: one :class:`MetricComparison` per metric of the
table, read as attributes (``result.roc_auc.difference``) or, as before, by key (``result["roc_auc"]["difference"]``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

__all__ = ["Comparison", "MetricComparison"]


@dataclass(frozen=True)
class MetricComparison:
    """One metric of two methods scored on the same claims.

    Attributes
    ----------
    a, b : float
        The metric of method a and of method b (nan where undefined).
    difference : float
        ``a - b``.
    interval : tuple of float
        Percentile interval of the difference over the paired bootstrap resamples of the samples.
    p_value : float
        Two-sided bootstrap p-value of no difference (nan without finite replicates).
    """

    a: float
    b: float
    difference: float
    interval: tuple[float, float]
    p_value: float

    def __getitem__(self, key: str) -> Any:
        """The field ``key`` (``"a"``, ``"difference"`` ...): the dict-shaped access of earlier versions."""
        if key not in {f.name for f in fields(self)}:
            raise KeyError(key)
        return getattr(self, key)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict of the fields."""
        return asdict(self)


@dataclass(frozen=True)
class Comparison(Mapping[str, MetricComparison]):
    """Paired comparison of two methods, per metric key of :data:`much_metric.scoring.METRICS`, in table order.

    A read-only mapping ``metric key -> MetricComparison``; ``comparison.roc_auc`` is ``comparison["roc_auc"]``.
    """

    metrics: Mapping[str, MetricComparison]

    @classmethod
    def from_dict(cls, values: Mapping[str, Mapping[str, Any]]) -> Comparison:
        """From :func:`much_metric.scoring._bootstrap.paired_bootstrap`'s dict of dicts."""
        return cls({key: MetricComparison(a=v["a"], b=v["b"], difference=v["difference"],
                                          interval=tuple(v["interval"]), p_value=v["p_value"])
                    for key, v in values.items()})

    def __getitem__(self, key: str) -> MetricComparison:
        return self.metrics[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.metrics)

    def __len__(self) -> int:
        return len(self.metrics)

    def __getattr__(self, name: str) -> MetricComparison:
        metrics = self.__dict__.get("metrics", {})
        if name in metrics:
            return metrics[name]
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

    def to_dict(self) -> dict[str, dict[str, Any]]:
        """Plain dicts (``much evaluate --compare``'s JSON shape)."""
        return {key: value.to_dict() for key, value in self.metrics.items()}
