"""generate: sample one answer per question with a causal LM and capture its top-24 probabilities
(docs/reference-behaviour.md#generation).

``python -m builder generate --out DIR --model MODEL --temperature T`` reads ``questions.jsonl`` and appends to
``generations.jsonl`` (and the config row to ``configs.jsonl``). The chat is the paper's (system prompt, brevity
sentence, Llama "Today Date" pinned), every question starts from the same RNG state (reseed before each question),
sampling uses top_p 0.9, top_k 20, at most 500 new tokens. For each generated token the RAW logits are divided by
the temperature and soft-maxed over the full vocabulary; the 24 largest probabilities and their ids are kept, sorted
descending, plus the entries down to the sampled token when it ranked below 24 (the filter step trashes those rows).

``--model`` is a hub id, a local folder or a ``.gguf`` file; ``--model-name`` sets the ``model_name`` recorded in
the config (and hashed into its ID) when the path is not the public name. bf16 on GPU, float32 on CPU.

Reproducibility: ``--batch-size 1`` (default) is the reference's procedure. Larger batches left-pad the prompts and
reseed once per batch, so they are faster on a GPU but NOT bit-reproducible against batch size 1.

Resumable: a (config, question) pair already in ``generations.jsonl`` is skipped; per-question failures go to
``generations.failures.jsonl`` and the run continues.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from builder.configs import GenerationConfig, hash_id
from builder.errors import BuilderError
from builder.store import JsonlStore, Shard
from much_dataset import schema

__all__ = ["add_arguments", "run", "generation_id", "generate_batch", "pending_questions"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, help="hub id, local folder or path to a .gguf file")
    parser.add_argument("--model-name", default=None,
                        help="model_name recorded in the config and its ID (default: --model)")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--top-p", type=float, default=None, help="hf: 0.9 (the reference); vllm/openai: must be 1")
    parser.add_argument("--top-k", type=int, default=None, help="hf: 20 (the reference); vllm/openai: must be 0")
    parser.add_argument("--max-new-tokens", type=int, default=500)
    parser.add_argument("--greedy", action="store_true", help="greedy decoding (never used in MUCH)")
    parser.add_argument("--no-brief", action="store_true", help="drop the brevity sentence of the system prompt")
    parser.add_argument("--batch-size", type=int, default=1,
                        help="1 reproduces the reference; >1 is faster but not bit-reproducible")
    parser.add_argument("--device", default=None, help="cuda / mps / cpu (default: best available)")
    parser.add_argument("--dtype", default=None, help="torch dtype name (default: bfloat16 on GPU, float32 on CPU)")
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
    parser.add_argument("--timeout", type=float, default=600.0, help="openai: seconds per request")
    parser.add_argument("--gpu-memory-utilization", type=float, default=None,
                        help="vllm: fraction of GPU memory (on CPU: of the KV-cache RAM budget) vLLM reserves")
    parser.add_argument("--tensor-parallel-size", type=int, default=1, help="vllm: GPUs per model replica")


def generation_id(record: dict[str, Any]) -> str:
    """An ID shaped like the reference's (docs/reference-behaviour.md#generation-id): hash of the compact JSON of the
    Generation fields.

    The reference hashes pydantic's serialisation, whose float formatting we do not promise to match byte for
    byte; treat the ID as an opaque, deterministic key.
    """
    topn = [{str(i): p for i, p in zip(ids, probs, strict=True)}
            for ids, probs in zip(record[schema.LOGITS_TOKEN_IDS], record[schema.LOGITS_VALUES], strict=True)]
    payload = {
        "generation_config": record[schema.GENERATION_CONFIG], "prompt": record[schema.PROMPT],
        "output": record[schema.OUTPUT], "lang": record[schema.LANG], "output_tokens": record[schema.OUTPUT_TOKENS],
        "wiki_url": record[schema.WIKI_URL], "topn_prob_dicts": topn,
    }
    return hash_id(json.dumps(payload, ensure_ascii=False, separators=(",", ":")))


def _config_from_args(args: argparse.Namespace) -> GenerationConfig:
    engine = getattr(args, "engine", "hf")
    top_p = args.top_p if args.top_p is not None else (0.9 if engine == "hf" else 1.0)
    top_k = args.top_k if args.top_k is not None else (20 if engine == "hf" else 0)
    return GenerationConfig(
        model_name=args.model_name or args.model, brief=not args.no_brief, greedy=args.greedy, seed=args.seed,
        temperature=args.temperature, top_p=top_p, top_k=top_k, max_new_tokens=args.max_new_tokens,
    )


def pending_questions(questions: list[dict[str, Any]], store: JsonlStore, config_id: str) -> list[dict[str, Any]]:
    """Questions of ``questions`` this config has not generated yet (resume)."""
    done = {r["question_id"] for r in store.records() if r[schema.GENERATION_CONFIG] == config_id}
    return [q for q in questions if q["question_id"] not in done]


def _trim(tokens: list[int], eos_ids: set[int]) -> list[int]:
    # Keep everything up to and including the first EOS: what follows in a batch is padding.
    for position, token in enumerate(tokens):
        if token in eos_ids:
            return tokens[: position + 1]
    return tokens


def generate_batch(llm, config: GenerationConfig, questions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Generate the answers of ``questions`` (one ``model.generate`` call) and return generation records.

    With one question this is exactly the reference's procedure; with several, prompts are left-padded.
    """
    import torch

    from builder._llm import build_prompt, eos_token_ids, reseed, top_candidates

    tokenizer, model = llm.tokenizer, llm.model
    prompts = [build_prompt(tokenizer, q[schema.PROMPT], brief=config.brief) for q in questions]
    eos_ids = eos_token_ids(model, tokenizer)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (eos_ids or [0])[0]
    if len(prompts) == 1:
        input_ids = torch.tensor([tokenizer.encode(prompts[0], add_special_tokens=False)], device=llm.device)
        attention = torch.ones_like(input_ids)
    else:
        encoded = [tokenizer.encode(p, add_special_tokens=False) for p in prompts]
        width = max(map(len, encoded))
        input_ids = torch.tensor([[pad_id] * (width - len(e)) + e for e in encoded], device=llm.device)
        attention = torch.tensor([[0] * (width - len(e)) + [1] * len(e) for e in encoded], device=llm.device)
    reseed(config.seed)
    sampling = {} if config.greedy else {"temperature": config.temperature, "top_p": config.top_p,
                                         "top_k": config.top_k}
    with torch.inference_mode():
        out = model.generate(
            input_ids=input_ids, attention_mask=attention, do_sample=not config.greedy, **sampling,
            max_new_tokens=config.max_new_tokens, return_dict_in_generate=True, output_logits=True,
            pad_token_id=pad_id,
        )
    new_tokens = out.sequences[:, input_ids.shape[1]:]
    logits = torch.stack(out.logits, dim=1)  # (batch, steps, vocab), raw
    temperature = 1.0 if config.greedy else config.temperature
    records = []
    for row, question in enumerate(questions):
        tokens = _trim(new_tokens[row].tolist(), set(eos_ids))
        n = len(tokens)
        ids, probs, _, _ = top_candidates(logits[row, :n], torch.tensor(tokens), temperature=temperature)
        record = {
            schema.GENERATION_CONFIG: config.id, "question_id": question["question_id"],
            schema.LANG: question[schema.LANG], schema.WIKI_URL: question[schema.WIKI_URL],
            schema.PROMPT: question[schema.PROMPT],
            schema.OUTPUT: tokenizer.decode(tokens, skip_special_tokens=False), schema.OUTPUT_TOKENS: tokens,
            schema.LOGITS_TOKEN_IDS: ids, schema.LOGITS_VALUES: probs,
        }
        # finished = ended with the model's EOS (not cut at max_new_tokens); export trashes unfinished rows.
        records.append({schema.GENERATION_ID: generation_id(record), **record,
                        "finished": bool(tokens) and tokens[-1] in eos_ids})
    return records


