"""The one cache type (:class:`much_metric._cache.BoundedCache`) and the caches built on it stay correct under threads:
a server or the monitor scoring from several threads never sees a KeyError, a RuntimeError from a dict changing size,
or two different objects for one key."""

from __future__ import annotations

import sys
import threading
import time

import numpy as np
import pytest

from much_metric._cache import BoundedCache


@pytest.fixture
def fast_switching():
    """Switch threads every microsecond so that unlocked read-modify-write sequences interleave."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


def _hammer(work, n_threads: int = 8, seconds: float = 4.0) -> list[BaseException]:
    """Run ``work(thread index, step)`` in ``n_threads`` threads for ``seconds``; the exceptions raised."""
    errors: list[BaseException] = []
    start = threading.Barrier(n_threads)

    def worker(index: int) -> None:
        start.wait()
        deadline, step = time.monotonic() + seconds, 0
        while time.monotonic() < deadline:
            try:
                work(index, step)
            except BaseException as error:  # noqa: BLE001 - every failure is the finding
                errors.append(error)
            step += 1

    threads = [threading.Thread(target=worker, args=(index,)) for index in range(n_threads)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return errors


def _arrays(rng: np.random.Generator):
    from much_metric.baselines._arrays import TokenArrays

    probabilities = -np.sort(-rng.random((6, 24)), axis=1) / 24
    return TokenArrays(generation_ids=["g"], offsets=np.array([0, 6]), output_tokens=np.arange(6),
                       candidate_ids=np.tile(np.arange(24), (6, 1)), probabilities=probabilities)


def test_the_baselines_memo_survives_eight_threads(fast_switching):
    """The reproduction of the review: 8 threads, each with its own splits, through the baselines' memo of derived
    arrays (bounded at 4 splits, so every thread evicts the others' entries)."""
    from much_metric.baselines import _topk

    alive: dict[int, list] = {index: [] for index in range(8)}

    def work(index: int, step: int) -> None:
        arrays = _arrays(np.random.default_rng(index * 1_000_000 + step))
        alive[index] = [*alive[index][-2:], arrays]  # three splits alive per thread: 24 for 4 places
        top = _topk.renormalised_top(arrays, 4)
        np.testing.assert_allclose(top.sum(axis=1), 1.0)
        np.testing.assert_array_equal(_topk.renormalised_top(arrays, 4), top)
        _topk.sorted_arrays(arrays)
        _topk.rank_of_sampled(arrays, missing="nan")

    errors = _hammer(work)
    assert [repr(error) for error in errors[:3]] == [] and len(errors) == 0


def test_one_key_computed_by_many_threads_gives_one_object(fast_switching):
    cache: BoundedCache[str, object] = BoundedCache(2)
    seen: list[object] = []

    def work(index: int, step: int) -> None:
        key = f"k{step % 3}"
        value = cache.get_or_compute(key, object)
        seen.append((key, value))
        assert len(cache) <= 2

    assert _hammer(work, seconds=1.0) == []
    assert len(cache) <= 2


def test_bounded_least_recently_used_and_revalidated():
    cache: BoundedCache[int, int] = BoundedCache(3)
    for key in range(5):
        cache.put(key, key * key)
    assert cache.keys() == [2, 3, 4]
    assert cache.get(2) == 4 and cache.keys() == [3, 4, 2]
    assert cache.get_or_compute(3, lambda: -1, valid=lambda value: value != 9) == -1
    assert cache.get(3) == -1 and 0 not in cache
    cache.discard(4)
    cache.discard(4)
    assert cache.keys() == [2, 3]
    with pytest.raises(ValueError, match="maxsize must be a positive integer"):
        BoundedCache(0)
