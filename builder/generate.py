"""generate: sample one answer per question with a causal LM and capture its top-24 probabilities
(docs/reference-behaviour.md#generation). The CLI step; the engines are in :mod:`builder.generation`.

``python -m builder generate --out DIR --model MODEL --temperature T`` reads ``questions.jsonl`` and appends to
``generations.jsonl`` (and the config row to ``configs.jsonl``). The chat is the paper's (system prompt, brevity
sentence, Llama "Today Date" pinned), every question starts from the same RNG state (reseed before each question),
sampling uses top_p 0.9, top_k 20 (MUCH's sampler, with every engine: ``--engine hf|vllm|openai``), at most 500 new
tokens. For each generated token the RAW logits are divided by
the temperature and soft-maxed over the full vocabulary; the 24 largest probabilities and their ids are kept, sorted
descending, plus the entries down to the sampled token when it ranked below 24 (the filter step trashes those rows).

``--model`` is a hub id, a local folder or a ``.gguf`` file; ``--model-name`` sets the ``model_name`` recorded in
the config (and hashed into its ID) when the path is not the public name. Every engine computes in ``--dtype``, by
default float32 on CPU and bf16 on GPU (never an engine's "auto"), recorded in each row and in ``configs.jsonl``
(:mod:`builder.generation.dtype`); ``verify``, ``replay`` and ``internals`` re-forward in it.

Reproducibility: ``--batch-size 1`` is the reference's procedure (the global RNG reseeded before each question). The
hf engine's default on a CPU is the exact batched path: 64 questions per call (``HF_QUESTIONS_PER_BATCH``), prompts
left-padded, each row drawn from its own generator seeded with ``--seed`` (the state batch 1 reseeds to), so every
row has the tokens batch 1 draws and its probabilities within float32 rounding, whatever its batch. On a GPU the
default stays 1: batch 1 draws from the GPU's RNG there, which the per-row (CPU) generators do not reproduce.

Resumable: a (config, question) pair already in ``generations.jsonl`` is skipped; per-question failures go to
``generations.failures.jsonl`` and the run continues.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Any

from builder.configs import GenerationConfig
from builder.errors import BuilderError
from builder.generation import (
    ENGINES,
    EngineOptions,
    ExecutorOptions,
    add_executor_arguments,
    make_executed_engine,
    settings_for,
)
from builder.generation.dtype import DTYPE_FIELD, check_config_dtype, run_dtype
from builder.store import JsonlStore, Shard
from much_dataset import schema

__all__ = ["add_arguments", "run", "pending_questions", "default_batch_size"]

#: What the step reads and writes (``--out``-relative), for the output rules of :mod:`builder.cli`.
READS = ("model", "tokenizer")
WRITES = ("generations.jsonl", "generations.failures.jsonl", "configs.jsonl")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from builder.generation.vllm import CPU_BINDS

    parser.add_argument("--model", required=True, help="hub id, local folder or path to a .gguf file")
    parser.add_argument("--model-name", default=None,
                        help="model_name recorded in the config and its ID (default: --model)")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--top-p", type=float, default=0.9, help="sampler nucleus (MUCH's 0.9), every engine")
    parser.add_argument("--top-k", type=int, default=20, help="sampler top-k (MUCH's 20; 0 = off), every engine")
    parser.add_argument("--max-new-tokens", type=int, default=500)
    parser.add_argument("--greedy", action="store_true", help="greedy decoding (never used in MUCH)")
    parser.add_argument("--no-brief", action="store_true", help="drop the brevity sentence of the system prompt")
    parser.add_argument("--batch-size", type=int, default=None,
                        help="questions per engine call. hf default: 8 on a CPU (each row exactly what batch 1 draws, "
                             "faster), 1 on a GPU; 1 is the reference's procedure. vllm default 1")
    parser.add_argument("--device", default=None, help="cuda / mps / cpu (default: best available)")
    parser.add_argument("--dtype", default=None,
                        help="hf/vllm: the dtype the values are computed in (default: bfloat16 on GPU, float32 on "
                             "CPU; recorded per row and config); openai: declares the server's --dtype")
    parser.add_argument("--limit", type=int, default=None, help="only the first N questions (after sharding)")
    parser.add_argument("--engine", choices=sorted(ENGINES), default="hf",
                        help="hf (default, the reference procedure), vllm (offline, batched) or openai (a server)")
    parser.add_argument("--base-url", default=None, help="openai: the server's /v1 URL (vllm serve, SGLang)")
    parser.add_argument("--tokenizer", default=None,
                        help="openai: tokenizer of the served model to decode the output (default: --model)")
    parser.add_argument("--api-key-env", default="OPENAI_API_KEY", help="openai: variable holding the key")
    parser.add_argument("--workers", type=int, default=8, help="openai: concurrent requests")
    parser.add_argument("--max-attempts", type=int, default=5, help="openai: calls per question before a failure")
    parser.add_argument("--backoff", type=float, default=2.0, help="openai: first retry delay in seconds (doubles)")
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="openai: seconds for a whole request (connection, answer and every byte of it)")
    parser.add_argument("--server-logit-scale", type=float, default=1.0,
                        help="openai: the logit_scale the server was started with; must be 1/T (docs/generation.md)")
    parser.add_argument("--gpu-memory-utilization", type=float, default=None,
                        help="vllm: fraction of GPU memory (on CPU: of the KV-cache RAM budget) vLLM reserves")
    parser.add_argument("--tensor-parallel-size", type=int, default=1, help="vllm: GPUs per model replica")
    parser.add_argument("--vllm-cpu-bind", choices=sorted(CPU_BINDS), default="auto",
                        help="vllm on a CPU: auto (vLLM's: one core reserved for its scheduler), all (every core "
                             "computes, none reserved), nobind (threads left to the OS); docs/generation.md")
    add_executor_arguments(parser)


def _config_from_args(args: argparse.Namespace) -> GenerationConfig:
    return GenerationConfig(
        model_name=args.model_name or args.model, brief=not args.no_brief, greedy=args.greedy, seed=args.seed,
        temperature=args.temperature, top_p=args.top_p, top_k=args.top_k, max_new_tokens=args.max_new_tokens,
    )


def default_batch_size(engine: str, device: str | None) -> int:
    """``--batch-size`` when not given: the hf engine's exact batched path on a CPU
    (:func:`builder.generation.hf.hf_default_batch_size`), 1 otherwise."""
    if engine != "hf":
        return 1
    from builder._llm import pick_device
    from builder.generation.hf import hf_default_batch_size

    return hf_default_batch_size(pick_device(device))


def _options_from_args(args: argparse.Namespace, dtype: str | None) -> EngineOptions:
    batch_size = args.batch_size if args.batch_size is not None else default_batch_size(args.engine, args.device)
    return EngineOptions(
        model=args.model, tokenizer=args.tokenizer, device=args.device, dtype=dtype, batch_size=batch_size,
        base_url=args.base_url, api_key_env=args.api_key_env, workers=args.workers, max_attempts=args.max_attempts,
        backoff=args.backoff, timeout=args.timeout, server_logit_scale=args.server_logit_scale,
        gpu_memory_utilization=args.gpu_memory_utilization, tensor_parallel_size=args.tensor_parallel_size,
        cpu_bind=args.vllm_cpu_bind,
    )


def pending_questions(questions: list[dict[str, Any]], store: JsonlStore, config_id: str) -> list[dict[str, Any]]:
    """Questions of ``questions`` this config has not generated yet (resume)."""
    done = {r["question_id"] for r in store.records() if r[schema.GENERATION_CONFIG] == config_id}
    return [q for q in questions if q["question_id"] not in done]


def _read_questions(out: Path) -> list[dict[str, Any]]:
    store = JsonlStore(out / "questions.jsonl", key="question_id")
    questions = list(store.records())
    if not questions:
        raise BuilderError(f"{out / 'questions.jsonl'} is empty; run `python -m builder questions` first")
    return questions


def _check_options(args: argparse.Namespace) -> None:
    """The numeric options, before any work (floats are finite already: :func:`builder.cli.finite_float`)."""
    for flag, value, low in (("--batch-size", 1 if args.batch_size is None else args.batch_size, 1),
                             ("--workers", args.workers, 1),
                             ("--max-attempts", args.max_attempts, 1), ("--backoff", args.backoff, 0)):
        if not value >= low:
            raise BuilderError(f"{flag} must be >= {low}, got {value}")
    if not args.timeout > 0:
        raise BuilderError(f"--timeout must be a positive number of seconds, got {args.timeout}")
    if args.limit is not None and args.limit < 0:
        raise BuilderError(f"--limit must be >= 0, got {args.limit}")


def _with_server_dtype(options: EngineOptions) -> tuple[EngineOptions, str]:
    """``options`` with the server's dtype as far as it can be established, and how (a warning when it cannot:
    the rows then record ``dtype: null``, never a guess)."""
    from builder.generation.openai import server_dtype

    dtype, how = server_dtype(options)
    if dtype is None:
        print("generate: WARNING: the server's dtype is not known (no --dtype, and the server does not report one): "
              "the rows record dtype null and verify re-forwards them in its device default, so a server computing "
              "in another dtype fails every row (vLLM's 'auto' is bfloat16 on CPU); start the server with --dtype "
              "float32 on CPU, bfloat16 on a GPU (builder/generation/dtype.py) and pass the same --dtype here",
              file=sys.stderr)
    return dataclasses.replace(options, dtype=dtype), f" ({how})"


def run(args: argparse.Namespace) -> int:
    out = Path(args.out)
    _check_options(args)
    placement = ExecutorOptions.from_args(args)  # --ray-workers, --ray-gpus checked before any work
    config = _config_from_args(args)
    if args.engine != "hf":
        settings_for(config)  # refuses a configuration that would change MUCH's probabilities, before any work
    questions = list(Shard.parse(args.shard).select(_read_questions(out)))[: args.limit]
    store = JsonlStore(out / "generations.jsonl")
    todo = pending_questions(questions, store, config.id)
    options = _options_from_args(args, run_dtype(args.engine, args.dtype, args.device))
    dtype_source = ""
    if args.engine == "openai" and todo:
        options, dtype_source = _with_server_dtype(options)
    dtype = options.dtype
    configs = JsonlStore(out / "configs.jsonl", key=schema.GENERATION_CONFIG)
    check_config_dtype(next((c for c in configs.records() if c[schema.GENERATION_CONFIG] == config.id), None), dtype)
    engine = make_executed_engine(args.engine, config, options, placement) if todo else None
    configs.extend([{**config.to_record(), "model_source": args.model, DTYPE_FIELD: dtype}])
    print(f"generate: config {config.id} ({config.model_name}, T={config.temperature}, top_p {config.top_p}, "
          f"top_k {config.top_k}, engine {args.engine}, dtype {dtype or 'not known'}{dtype_source}); "
          f"{len(questions) - len(todo)} done, {len(todo)} to go")
    if engine is None:
        return 0
    from builder.generation.loop import run_with_progress

    counts, seconds = run_with_progress(engine, todo, store, config_id=config.id, bar=(f"generate {config.id}", "q"))
    print(f"generate: {counts.generated} generated, {counts.failed} failed, {counts.tokens} tokens "
          f"({counts.tokens / seconds:.1f} tokens/s)")
    return 1 if counts.failed else 0
