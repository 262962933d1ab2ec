"""Time ``builder internals``' two engines on the same sample rows: ``--engine transformers`` (eager attention, one
pass per row, attention and hidden states) against ``--engine vllm`` (vLLM's hidden-state extraction, the rows in one
batched call, hidden states only), and print the ratio.

    VLLM_CPU_KVCACHE_SPACE=1 VLLM_CPU_CI_ENV=1 .venv-vllm/bin/python benchmarks/bench_internals_engines.py --rows 32

Runs in the vLLM venv (``scripts/run_vllm_tests.sh`` builds it). Model: SmolLM2-135M-Instruct (the test GGUF,
converted to a safetensors folder once under ``--work``), float32, hidden layers 8, 16, 24, ``--prompt-style user``;
rows: the first ``--rows`` English sample rows. Each engine is started (model loaded, vLLM's engine core up) and
warmed up on one row before its clock starts; the time is the CPU time of this process and all its children (vLLM's
engine core is a child process) and the wall time of the engine's ``forward`` over the rows.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=32)
    parser.add_argument("--work", type=Path, default=ROOT / "out" / "bench_internals_engines")
    args = parser.parse_args(argv)
    from builder import replay

    args.work.mkdir(parents=True, exist_ok=True)
    model = _model(args.work)
    rows = list(replay.read_rows(SAMPLE))[: args.rows]
    timings = {engine: measure(engine, model, rows) for engine in ("transformers", "vllm")}
    print(f"builder internals over {len(rows)} English sample rows ({timings['vllm']['tokens']} output tokens; "
          "SmolLM2, float32, CPU, hidden layers 8,16,24; after one warm-up row):")
    for engine, value in timings.items():
        print(f"  --engine {engine:<12} cpu {value['cpu']:.1f} s  wall {value['wall']:.1f} s")
    print(f"  vllm / transformers: cpu x{timings['vllm']['cpu'] / timings['transformers']['cpu']:.2f}, "
          f"wall x{timings['vllm']['wall'] / timings['transformers']['wall']:.2f}")
    return 0


if __name__ == "__main__":  # vLLM spawns worker processes that re-import the main module
    sys.exit(main())
