"""Time each benchmark path in its own fresh process, and say whether the machine was quiet while it ran.

A path timed in a process (or on a machine) where another engine is resident measures that engine too: vLLM's CPU
engine pins its threads and stays loaded between calls, and ``hf`` at batch 1 timed beside it ran at a third of its
speed. So the engine benchmarks time every path through :func:`run_isolated`: one new Python process per (path,
round), the paths in a rotated order each round (a load change hits every path alike), and for each run

* the one-minute load average before and after it, and
* the CPU the *rest* of the machine used while it ran, in cores: busy CPU time over the whole machine
  (``/proc/stat``) minus the CPU time of the run's own process tree and of this harness, over the run's wall time.

The second is the measure of noise: a load average mixes in the run's own threads and decays over minutes, while
foreign CPU is zero on an idle machine whatever the run does. A run is *quiet* when its foreign CPU stays at or below
:data:`QUIET_FOREIGN_CORES`; :func:`ratio_text` prints a ratio between paths only when every run behind it was quiet,
and otherwise names the noisiest run instead.

A worker is any command that takes the result path it is given and writes one JSON object there with
:func:`write_result` (which adds its process id, so a report can show that every run had a process of its own).
"""

from __future__ import annotations

import functools
import json
import math
import os
import resource
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["QUIET_FOREIGN_CORES", "PathRun", "draw_difference", "foreign_cpu_seconds", "quiet_verdict", "ratio_text",
           "round_order", "run_isolated", "write_result"]

#: Mean cores busy with other processes up to which a run counts as quiet (an eighth of this 2-core machine).
QUIET_FOREIGN_CORES = 0.25

_PROC_STAT = Path("/proc/stat")
T = TypeVar("T")


@dataclass(frozen=True)
class PathRun:
    """One timed run of one path in its own process."""

    path: str
    round_index: int
    pid: int
    wall_s: float
    load_before: float
    load_after: float
    foreign_cores: float
    result: dict[str, Any]

    @property
    def quiet(self) -> bool:
        """Whether the rest of the machine stayed at or below :data:`QUIET_FOREIGN_CORES` during the run."""
        return self.foreign_cores <= QUIET_FOREIGN_CORES

    def describe(self) -> str:
        """One line: path, round, process, wall time, load before/after and foreign CPU."""
        noise = "quiet" if self.quiet else "NOT QUIET"
        return (f"round {self.round_index + 1} {self.path}: pid {self.pid}, {self.wall_s:.1f} s, load "
                f"{self.load_before:.2f} -> {self.load_after:.2f}, other processes {self.foreign_cores:.2f} cores "
                f"({noise})")


def write_result(path: str | os.PathLike[str], result: dict[str, Any]) -> None:
    """Write a worker's result where :func:`run_isolated` reads it, with this process's id."""
    Path(path).write_text(json.dumps({**result, "pid": os.getpid()}))


def round_order(paths: Sequence[str], round_index: int) -> list[str]:
    """The paths rotated by ``round_index``, so each path runs in each position across rounds."""
    shift = round_index % len(paths) if paths else 0
    return [*paths[shift:], *paths[:shift]]


def _busy_cpu_seconds() -> float:
    """CPU seconds the whole machine spent busy since boot (nan where ``/proc/stat`` is absent)."""
    try:
        fields = _PROC_STAT.read_text().split("\n", 1)[0].split()[1:]
    except OSError:
        return math.nan
    # user nice system idle iowait irq softirq steal [guest guest_nice: already inside user/nice]
    ticks = [int(value) for value in fields[:8]]
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


