"""The engine benchmarks' harness (benchmarks/isolation.py): each (path, round) in a new process, paths rotated,
noise measured as the CPU other processes used, and no ratio printed from a run that was not quiet."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def isolation():
    spec = importlib.util.spec_from_file_location("isolation", REPO / "benchmarks" / "isolation.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["isolation"] = module  # dataclasses resolve their annotations through sys.modules
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop("isolation", None)


WORKER = """
import sys
sys.path.insert(0, sys.argv[1])
from isolation import write_result
write_result(sys.argv[3], {"path": sys.argv[2], "parent": __import__("os").getppid()})
"""


def test_every_path_and_round_runs_in_a_new_process_of_its_own(isolation):
    def command(path: str, round_index: int, result: Path) -> list[str]:
        return [sys.executable, "-c", WORKER, str(REPO / "benchmarks"), path, str(result)]

    lines: list[str] = []
    runs = isolation.run_isolated(command, ["a", "b", "c"], 2, echo=lines.append)
    assert [(run.round_index, run.path) for run in runs] == [
        (0, "a"), (0, "b"), (0, "c"), (1, "b"), (1, "c"), (1, "a")]
    pids = [run.pid for run in runs]
    assert len(set(pids)) == 6 and os.getpid() not in pids
    assert all(run.result["parent"] == os.getpid() for run in runs)  # started by the harness, not by a shared worker
    assert all(run.result["path"] == run.path for run in runs)
    assert len(lines) == 6 and all(f"pid {run.pid}" in line for run, line in zip(runs, lines, strict=True))


def test_a_failing_worker_stops_the_benchmark_with_its_output(isolation):
    def command(path: str, round_index: int, result: Path) -> list[str]:
        return [sys.executable, "-c", "import sys; print('engine would not load', file=sys.stderr); sys.exit(3)"]

    with pytest.raises(RuntimeError, match=r"'a' \(round 1\) failed with exit 3:[\s\S]*engine would not load"):
        isolation.run_isolated(command, ["a"], 1, echo=lambda line: None)


def test_foreign_cpu_is_the_machines_busy_time_less_this_process_tree(isolation, monkeypatch):
    busy = iter([100.0, 103.5])  # the machine was busy 3.5 CPU-seconds
    own = iter([10.0, 12.0])  # 2 of them were this process and its waited-for children
    monkeypatch.setattr(isolation, "_busy_cpu_seconds", lambda: next(busy))
    monkeypatch.setattr(isolation, "_own_cpu_seconds", lambda: next(own))
    value, wall, foreign = isolation.foreign_cpu_seconds(lambda: "done")
    assert value == "done" and wall >= 0 and foreign == pytest.approx(1.5)


def _run(isolation, path: str, foreign_cores: float):
    return isolation.PathRun(path=path, round_index=0, pid=1, wall_s=10.0, load_before=0.3, load_after=1.1,
                             foreign_cores=foreign_cores, result={})


def test_a_ratio_is_withheld_unless_every_run_was_quiet(isolation):
    quiet = [_run(isolation, "hf b1", 0.05), _run(isolation, "hf b4N", 0.2)]
    assert isolation.quiet_verdict(quiet)[0] is True
    assert isolation.ratio_text(412.0, 100.0, quiet) == "4.12x"
    noisy = [*quiet, _run(isolation, "vllm n/req", 1.3)]
    ok, line = isolation.quiet_verdict(noisy)
    assert not ok and "1.30 cores during vllm n/req" in line
    assert isolation.ratio_text(412.0, 100.0, noisy) == "withheld (not quiet)"
    assert isolation.ratio_text(412.0, 100.0, noisy, allow_noisy=True) == "4.12x (NOT QUIET)"


def test_rounds_rotate_the_order(isolation):
    assert [isolation.round_order(["a", "b", "c"], r) for r in range(4)] == [
        ["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"], ["a", "b", "c"]]


def test_draw_difference_compares_steps_up_to_the_first_diverging_token(isolation):
    reference = {"a": {"tokens": [1, 2, 3], "probabilities": [[0.5], [0.4], [0.3]]},
                 "b": {"tokens": [1, 2], "probabilities": [[0.5], [0.4]]}}
    draws = {"a": {"tokens": [1, 2, 3], "probabilities": [[0.5], [0.41], [0.3]]},  # same tokens
             "b": {"tokens": [1, 7], "probabilities": [[0.5], [0.1]]},  # diverges at step 1: that step counts
             "c": {"tokens": [9], "probabilities": [[0.0]]}}  # not in the reference
    same, compared, largest = isolation.draw_difference(draws, reference)
    assert (same, compared) == (1, 2)
    assert largest == pytest.approx(0.3)
    draws["b"] = {"tokens": [4, 2], "probabilities": [[0.45], [0.9]]}  # diverges at step 0: step 1 is not compared
    assert isolation.draw_difference(draws, reference)[2] == pytest.approx(0.05)
