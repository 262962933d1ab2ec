"""Stopword mask of a MUCH-sized token stream: packaged vocabulary table vs the tokenizer rule (decode each id).

Workload: 101,917 tokens (MUCH's output-token count, docs/reference-behaviour.md#hub-columns) drawn from the real
Llama-3 / Tekken / Gemma-3
tokenizations of the vendored Mu-SHROOM outputs, split over the eight MUCH configs. Both sides are timed in the same
run (best of 5); the table side includes nothing but the lookup (tables are loaded once, timed separately), the
rule side decodes each distinct id once (much_dataset.stopwords.stopword_mask, what the loader did before).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from much_dataset import offline_tokenizers, schema, vocab_stopwords  # noqa: E402

N_TOKENS = 101_917


def _best(function, repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    texts = [json.loads(line)["model_output_text"] for path in sorted((REPO_ROOT / "data" / "mushroom").glob("*.jsonl"))
             for line in path.open(encoding="utf-8") if line.strip()]
    folders = {"gemma3": REPO_ROOT / ".cache" / "test-assets" / "gemma3"}
    tokenizers = {}
    for name in offline_tokenizers.TOKENIZER_SOURCES:
        path = offline_tokenizers.tokenizer_file(name, folder=folders.get(name))
        if path is None:
            raise SystemExit(f"tokenizer {name} missing ({offline_tokenizers.TOKENIZER_SOURCES[name].install_hint})")
        tokenizers[name] = offline_tokenizers.load_tokenizer_file(name, path)
    configs = sorted(schema.MUCH_CONFIGS)
    per_config = N_TOKENS // len(configs)
    rng = np.random.default_rng(0)
    streams = {}
    for config in configs:
        name = vocab_stopwords.table_name(config)
        ids = np.concatenate([tokenizers[name].encode(t, add_special_tokens=False) for t in texts])
        streams[config] = rng.choice(ids, per_config)
    n = sum(len(s) for s in streams.values())

    vocab_stopwords.load_table.cache_clear()
    load = _best(lambda: (vocab_stopwords.load_table.cache_clear(),
                          [vocab_stopwords.load_table(name) for name in tokenizers]))
    table_side = _best(lambda: [vocab_stopwords.mask_for(config, s) for config, s in streams.items()])
    rule_side = _best(lambda: [vocab_stopwords.rule_flags(s, tokenizers[vocab_stopwords.table_name(config)])
                               for config, s in streams.items()])
    same = all(np.array_equal(vocab_stopwords.mask_for(c, s), vocab_stopwords.rule_flags(
        s, tokenizers[vocab_stopwords.table_name(c)])) for c, s in streams.items())
    distinct = sum(len(np.unique(s)) for s in streams.values())
    print(f"{n:,} tokens over {len(configs)} MUCH configs ({distinct:,} distinct (config, id) pairs); "
          f"masks equal: {same}")
    print(f"load the 3 tables:           {load * 1e3:8.2f} ms")
    print(f"table lookup (mask_for):     {table_side * 1e3:8.2f} ms")
    print(f"tokenizer rule (decode ids): {rule_side * 1e3:8.2f} ms")
    print(f"ratio rule / table: {rule_side / table_side:.0f}x")


if __name__ == "__main__":
    main()