def _own_cpu_seconds() -> float:
    """CPU seconds of this process and of every child it has waited for (their own children included)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def foreign_cpu_seconds(run: Callable[[], T]) -> tuple[T, float, float]:
    """``(run()'s value, wall seconds, CPU seconds other processes used while it ran)``.

    ``run`` must wait for the processes it starts: the CPU of a child counts as this process's only once waited for.
    """
    busy, own, started = _busy_cpu_seconds(), _own_cpu_seconds(), time.perf_counter()
    value = run()
    wall = time.perf_counter() - started
    foreign = (_busy_cpu_seconds() - busy) - (_own_cpu_seconds() - own)
    # clock ticks are coarse (10 ms): a few ticks below zero are rounding, not negative load
    return value, wall, max(0.0, foreign)


def run_isolated(command: Callable[[str, int, Path], list[str]], paths: Sequence[str], rounds: int, *,
                 env: dict[str, str] | None = None, timeout_s: float = 3600.0,
                 echo: Callable[[str], None] = print) -> list[PathRun]:
    """Run ``command(path, round_index, result_file)`` in a new process for every path and round.

    Paths alternate across rounds (:func:`round_order`); each run is waited for before the next starts, so no engine
    of one path is resident while another is timed. A worker that fails stops the benchmark with its output.
    """
    import tempfile

    runs: list[PathRun] = []
    with tempfile.TemporaryDirectory(prefix="much-bench-") as folder:
        for round_index in range(rounds):
            for path in round_order(paths, round_index):
                result_file = Path(folder) / f"{round_index}-{len(runs)}.json"
                argv = command(path, round_index, result_file)
                load_before = os.getloadavg()[0]
                process, wall, foreign = foreign_cpu_seconds(functools.partial(
                    subprocess.run, argv, env=env, capture_output=True, text=True, timeout=timeout_s, check=False))
                if process.returncode != 0 or not result_file.exists():
                    raise RuntimeError(f"benchmark path {path!r} (round {round_index + 1}) failed with exit "
                                       f"{process.returncode}:\n{process.stdout[-2000:]}\n{process.stderr[-4000:]}")
                result = json.loads(result_file.read_text())
                run = PathRun(path=path, round_index=round_index, pid=int(result.pop("pid")), wall_s=wall,
                              load_before=load_before, load_after=os.getloadavg()[0],
                              foreign_cores=foreign / wall if wall > 0 else math.nan, result=result)
                echo(run.describe())
                runs.append(run)
    return runs



def draw_difference(draws: dict, reference: dict) -> tuple[int, int, float]:
    """(draws with the reference's tokens, draws compared, largest probability difference) over the keys both hold.

    Each draw is ``{"tokens": [...], "probabilities": [[...] per step]}``; probabilities are compared step by step up
    to and including the first diverging token (after it the steps condition on other prefixes).
    """
    import numpy as np

    same, largest = 0, 0.0
    for key, draw in draws.items():
        other = reference.get(key)
        if other is None:
            continue
        same += draw["tokens"] == other["tokens"]
        for position, (mine, theirs) in enumerate(zip(draw["probabilities"], other["probabilities"], strict=False)):
            width = min(len(mine), len(theirs))
            largest = max(largest, float(np.max(np.abs(np.asarray(mine[:width]) - np.asarray(theirs[:width])))))
            if draw["tokens"][position] != other["tokens"][position]:
                break
    return same, sum(1 for key in draws if key in reference), largest


def quiet_verdict(runs: Sequence[PathRun]) -> tuple[bool, str]:
    """Whether every run was quiet, and one line saying so (or naming the noisiest run)."""
    if not runs:
        return False, "no run"
    noisiest = max(runs, key=lambda run: run.foreign_cores)
    pids = {run.pid for run in runs}
    processes = f"{len(pids)} processes for {len(runs)} runs"
    if all(run.quiet for run in runs):
        return True, (f"quiet: other processes used at most {noisiest.foreign_cores:.2f} cores during any run "
                      f"(limit {QUIET_FOREIGN_CORES}); {processes}")
    return False, (f"NOT QUIET: other processes used {noisiest.foreign_cores:.2f} cores during {noisiest.path} "
                   f"round {noisiest.round_index + 1} (limit {QUIET_FOREIGN_CORES}); {processes}")


def ratio_text(value: float, reference: float, runs: Sequence[PathRun], *, allow_noisy: bool = False) -> str:
    """``value / reference`` as ``"4.12x"`` when every run was quiet; withheld (or marked) otherwise."""
    quiet, _ = quiet_verdict(runs)
    if not reference or math.isnan(reference) or math.isnan(value):
        return "n/a"
    if quiet:
        return f"{value / reference:.2f}x"
    if allow_noisy:
        return f"{value / reference:.2f}x (NOT QUIET)"
    return "withheld (not quiet)"
