"""Build the SmolLM2 neighbour statistics shipped for the embedded sample (much_metric/data/neighbours/smollm2.npz).

Corpus: the largest real multilingual text the project ships offline -- the Mu-SHROOM test split's questions and
answers (``model_input`` and ``model_output_text``, en/fr/es/de, data/mushroom, CC-BY-4.0). The sample's own outputs
are not used (KTC would then see the text it scores). The sample's generation configs are recorded so that
``default_neighbours`` recognises the sample.

    python scripts/data/make_sample_neighbours.py [--work DIR]   (default: a new temporary folder)
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # this checkout's packages, not another installed copy
CORPUS = ("Mu-SHROOM test split (SemEval-2025 Task 3, Helsinki-NLP/mu-shroom, CC-BY-4.0): model_input and "
          "model_output_text, en+fr+es+de")


def main() -> None:
    import much_dataset
    from much_metric.baselines.methods.ktc import SAMPLE_NEIGHBOURS
    from much_metric.baselines.neighbour_job import CountOptions, count_shard, files_source, reduce_shards
    from much_metric.models import SMOLLM2, load_tokenizer

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", default=None)
    args = parser.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="much-neighbours-"))
    files = sorted((ROOT / "data" / "mushroom").glob("mushroom.*-tst.v1.extra.jsonl"))
    tokenizer = load_tokenizer(SMOLLM2)
    source = files_source(files, jsonl_fields=("model_input", "model_output_text"))
    count_shard([source], tokenizer, work, tokenizer_name="SmolLM2-135M-Instruct",
                options=CountOptions(block_size=500))
    sample = much_dataset.load("sample", split="test")
    stats = reduce_shards(work, tokenizer, top=8, corpus=CORPUS,
                          meta={"generation_configs": sorted(set(sample["generation_config"]))})
    stats.save(SAMPLE_NEIGHBOURS)
    print(f"{SAMPLE_NEIGHBOURS.relative_to(ROOT)} ({SAMPLE_NEIGHBOURS.stat().st_size:,} bytes): {stats.describe()}")


if __name__ == "__main__":
    main()
