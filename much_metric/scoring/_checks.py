"""Argument checks of the public scoring functions (``score``, ``score_claims``, ``compare``): each raises with the
argument's name and, where one is at fault, the sample's."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from much_metric.scoring._aggregation import ClaimLayout
from much_metric.scoring._bootstrap import Bootstrap

__all__ = ["check_bootstrap", "check_finite_claims", "check_generation_ids", "group_values"]


def group_values(by: Mapping[str, Sequence[Any]], n_samples: int) -> dict[str, tuple[list[str], np.ndarray]]:
    """Per breakdown: (group keys, group index of each sample). Every sample lands in exactly one group: values
    that print alike (``1`` and ``"1"``) or that are missing (None, NaN) are errors, not silently merged or lost."""
    if not isinstance(by, Mapping):
        raise TypeError("by must map a breakdown name (e.g. 'lang') to one value per sample")
    groups = {}
    for name, values in by.items():
        if isinstance(values, str | bytes) or not hasattr(values, "__len__"):
            raise TypeError(f"by[{name!r}] must be a sequence with one value per sample, got {type(values).__name__}")
        values = list(values)
        if len(values) != n_samples:
            raise ValueError(f"by[{name!r}] has {len(values)} values but there are {n_samples} samples")
        keys: dict[str, Any] = {}  # printed key -> first value seen; insertion order = group position
        position: dict[str, int] = {}
        index = np.empty(n_samples, dtype=np.int64)
        for sample, value in enumerate(values):
            if value is None or (isinstance(value, float | np.floating) and np.isnan(value)):
                raise ValueError(f"by[{name!r}]: sample #{sample} has no value ({value!r}); every sample must "
                                 "belong to a group")
            try:
                hash(value)
            except TypeError:
                raise TypeError(f"by[{name!r}]: sample #{sample} has an unhashable value of type "
                                f"{type(value).__name__}; use strings or numbers") from None
            key = str(value)
            if key in keys and keys[key] != value:
                raise ValueError(f"by[{name!r}]: the values {keys[key]!r} and {value!r} (sample #{sample}) would "
                                 f"both be reported as group {key!r}; use one type per breakdown")
            if key not in keys:
                keys[key], position[key] = value, len(position)
            index[sample] = position[key]
        names = list(keys)
        order = sorted(range(len(names)), key=names.__getitem__)
        rank = np.empty(len(names), dtype=np.int64)
        rank[order] = np.arange(len(names))
        groups[name] = ([names[k] for k in order], rank[index])
    return groups


def check_generation_ids(generation_ids: Sequence[str] | None, n_samples: int) -> None:
    if generation_ids is not None and len(generation_ids) != n_samples:
        raise ValueError(f"generation_ids has {len(generation_ids)} ids but there are {n_samples} samples")


def check_bootstrap(bootstrap: Any, *, required: bool = False) -> None:
    """``bootstrap`` must be a :class:`Bootstrap` (or ``None`` where intervals are optional)."""
    if bootstrap is None and not required:
        return
    if not isinstance(bootstrap, Bootstrap):
        hint = (f"; for {bootstrap} resamples pass bootstrap=Bootstrap(n_resamples={bootstrap})"
                if isinstance(bootstrap, int | np.integer) and not isinstance(bootstrap, bool) else "")
        allowed = "a much_metric.scoring.Bootstrap" + ("" if required else " or None")
        raise TypeError(f"bootstrap must be {allowed}, got {bootstrap!r}{hint}")


def check_finite_claims(claims: np.ndarray, layout: ClaimLayout, what: str) -> None:
    bad = np.flatnonzero(~np.isfinite(claims))
    if bad.size:
        sample = int(layout.claim_sample[bad[0]])
        raise ValueError(f"sample {layout.name(sample)}: {what} gives a non-finite claim score ({claims[bad[0]]}); "
                         "check the token scores' range (product/geometric expect [0, 1]; huge values overflow)")
