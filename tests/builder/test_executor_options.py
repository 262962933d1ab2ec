"""Ray's placement is an option of the executor, not the environment: ``--ray-gpus`` -> ``ExecutorOptions.ray_gpus``
-> the actors' ``num_gpus`` (checked once, exit 2 for a bad value). Runs without Ray: a stand-in ``ray`` module
records what the executor asks of Ray Data (the real cluster test is tests/builder/test_executor_ray.py, vLLM venv)."""

from __future__ import annotations

import argparse
import sys
import types
from pathlib import Path

import pytest

from builder.cli import main
from builder.configs import GenerationConfig
from builder.errors import BuilderError
from builder.generation import EngineOptions, ExecutorOptions, add_executor_arguments, make_executed_engine

REPO = Path(__file__).resolve().parents[2]


def _parsed(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_executor_arguments(parser)
    return parser.parse_args(list(argv))


def test_the_flags_make_the_options():
    assert ExecutorOptions.from_args(_parsed()) == ExecutorOptions()
    assert ExecutorOptions.from_args(_parsed()).ray_gpus == 0.0
    options = ExecutorOptions.from_args(_parsed("--executor", "ray", "--ray-workers", "3", "--ray-gpus", "0.5",
                                                "--ray-address", "auto"))
    assert options == ExecutorOptions("ray", 3, "auto", 0.5)


@pytest.mark.parametrize("gpus", [-1.0, float("nan"), float("inf"), True, "1"])
def test_a_bad_gpu_count_is_refused(gpus):
    with pytest.raises(BuilderError, match="--ray-gpus must be a finite number >= 0"):
        ExecutorOptions("ray", 1, None, gpus)


@pytest.mark.parametrize("step", ["generate", "samples"])
def test_both_steps_refuse_a_bad_gpu_count_before_any_work(step, tmp_path, capsys):
    argv = [step, "--out", str(tmp_path / "out"), "--model", "m", "--executor", "ray", "--ray-gpus", "-1"]
    if step == "samples":
        argv += ["--source", str(tmp_path / "missing.jsonl")]
    assert main(argv) == 2
    assert "--ray-gpus must be a finite number >= 0" in capsys.readouterr().err


class _FakeDataset:
    asked: dict = {}

    def map_batches(self, fn, **kwargs):
        _FakeDataset.asked = kwargs
        return types.SimpleNamespace(iter_rows=lambda: iter(()))


def _fake_ray() -> types.ModuleType:
    ray = types.ModuleType("ray")
    ray.is_initialized = lambda: True  # a running cluster: nothing started, nothing shut down
    ray.init = lambda **kwargs: None
    ray.shutdown = lambda: None
    ray.data = types.SimpleNamespace(from_items=lambda items: _FakeDataset(),
                                     ActorPoolStrategy=lambda size: ("pool", size))
    return ray


@pytest.mark.parametrize("gpus", [0.0, 0.25, 2.0])
def test_the_actors_ask_ray_for_the_option_s_gpus(gpus, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", _fake_ray())
    monkeypatch.setenv("RAY_ENGINE_GPUS", "7")  # the environment no longer decides placement
    config = GenerationConfig(model_name="m", temperature=1.0)
    engine = make_executed_engine("hf", config, EngineOptions(model="m"), ExecutorOptions("ray", 2, None, gpus))
    assert list(engine.generate([{"question_id": "q", "prompt": "p"}])) == []
    assert _FakeDataset.asked["num_gpus"] == gpus and _FakeDataset.asked["compute"] == ("pool", 2)


def test_no_code_reads_the_placement_from_the_environment():
    hits = [str(path.relative_to(REPO)) for folder in ("builder", "scripts", "docs")
            for path in (REPO / folder).rglob("*") if path.suffix in (".py", ".md", ".sh", ".sbatch")
            and "RAY_ENGINE_GPUS" in path.read_text(encoding="utf-8")]
    assert hits == []
