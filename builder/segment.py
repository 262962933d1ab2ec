"""segment: split every generation into claims (docs/reference-behaviour.md#segmentation) and compute its stopword mask
(docs/reference-behaviour.md#stopword-rule).

Reads ``generations.jsonl`` and appends ``segments.jsonl``: ``generation_id, token_chunks, stopword_mask,
segmenter``. Claims come from :func:`much_metric.segmentation.segment` with the generation's own token ids and
``--compat 0.2.1`` by default (the much-segmenter version MUCH was built with); ``stopword_mask[i]`` says whether
token ``i`` decoded alone is in the evaluation stopword set. The tokenizer of each generation is its config's model
(``configs.jsonl``: ``model_source`` when recorded, else ``model_name``) unless ``--tokenizer`` names one for all.
Resumable and idempotent; a generation that cannot be segmented is recorded in ``segments.failures.jsonl``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from builder.errors import StepStopped, load_or_stop, require_input
from builder.store import JsonlStore, Shard
from much_dataset import schema
from much_metric.models import load_tokenizer  # the toolkit's one loader (hub id, folder, .gguf, tokenizer file)

__all__ = ["add_arguments", "run", "segment_record"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--compat", default="0.2.1", help="much-segmenter version to reproduce (0.2.1 or 0.3.0)")
    parser.add_argument("--tokenizer", default=None,
                        help="hub id, folder or .gguf of the tokenizer for every generation (default: per config)")


def segment_record(generation: dict[str, Any], tokenizer, *, compat: str = "0.2.1") -> dict[str, Any]:
    """The ``segments.jsonl`` record of one generation."""
    from much_dataset.stopwords import stopword_mask
    from much_metric.segmentation import segment

    gid = generation.get(schema.GENERATION_ID)
    for field in (schema.OUTPUT, schema.OUTPUT_TOKENS):
        if field not in generation:
            raise ValueError(f"generation_id={gid!r}: field {field!r} is missing")
    tokens = generation[schema.OUTPUT_TOKENS]
    chunks = segment(generation[schema.OUTPUT], tokenizer, token_ids=tokens, compat=compat)
    return {
        schema.GENERATION_ID: gid,
        schema.TOKEN_CHUNKS: chunks,
        schema.STOPWORD_MASK: stopword_mask(tokens, tokenizer).tolist(),
        "segmenter": compat,
    }


def _tokenizer_sources(out: Path) -> dict[str, str]:
    sources = {}
    for record in JsonlStore(out / "configs.jsonl", key=schema.GENERATION_CONFIG).records():
        sources[record[schema.GENERATION_CONFIG]] = record.get("model_source") or record["model_name"]
    return sources


def run(args: argparse.Namespace) -> int:
    from tqdm.auto import tqdm

    out = Path(args.out)
    generations = JsonlStore(require_input(out / "generations.jsonl", made_by="generate"))
    store = JsonlStore(out / "segments.jsonl")
    todo = [g for g in Shard.parse(args.shard).select(generations.records()) if g[schema.GENERATION_ID] not in store]
    sources = _tokenizer_sources(out)
    tokenizers: dict[str, Any] = {}
    failed = 0
    for generation in tqdm(todo, desc="segment", unit="gen"):
        gid = generation[schema.GENERATION_ID]
        try:
            source = args.tokenizer or sources.get(generation[schema.GENERATION_CONFIG])
            if source is None:
                raise ValueError(f"config {generation[schema.GENERATION_CONFIG]!r} is not in configs.jsonl; "
                                 "pass --tokenizer")
            if source not in tokenizers:
                # Not about the item: a tokenizer that cannot load stops the step.
                tokenizers[source] = load_or_stop(load_tokenizer, source)
            record = segment_record(generation, tokenizers[source], compat=args.compat)
        except StepStopped:
            raise
        except Exception as error:  # noqa: BLE001 - recorded per item, the run goes on
            store.record_failure(gid, f"{type(error).__name__}: {error}")
            failed += 1
            continue
        store.append(record)
    print(f"segment: {len(todo) - failed} segmented, {failed} failed, {len(store)} stored")
    return 1 if failed else 0