def _read_questions(out: Path) -> list[dict[str, Any]]:
    store = JsonlStore(out / "questions.jsonl", key="question_id")
    questions = list(store.records())
    if not questions:
        raise BuilderError(f"{out / 'questions.jsonl'} is empty; run `python -m builder questions` first")
    return questions


def _run_hf(args: argparse.Namespace, config: GenerationConfig, todo: list[dict[str, Any]],
            store: JsonlStore) -> tuple[int, int]:
    from tqdm.auto import tqdm

    from builder._llm import load_model
    from builder.errors import load_or_stop

    llm = load_or_stop(load_model, args.model, device=args.device, dtype=args.dtype)
    n_tokens, failed = 0, 0
    started = time.perf_counter()
    with tqdm(total=len(todo), desc=f"generate {config.id}", unit="q") as bar:
        for start in range(0, len(todo), args.batch_size):
            batch = todo[start: start + args.batch_size]
            try:
                records = generate_batch(llm, config, batch)
            except Exception as error:  # noqa: BLE001 - recorded per item, the run goes on
                for question in batch:
                    store.record_failure(f"{config.id}/{question['question_id']}", f"{type(error).__name__}: {error}")
                failed += len(batch)
                bar.update(len(batch))
                continue
            for record in records:
                store.append(record)
                n_tokens += len(record[schema.OUTPUT_TOKENS])
            bar.update(len(batch))
            bar.set_postfix(tok_s=f"{n_tokens / (time.perf_counter() - started):.1f}")
    return n_tokens, failed


def _serving(name: str):
    def runner(args: argparse.Namespace, config: GenerationConfig, todo: list[dict[str, Any]],
               store: JsonlStore) -> tuple[int, int]:
        from builder import generate_serving

        return getattr(generate_serving, name)(args, config, todo, store)
    return runner


#: --engine -> runner(args, config, pending questions, store) -> (tokens generated, questions failed)
ENGINES = {"hf": _run_hf, "vllm": _serving("run_vllm"), "openai": _serving("run_openai")}


def run(args: argparse.Namespace) -> int:
    out = Path(args.out)
    if args.batch_size < 1:
        raise BuilderError("--batch-size must be >= 1")
    engine = getattr(args, "engine", "hf")
    config = _config_from_args(args)
    if engine != "hf":
        from builder.generate_serving import settings_for

        settings_for(config)  # refuses a configuration that would change MUCH's probabilities, before any work
    questions = list(Shard.parse(args.shard).select(_read_questions(out)))[: args.limit]
    store = JsonlStore(out / "generations.jsonl")
    JsonlStore(out / "configs.jsonl", key=schema.GENERATION_CONFIG).extend([{**config.to_record(),
                                                                          "model_source": args.model}])
    todo = pending_questions(questions, store, config.id)
    print(f"generate: config {config.id} ({config.model_name}, T={config.temperature}, engine {engine}); "
          f"{len(questions) - len(todo)} done, {len(todo)} to go")
    if not todo:
        return 0
    started = time.perf_counter()
    n_tokens, failed = ENGINES[engine](args, config, todo, store)
    print(f"generate: {len(todo) - failed} generated, {failed} failed, {n_tokens} tokens "
          f"({n_tokens / (time.perf_counter() - started):.1f} tokens/s)")
    return 1 if failed else 0
