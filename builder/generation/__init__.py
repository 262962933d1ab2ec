"""Generation engines of ``python -m builder generate`` behind one :class:`Engine` protocol.

``hf`` (the reference procedure), ``vllm`` (offline, batched) and ``openai`` (an OpenAI-compatible server) are
built by :func:`make_engine` from a :class:`~builder.configs.GenerationConfig`, the
:class:`SamplingSettings` derived from it (:func:`settings_for`) and :class:`EngineOptions`; one record builder
(:func:`~builder.generation.rows.make_record`) and one loop (:func:`run_engine`: validation, failures) serve all
three. Heavy dependencies (torch, vllm, httpx) are imported by the engine modules only.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import math

from builder.configs import GenerationConfig
from builder.errors import BuilderError
from builder.generation.engine import Engine, EngineOptions, EngineRun, run_engine
from builder.generation.rows import EngineInfo, EngineResult, RowLimits, check_row, generation_id, make_record
from builder.generation.sampling import SamplingSettings, SamplingSettingsError
from much_dataset.params import POSITIVE_INT, check_param

__all__ = ["ENGINES", "EXECUTORS", "ExecutorOptions", "add_executor_arguments", "make_executed_engine", "close_engine",
           "Engine", "EngineOptions", "EngineRun", "EngineInfo", "EngineResult", "RowLimits",
           "SamplingSettings", "SamplingSettingsError", "make_engine", "settings_for", "run_engine", "check_row",
           "generation_id", "make_record"]

#: --engine -> (module, class)
ENGINES: dict[str, tuple[str, str]] = {"hf": ("builder.generation.hf", "HFEngine"),
                                       "vllm": ("builder.generation.vllm", "VLLMEngine"),
                                       "openai": ("builder.generation.openai", "OpenAIEngine")}


#: --executor -> module with ``make_executor_engine`` (None: the engine runs in this process). An executor changes
#: where rows are computed, never what they are: run_engine validates and stores them here either way.
EXECUTORS: dict[str, str | None] = {"local": None, "ray": "builder.generation.ray_executor"}


@dataclasses.dataclass(frozen=True)
class ExecutorOptions:
    """Where an engine's rows are computed (``--executor``, ``--ray-workers``, ``--ray-address``, ``--ray-gpus``),
    checked once. ``ray_gpus``: the GPUs each Ray actor asks for (0: CPU actors; a fraction shares one GPU)."""

    executor: str = "local"
    ray_workers: int = 1
    ray_address: str | None = None
    ray_gpus: float = 0.0

    def __post_init__(self) -> None:
        if self.executor not in EXECUTORS:
            raise BuilderError(f"unknown executor {self.executor!r}; choose one of {sorted(EXECUTORS)}")
        check_param("--ray-workers", self.ray_workers, POSITIVE_INT)
        if isinstance(self.ray_gpus, bool) or not isinstance(self.ray_gpus, int | float) or \
                not (math.isfinite(self.ray_gpus) and self.ray_gpus >= 0):
            raise BuilderError(f"--ray-gpus must be a finite number >= 0 (GPUs per Ray actor), got {self.ray_gpus!r}")

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ExecutorOptions:
        """The options of the flags :func:`add_executor_arguments` defines (a step's one boundary for them)."""
        return cls(args.executor, args.ray_workers, args.ray_address, args.ray_gpus)


def add_executor_arguments(parser: argparse.ArgumentParser) -> None:
    """``--executor``, ``--ray-address``, ``--ray-workers``, ``--ray-gpus``: the flags of :class:`ExecutorOptions`."""
    parser.add_argument("--executor", choices=tuple(EXECUTORS), default="local",
                        help="local (default) or ray: the engine in Ray Data actors, rows stored here (same rows)")
    parser.add_argument("--ray-address", default=None, help="ray: the cluster (default: one started for this run)")
    parser.add_argument("--ray-workers", type=int, default=1, help="ray: engine actors (one engine each)")
    parser.add_argument("--ray-gpus", type=float, default=0.0,
                        help="ray: GPUs each actor asks for (default 0: CPU actors; 0.5 puts two on one GPU)")


def make_executed_engine(name: str, config: GenerationConfig, options: EngineOptions,
                         executor: ExecutorOptions = ExecutorOptions()) -> Engine:
    """The engine ``name``, run where ``executor`` says (``local``: :func:`make_engine`)."""
    module = EXECUTORS[executor.executor]
    if module is None:
        return make_engine(name, config, options)
    return importlib.import_module(module).make_executor_engine(name, config, options, executor)


def close_engine(engine: Engine) -> None:
    """Release what an engine started (the Ray executor's cluster); nothing for the local engines."""
    close = getattr(engine, "close", None)
    if callable(close):
        close()


def settings_for(config: GenerationConfig) -> SamplingSettings:
    """The serving settings of ``config``; raises :class:`BuilderError` when they would change MUCH's values."""
    if config.greedy:
        raise BuilderError("--greedy is not supported by the serving engines (MUCH samples)")
    try:
        return SamplingSettings(temperature=config.temperature, max_new_tokens=config.max_new_tokens,
                                seed=config.seed, top_k=config.top_k, top_p=config.top_p)
    except SamplingSettingsError as error:
        raise BuilderError(str(error)) from None


def make_engine(name: str, config: GenerationConfig, options: EngineOptions) -> Engine:
    """The engine ``name`` for ``config`` (settings checked before any model is loaded)."""
    if name not in ENGINES:
        raise BuilderError(f"unknown engine {name!r}; choose one of {sorted(ENGINES)}")
    module, cls = ENGINES[name]
    engine_cls = getattr(importlib.import_module(module), cls)
    if name == "hf":
        return engine_cls(config, options)
    return engine_cls(config, settings_for(config), options)
