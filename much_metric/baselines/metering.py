"""Measuring what a signal costs while :func:`much_metric.baselines.compute_signals` computes it: wall and CPU time
of each block, the models' counters (forward passes, samples, model calls) of the resources the method reads, the
claims and tokens covered, the machine -- added to what the signal's file already recorded when a run resumes.
The record's format is :class:`much_metric.signals.SignalCost`."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from much_metric.baselines._arrays import TokenArrays
from much_metric.signals import SignalCost, machine_record

__all__ = ["CostMeter"]

_COUNTERS = ("forward_passes", "samples", "model_calls")


def _usage(resources: Sequence[Any]) -> dict[str, int]:
    """The models' counters (``usage()``) summed over the resources a method reads; a resource that runs no model,
    or one of the user's without ``usage()``, counts nothing."""
    total = dict.fromkeys(_COUNTERS, 0)
    for resource in resources:
        usage = getattr(resource, "usage", None)
        if callable(usage):
            for key, value in usage().items():
                if key in total:
                    total[key] += int(value)
    return total


def _n_claims(arrays: TokenArrays) -> int | None:
    """Claims the metric scores in these samples (each sample's chunks but its EOS claim); None without chunks."""
    if arrays.token_chunks is None:
        return None
    return sum(max(len(chunks) - 1, 0) for chunks in arrays.token_chunks)


class CostMeter:
    """The running cost of one signal.

    ``resources``: what the method reads (their ``usage()`` counters are read before and after each block);
    ``top_k``: the input view; ``recorded``: the cost object the signal's file holds (a resumed run adds to it;
    ValueError naming ``file`` when it is malformed, or, once a block is to be added, of another view).
    """

    def __init__(self, resources: Sequence[Any], *, top_k: int | None, recorded: Any = None,
                 file: Path | None = None) -> None:
        self.resources = list(resources)
        self.cost: SignalCost | None = None
        self._top_k = top_k
        self._file = file
        if recorded is not None:
            try:
                self.cost = SignalCost.from_dict(recorded)
            except ValueError as error:
                raise ValueError(f"{file}: {error}") from None

    def measure(self, part: TokenArrays, compute: Callable[[], np.ndarray]) -> tuple[np.ndarray, float]:
        """``compute()`` on the block ``part``, timed; returns its values and its wall seconds."""
        if self.cost is not None and self.cost.top_k != self._top_k:
            def view(k: int | None) -> str:
                return "the stored candidates" if k is None else f"top-{k}"

            raise ValueError(f"{self._file} was computed on {view(self.cost.top_k)}; resuming it on "
                             f"{view(self._top_k)} would mix the costs of two input views (use another out)")
        before = _usage(self.resources)
        wall, cpu = time.perf_counter(), time.process_time()
        values = compute()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        after = _usage(self.resources)
        block = SignalCost(wall_seconds=wall, cpu_seconds=cpu, n_samples=part.n_samples, n_tokens=part.n_tokens,
                           n_claims=_n_claims(part), top_k=self._top_k, machines=(machine_record(),),
                           **{key: after[key] - before[key] for key in _COUNTERS})
        self.cost = block if self.cost is None else self.cost.plus(block)
        return values, wall
