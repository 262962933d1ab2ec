"""Shared pieces of the baselines computed from the stored top-K probabilities (numpy only).

``logits_values`` are probabilities of the full-vocabulary softmax, truncated to the K = 24 most likely tokens and
**not** renormalised: a row sums to ``1 - tail`` where ``tail`` is the mass of the rest of the vocabulary.
"""

from __future__ import annotations

import numbers
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from much_dataset.params import Interval, check_param
from much_dataset.schema import LOGITS_TOKEN_IDS, OUTPUT_TOKENS, TOP_K
from much_metric._cache import BoundedCache
from much_metric.baselines._arrays import TokenArrays

__all__ = ["MISSING_RULES", "check_delta", "check_delta_param", "check_missing", "memo", "rank_of_sampled",
           "renormalised_top", "sampled_probability", "sampled_probability_or_floor", "sampled_rank", "sorted_arrays",
           "top_delta", "xlogx"]


#: What to do when a sampled token is not among its stored candidates: ``"raise"`` or ``"nan"``.
MISSING_RULES = ("raise", "nan")


def check_missing(missing: str) -> None:
    """ValueError unless ``missing`` is one of :data:`MISSING_RULES`."""
    if missing not in MISSING_RULES:
        raise ValueError(f"missing must be one of {MISSING_RULES}, got {missing!r}")


def sampled_rank(arrays: TokenArrays, *, missing: str = "raise") -> np.ndarray:
    """Column of each sampled token among its candidates, shape (N_tokens,); -1 where absent (``missing="nan"``).

    If a candidate id occurs twice in a row (never in MUCH), the first occurrence (highest probability) is used.
    """
    check_missing(missing)
    match = arrays.candidate_ids == arrays.output_tokens[:, None]
    found = match.any(axis=1)
    rank = np.where(found, match.argmax(axis=1), -1)
    if missing == "raise" and not found.all():
        token = int(np.flatnonzero(~found)[0])
        raise ValueError(
            f"{arrays.where(token)}: the sampled token id {int(arrays.output_tokens[token])} ({OUTPUT_TOKENS!r}) is "
            f"not among the {arrays.candidate_ids.shape[1]} stored candidates ({LOGITS_TOKEN_IDS!r}); pass "
            "missing='nan' to score such tokens nan"
        )
    return rank


def sampled_probability(arrays: TokenArrays, *, missing: str = "raise") -> np.ndarray:
    """The sampled token's probability, shape (N_tokens,); nan where it is not a stored candidate
    (``missing="nan"``)."""
    rank = sampled_rank(arrays, missing=missing)
    probability = arrays.probabilities[np.arange(arrays.n_tokens), np.maximum(rank, 0)]
    return np.where(rank >= 0, probability, np.nan)


def check_delta(delta: Any, width: int) -> int:
    """``delta`` as an int in [2, ``width``] (the number of stored candidates), else ValueError."""
    return int(check_param("delta", delta, Interval(numbers.Integral, 2, width),
                           hint="the number of stored candidates"))


def check_delta_param(params: dict[str, Any]) -> None:
    """``Baseline.check`` of a name with a ``{delta}`` field: ``delta`` in [2, 24] (MUCH's stored candidates)."""
    check_delta(params["delta"], TOP_K)


def top_delta(probabilities: np.ndarray, delta: int) -> np.ndarray:
    """The ``delta`` largest probabilities of each row, shape (N, delta)."""
    if delta == probabilities.shape[1]:
        return probabilities
    if probabilities.shape[0] and np.all(probabilities[:, :-1] >= probabilities[:, 1:]):
        return probabilities[:, :delta]  # MUCH rows are sorted: the cheap path
    return -np.sort(-probabilities, axis=1)[:, :delta]


#: Derived arrays of the few most recent TokenArrays (id -> (weak reference, {key: value})). Several baselines of
#: one run need the same sorted candidates and sampled-token ranks; computing them once per split is most of the
#: saving when the whole ``all-probability`` group runs. Bounded and locked (threads share it), and an entry goes
#: when its TokenArrays does.
_MEMO: BoundedCache[int, tuple[weakref.ref, BoundedCache[str, Any]]] = BoundedCache(4)
#: Derived arrays kept per split: sorted candidates, ranks, one renormalised top-delta per delta (2..24).
_MEMO_KEYS = 32


def memo(arrays: TokenArrays, key: str, compute: Callable[[], Any]) -> Any:
    """``compute()`` once per (arrays, key) while ``arrays`` is alive (TokenArrays and its arrays are read-only
    by convention: nothing here mutates them)."""
    def new_entry() -> tuple[weakref.ref, BoundedCache[str, Any]]:
        weakref.finalize(arrays, _MEMO.discard, id(arrays))
        return weakref.ref(arrays), BoundedCache(_MEMO_KEYS)

    # an id is reused once its object is gone: the entry must still point at this very object
    entry = _MEMO.get_or_compute(id(arrays), new_entry, valid=lambda found: found[0]() is arrays)
    return entry[1].get_or_compute(key, compute)


def sorted_arrays(arrays: TokenArrays) -> TokenArrays:
    """``arrays.sorted_by_probability()``, once per split."""
    return memo(arrays, "sorted", arrays.sorted_by_probability)


def rank_of_sampled(arrays: TokenArrays, *, missing: str = "raise") -> np.ndarray:
    """``sampled_rank(arrays, missing=...)``, the search done once per split (-1 where absent)."""
    rank = memo(arrays, "rank", lambda: sampled_rank(arrays, missing="nan"))
    if missing == "raise" and rank.size and rank.min() < 0:
        sampled_rank(arrays, missing="raise")  # raises the message naming the sample and token
    return rank


def renormalised_top(arrays: TokenArrays, delta: int) -> np.ndarray:
    """The ``delta`` largest probabilities of each row divided by their sum, shape (N_tokens, delta), once per split
    and ``delta`` (read-only: callers must not modify it).

    Raises ValueError naming the sample and token when a row's top-``delta`` mass is 0.
    """
    delta = check_delta(delta, arrays.probabilities.shape[1])
    return memo(arrays, f"q{delta}", lambda: _renormalised_top(arrays, delta))


def _renormalised_top(arrays: TokenArrays, delta: int) -> np.ndarray:
    top = top_delta(arrays.probabilities, delta)
    total = top.sum(axis=1, keepdims=True)
    if (empty := np.flatnonzero(total[:, 0] <= 0)).size:
        raise ValueError(f"{arrays.where(int(empty[0]))}: the top-{delta} probabilities sum to 0")
    return top / total


def xlogx(q: np.ndarray) -> np.ndarray:
    """``q * log(q)`` element-wise with ``0 log 0 = 0`` (float32 probabilities can underflow to 0)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        values = q * np.log(q)  # 0 * -inf = nan where q == 0, reset below (5x faster than two np.where)
    values[q == 0] = 0.0
    return values


def sampled_probability_or_floor(arrays: TokenArrays) -> tuple[np.ndarray, np.ndarray]:
    """(p, found): the sampled token's probability, or -- when it is not among the stored candidates (never in
    MUCH) -- the smallest stored probability of its row, an upper bound of its true probability."""
    rank = rank_of_sampled(arrays, missing="nan")
    found = rank >= 0
    p = arrays.probabilities[np.arange(arrays.n_tokens), np.maximum(rank, 0)]
    if not found.all():
        absent = ~found
        p[absent] = arrays.probabilities[absent].min(axis=1)
    return p, found
