"""The Ray executor: the project's own engines in Ray Data ``map_batches`` actors (``--executor ray``).

:func:`make_executor_engine` returns an :class:`~builder.generation.engine.Engine` whose ``generate`` sends the
questions through a Ray Data pipeline: one Ray row per engine batch (the batches the local executor would make, so
the batched numerics are the same), ``map_batches`` over a pool of ``workers`` actors, each building the engine once
(``make_engine``: the same config, settings and options) and answering with the rows the engine made, as JSON. The
rows come back to the calling process, where :func:`~builder.generation.run_engine` validates and stores them as it
does for a local engine: an executor changes where rows are computed, never what they are.

Why not Ray Data's LLM processor: in the version read (ray 2.60) it keeps the first of ``n`` samples only and sends
the prompt as text even when token ids are given; running our engine in the actors keeps MUCH's sampler, the
per-sample seeds, token ids and exact probabilities without working around either.

``address``: a running cluster (``ray start --head``, ``auto``, ``ray://...``); None starts one for the run (shut
down at the end). Actors ask ``num_cpus=1`` each and ``gpus`` GPUs (``--ray-gpus``, a field of
:class:`~builder.generation.ExecutorOptions`; 0: CPU actors).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from builder.configs import GenerationConfig
from builder.generation.engine import EngineOptions
from builder.generation.rows import RowLimits

if TYPE_CHECKING:  # builder.generation imports this module on demand: no import back at run time
    from builder.generation import ExecutorOptions

__all__ = ["RayEngine", "make_executor_engine"]


class _EngineActor:
    """A Ray Data actor holding one engine; ``__call__`` answers a batch of Ray rows (each: one engine batch)."""

    def __init__(self, engine: str, config: dict[str, Any], options: dict[str, Any]) -> None:
        from builder.generation import make_engine

        self.engine = make_engine(engine, GenerationConfig.from_record(config), EngineOptions(**options))
        self.limits = self.engine.limits.to_json()

    def __call__(self, batch: dict[str, Any]) -> dict[str, list[str]]:
        questions, results, errors = [], [], []
        for text in batch["questions"]:
            for question, result in self.engine.generate(json.loads(text)):
                questions.append(json.dumps(question))
                failed = isinstance(result, Exception)
                results.append("" if failed else json.dumps(result))
                errors.append(f"{type(result).__name__}: {result}" if failed else "")
        return {"question": questions, "row": results, "error": errors,
                "limits": [self.limits] * len(questions), "version": [self.engine.version] * len(questions)}


class RemoteEngineError(RuntimeError):
    """An exception an engine raised inside a Ray actor (its type and message)."""


class RayEngine:
    """The engine ``name`` run in Ray Data actors (module docstring); the Engine protocol."""

    def __init__(self, name: str, config: GenerationConfig, options: EngineOptions, executor: ExecutorOptions) -> None:
        import ray

        self.name, self.config, self.options = name, config, options
        self.workers, self.gpus, address = executor.ray_workers, executor.ray_gpus, executor.ray_address
        self.version = "unknown"  # the actors' engine version, known once a batch came back
        self.limits = RowLimits(vocab_size=None, max_new_tokens=config.max_new_tokens)
        self._started = not ray.is_initialized()
        if self._started:
            ray.init(address=address, include_dashboard=False, log_to_driver=False)

    def generate(self, questions: Sequence[dict[str, Any]]) -> Iterator[tuple[dict[str, Any], Any]]:
        """Rows (or per-question errors) computed by the actors, yielded here for run_engine to validate and store."""
        import ray

        size = max(1, self.options.batch_size)
        batches = [json.dumps(list(questions[start: start + size])) for start in range(0, len(questions), size)]
        if not batches:
            return
        dataset = ray.data.from_items([{"questions": text} for text in batches])
        answered = dataset.map_batches(
            _EngineActor, batch_size=1, compute=ray.data.ActorPoolStrategy(size=self.workers), num_cpus=1,
            num_gpus=self.gpus,
            fn_constructor_kwargs={"engine": self.name, "config": self.config.to_record(),
                                   "options": dataclasses.asdict(self.options)})
        for row in answered.iter_rows():
            self.limits = RowLimits.from_json(row["limits"])
            self.version = row["version"]
            question = json.loads(row["question"])
            yield question, (json.loads(row["row"]) if row["row"] else RemoteEngineError(row["error"]))

    def close(self) -> None:
        """Stop the actors, and the local cluster when this engine started it."""
        import ray

        if self._started and ray.is_initialized():
            ray.shutdown()


def make_executor_engine(name: str, config: GenerationConfig, options: EngineOptions,
                         executor: ExecutorOptions) -> RayEngine:
    """``--executor ray``: the engine ``name`` in ``executor.ray_workers`` Ray Data actors, each asking for
    ``executor.ray_gpus`` GPUs, on the cluster at ``executor.ray_address`` (settings checked here first)."""
    from builder.errors import BuilderError
    from builder.generation import ENGINES, settings_for

    if name not in ENGINES:
        raise BuilderError(f"unknown engine {name!r}; choose one of {sorted(ENGINES)}")
    if name != "hf":
        settings_for(config)
    try:
        import ray  # noqa: F401
    except ImportError:
        raise BuilderError("--executor ray needs the ray package: pip install 'ray[data]'") from None
    return RayEngine(name, config, options, executor)
