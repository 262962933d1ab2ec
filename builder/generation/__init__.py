"""Generation engines of ``python -m builder generate`` behind one :class:`Engine` protocol.

``hf`` (the reference procedure), ``vllm`` (offline, batched) and ``openai`` (an OpenAI-compatible server) are
built by :func:`make_engine` from a :class:`~builder.configs.GenerationConfig`, the
:class:`SamplingSettings` derived from it (:func:`settings_for`) and :class:`EngineOptions`; one record builder
(:func:`~builder.generation.rows.make_record`) and one loop (:func:`run_engine`: validation, failures) serve all
three. Heavy dependencies (torch, vllm, httpx) are imported by the engine modules only.
"""

from __future__ import annotations

import dataclasses
import importlib

from builder.configs import GenerationConfig
from builder.errors import BuilderError
from builder.generation.engine import Engine, EngineOptions, EngineRun, run_engine
from builder.generation.rows import EngineInfo, EngineResult, RowLimits, check_row, generation_id, make_record
from builder.generation.sampling import SamplingSettings, SamplingSettingsError
from much_dataset.params import POSITIVE_INT, check_param

__all__ = ["ENGINES", "EXECUTORS", "ExecutorOptions", "make_executed_engine", "close_engine",
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
    """Where an engine's rows are computed (``--executor``, ``--ray-workers``, ``--ray-address``), checked once."""

    executor: str = "local"
    ray_workers: int = 1
    ray_address: str | None = None

    def __post_init__(self) -> None:
        if self.executor not in EXECUTORS:
            raise BuilderError(f"unknown executor {self.executor!r}; choose one of {sorted(EXECUTORS)}")
        check_param("--ray-workers", self.ray_workers, POSITIVE_INT)


def make_executed_engine(name: str, config: GenerationConfig, options: EngineOptions,
                         executor: ExecutorOptions = ExecutorOptions()) -> Engine:
    """The engine ``name``, run where ``executor`` says (``local``: :func:`make_engine`)."""
    module = EXECUTORS[executor.executor]
    if module is None:
        return make_engine(name, config, options)
    return importlib.import_module(module).make_executor_engine(name, config, options, workers=executor.ray_workers,
                                                                address=executor.ray_address)


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
