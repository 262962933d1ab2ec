"""Time ``builder internals``' two engines on the same sample rows, each in its own process: ``--engine
transformers`` (eager attention, one pass per row, attention and hidden states) against ``--engine vllm`` (vLLM's
hidden-state extraction, the rows in one batched call, hidden states only), and print the ratio.

    PYTHONPATH=. python benchmarks/bench_internals_engines.py --rows 32  # transformers only
    MUCH_VLLM_PYTHON=.venv-vllm/bin/python VLLM_CPU_KVCACHE_SPACE=1 PYTHONPATH=. \
        python benchmarks/bench_internals_engines.py --rows 32 [--model-dir DIR]

The vllm path runs in the vLLM venv's interpreter (``--vllm-python``, default ``$MUCH_VLLM_PYTHON``;
``scripts/run_vllm_tests.sh`` builds the venv); without it, it is printed as "not measured: <why>". Model:
SmolLM2-135M-Instruct as a safetensors folder (``--model-dir``, default: the test GGUF converted once under ``--work``),
float32, hidden layers 8, 16, 24, ``--prompt-style user``; rows: the first ``--rows`` English sample rows. Each
(engine, round) runs in a fresh process (``benchmarks/isolation.py``: rotated each round, load before and after, the
CPU other processes used; the ratio printed only when every run was quiet, else withheld, ``--allow-noisy`` marks it).
In its process the engine is started (model loaded, vLLM's engine core up) and warmed up on one row before its clock
starts; the time is the CPU time of the process and all its children (vLLM's engine core is a child process) and the
wall time of the engine's ``forward`` over the rows.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
ENGINES = ("transformers", "vllm")
SAMPLE = ROOT / "much_dataset" / "sample" / "data" / "en" / "test-00000-of-00001.parquet"


def _cpu_seconds() -> float:
    """User + system CPU time of this process and every live descendant."""
    import psutil

    me = psutil.Process()
    total = sum(me.cpu_times()[:2])
    for child in me.children(recursive=True):
        try:
            total += sum(child.cpu_times()[:2])
        except psutil.NoSuchProcess:
            pass
    return total


def _model(work: Path) -> Path:
    folder = work / "smollm2-safetensors"
    if not (folder / "config.json").exists():
        from builder.models import gguf_to_safetensors
        from much_metric.models import smollm2_gguf_path

        gguf_to_safetensors(smollm2_gguf_path(), folder)
    return folder


def measure(engine: str, model: Path, rows: list[dict]) -> dict[str, float]:
    """Start ``engine``, warm it up on one row, then time its pass over ``rows``."""
    from builder import internals

    backend = internals.load_engine(engine, internals.InternalsEngineOptions(model=str(model), dtype="float32",
                                                                            device="cpu"))
    options = internals.InternalsOptions(hidden_layers=(8, 16, 24), prompt_style="user", hidden_dtype="float32",
                                         engine=engine, attention=internals.ENGINES[engine].attention)
    backend.prepare(options)
    backend.forward(rows[:1], options)
    cpu, wall = _cpu_seconds(), time.perf_counter()
    results = backend.forward(rows, options)
    cpu, wall = _cpu_seconds() - cpu, time.perf_counter() - wall
    failed = [r for r in results if isinstance(r, Exception)]
    if failed:
        raise SystemExit(f"{engine}: {len(failed)} rows failed, first: {failed[0]!r}")
    return {"cpu": cpu, "wall": wall, "tokens": sum(r[0]["hidden"].shape[0] for r in results)}


def _worker(args: argparse.Namespace) -> int:
    from isolation import write_result

    from builder import replay

    rows = list(replay.read_rows(SAMPLE))[: args.rows]
    write_result(args.result, measure(args.worker, Path(args.model_dir), rows))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--work", type=Path, default=ROOT / "out" / "bench_internals_engines")
    parser.add_argument("--model-dir", default=None, help="safetensors folder (default: the test GGUF converted)")
    parser.add_argument("--vllm-python", default=os.environ.get("MUCH_VLLM_PYTHON"),
                        help="the vLLM venv's python, for the vllm engine (default: $MUCH_VLLM_PYTHON)")
    parser.add_argument("--allow-noisy", action="store_true", help="print a ratio of a run that was not quiet, marked")
    parser.add_argument("--worker", choices=ENGINES, help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return _worker(args)
    from bench_generate_engines import not_measured
    from isolation import quiet_verdict, ratio_text, run_isolated

    if args.model_dir in (None, "smollm2"):
        args.work.mkdir(parents=True, exist_ok=True)
        args.model_dir = str(_model(args.work))
    skipped = not_measured(list(ENGINES), args.model_dir, args.vllm_python, vllm_paths=["vllm"])
    engines = [engine for engine in ENGINES if engine not in skipped]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "benchmarks")])}

    def command(engine: str, round_index: int, result: Path) -> list[str]:
        python = args.vllm_python if engine == "vllm" else sys.executable
        return [python, str(Path(__file__).resolve()), "--rows", str(args.rows), "--model-dir", args.model_dir,
                "--worker", engine, "--result", str(result)]

    runs = run_isolated(command, engines, args.rounds, env=env)
    timings = {engine: {key: sum(run.result[key] for run in runs if run.path == engine) for key in ("cpu", "wall")}
               for engine in engines}
    tokens = next(iter(runs)).result["tokens"] if runs else 0
    print(f"builder internals over {args.rows} English sample rows ({tokens} output tokens; SmolLM2, float32, CPU, "
          f"hidden layers 8,16,24; after one warm-up row), {args.rounds} rounds, each engine in its own process:")
    for engine, why in skipped.items():
        print(f"  --engine {engine:<12} not measured: {why}")
    for engine, value in timings.items():
        print(f"  --engine {engine:<12} cpu {value['cpu']:.1f} s  wall {value['wall']:.1f} s")
    print(f"  {quiet_verdict(runs)[1]}")
    if len(timings) == len(ENGINES):
        cpu = ratio_text(timings["vllm"]["cpu"], timings["transformers"]["cpu"], runs, allow_noisy=args.allow_noisy)
        wall = ratio_text(timings["vllm"]["wall"], timings["transformers"]["wall"], runs,
                          allow_noisy=args.allow_noisy)
        print(f"  vllm / transformers: cpu {cpu}, wall {wall}")
    return 0


if __name__ == "__main__":  # vLLM spawns worker processes that re-import the main module
    sys.exit(main())
