"""internals: re-forward stored rows with eager attention and write an internals pack (attention, hidden states).

``python -m builder internals --source ROWS --model MODEL --out PACK [--generation-config ID]
[--prompt-style much|user] [--temperature T]
[--hidden-layers 6,18] [--hidden-compression none|int8|pca:K] [--attention-window K] [--attention-to-self]
[--limit N] [--shard i/n]``
teacher-forces ``prompt + output_tokens`` of every row (a ``.jsonl`` file or a ``.parquet`` shard, as ``replay``
reads them) through ``MODEL`` once, with eager attention, and writes a content-addressed pack under ``PACK``:
``shards/<sha256>.safetensors`` (tensors ``<generation_id>/<name>``) and ``manifest.json`` (model, weights hash,
layer/head counts, ``hidden_layers``, dtypes, the source's fingerprint, one entry per row, toolkit version).

Row ``t`` of every array is the sequence position of output token ``t``: the position that reads token ``t`` (its
logits predict token ``t + 1``; the stored probabilities of token ``t`` came from the position before it).

* ``attention_to_previous`` [n_tokens, layers, heads] (float32): the attention weight from that position to the one
  before it (RAUQ's input);
* ``hidden`` [n_tokens, len(hidden_layers), hidden_size] (float16 by default): transformers' ``hidden_states`` at
  the given indices (0 = the embeddings, ``layers`` = the last layer after the final norm);
* ``attention_window`` [n_tokens, layers, heads, K] (with ``--attention-window K``): the weights to the K positions
  before it, nearest first (0 where the sequence starts);
* ``attention_to_self`` [n_tokens, layers, heads] (float32, with ``--attention-to-self``): the weight from that
  position to itself, the diagonal of the attention matrix (LLM-Check's attention score).

``--hidden-compression int8|pca:K`` stores ``hidden`` compressed (:mod:`much_dataset.internals_compression`;
``load_internals`` decodes it to float32): the relative L2 reconstruction error of every token vector against the
float32 hidden state is measured, its mean and max printed and kept in the manifest (``hidden_error``; also for
``none``, where it is the float16 rounding). ``pca:K`` fits its basis once per pack on the first ``--pca-fit-rows``
rows of the source file (the same rows whatever ``--shard``/``--limit``), under the pack's lock: the first run stores
it as ``basis/<sha256>.safetensors`` and names it in the manifest, every later or concurrent run uses that file.

The same pass re-derives the probabilities of the stored candidates (softmax over the full vocabulary at
``--temperature``) and compares them with the stored ones: the largest absolute difference is printed and kept in
the manifest (a free check that the pack belongs to the texts and probabilities it is stored beside).

Resumable and kill-safe: rows are written a shard at a time (``--rows-per-shard``); a shard file is complete before
the manifest, rewritten atomically under the pack's lock, names it, so a killed run loses at most the shard it was
computing and a rerun never stores a row twice. A rerun with another model, source, prompt or layers is refused.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from builder.errors import BuilderError
from builder.internals_store import (
    check_identity,
    commit_rows,
    file_sha256,
    new_manifest,
    pack_identity,
    read_manifest,
    weights_sha256,
    write_basis,
    write_shard,
)
from builder.replay import PROMPT_STYLES, read_rows
from builder.store import Shard
from much_dataset import schema
from much_dataset.internals import BASIS, MANIFEST, read_basis
from much_dataset.internals_compression import encode_hidden, fit_pca, parse_compression, relative_errors

__all__ = ["add_arguments", "run", "InternalsOptions", "forward_internals", "row_internals", "prompt_ids",
           "parse_layers", "use_eager_attention", "weights_sha256", "file_sha256"]

HIDDEN_DTYPES = ("float16", "float32", "bfloat16")
#: Rows of the source file a ``pca:K`` basis is fitted on (``--pca-fit-rows``).
PCA_FIT_ROWS = 64


def _compression_arg(text: str) -> str:
    try:
        parse_compression(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return str(text).strip().lower()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--source", required=True, help="generation rows: a .jsonl file or a .parquet shard")
    parser.add_argument("--model", required=True, help="hub id, local folder or .gguf file")
    parser.add_argument("--generation-config", default=None,
                        help="only the rows of this generation_config (a MUCH file holds the 8 configs of 4 models: "
                             "one pack per config); a MUCH config also sets the default --temperature")
    parser.add_argument("--temperature", type=float, default=None,
                        help="temperature of the re-derived probabilities compared with the stored ones (default: "
                             "the MUCH generation config's, else 1.0)")
    parser.add_argument("--prompt-style", choices=PROMPT_STYLES, default="much")
    parser.add_argument("--no-brief", action="store_true", help="much style without the brevity sentence")
    parser.add_argument("--hidden-layers", default=None,
                        help="comma-separated hidden_states indices (0 = embeddings; default: the middle layer, "
                             "layers // 2 + 1)")
    parser.add_argument("--hidden-dtype", choices=HIDDEN_DTYPES, default="float16",
                        help="storage dtype of uncompressed hidden states")
    parser.add_argument("--hidden-compression", default="none", type=_compression_arg,
                        help="none (default), int8 (blocks of 32 channels, one scale each) or pca:K (K principal "
                             "components fitted on the first --pca-fit-rows rows, basis stored in the pack)")
    parser.add_argument("--pca-fit-rows", type=int, default=PCA_FIT_ROWS,
                        help=f"rows of the source the pca:K basis is fitted on (default {PCA_FIT_ROWS})")
    parser.add_argument("--attention-to-self", action="store_true",
                        help="also store each position's attention to itself (LLM-Check's attention score)")
    parser.add_argument("--attention-window", type=int, default=0,
                        help="also store the attention to the last K positions (head-style features; default 0)")
    parser.add_argument("--rows-per-shard", type=int, default=32)
    parser.add_argument("--device", default=None)
    parser.add_argument("--dtype", default=None, help="torch dtype name (default: float32 on CPU, bf16 on GPU)")
    parser.add_argument("--limit", type=int, default=None, help="only the first N rows (after sharding)")


@dataclass(frozen=True)
class InternalsOptions:
    """What a pack stores; part of its identity (a resumed run must ask for the same)."""

    hidden_layers: tuple[int, ...]
    temperature: float = 1.0
    generation_config: str | None = None
    prompt_style: str = "much"
    brief: bool = True
    hidden_dtype: str = "float16"
    attention_window: int = 0
    hidden_compression: str = "none"
    pca_fit_rows: int = PCA_FIT_ROWS
    attention_to_self: bool = False


def parse_layers(text: str | None, n_layers: int) -> tuple[int, ...]:
    """``"6,18"`` -> (6, 18), each in 0..n_layers (hidden_states indices); None -> the middle layer."""
    if text is None or not str(text).strip():
        return (n_layers // 2 + 1,)
    try:
        layers = tuple(int(part) for part in str(text).split(","))
    except ValueError as error:
        raise BuilderError(f"--hidden-layers must be comma-separated integers, got {text!r}") from error
    bad = [layer for layer in layers if not 0 <= layer <= n_layers]
    if bad or len(set(layers)) != len(layers):
        raise BuilderError(f"--hidden-layers {text!r}: indices must be distinct and within 0..{n_layers} "
                           "(0 = embeddings)")
    return layers


def forward_internals(model: Any, prompt_ids: Sequence[int], tokens: Sequence[int], options: InternalsOptions,
                      *, basis: dict[str, np.ndarray] | None = None) -> tuple[dict[str, np.ndarray], Any, np.ndarray]:
    """One eager-attention forward pass of ``prompt_ids + tokens``: the pack arrays of the output tokens (``hidden``
    stored as ``options.hidden_compression`` says; ``basis``: the pack's PCA basis for ``pca:K``), the logits that
    produced them (row ``t`` of the logits = the position before output token ``t``) and the relative L2 error of
    every stored hidden vector against the float32 one, ``[n_tokens, len(hidden_layers)]``.

    The model must use eager attention (``output_attentions`` needs the weights).
    """
    import torch

    n_prompt, n = len(prompt_ids), len(tokens)
    if n_prompt < 1 or n < 1:
        raise ValueError("a pack row needs a non-empty prompt and at least one output token")
    device = next(model.parameters()).device
    with torch.inference_mode():
        out = model(input_ids=torch.tensor([list(prompt_ids) + list(tokens)], device=device),
                    output_attentions=True, output_hidden_states=True)
    positions = torch.arange(n_prompt, n_prompt + n, device=device)
    # attentions: one (1, heads, seq, seq) per layer; query row = position, key column = attended position
    attention = torch.stack([layer[0, :, positions, positions - 1] for layer in out.attentions], dim=0)
    arrays = {"attention_to_previous": attention.permute(2, 0, 1).float().cpu().numpy()}  # (n, layers, heads)
    if options.attention_window > 0:
        window = []
        for back in range(1, options.attention_window + 1):
            keys = positions - back
            valid = (keys >= 0).float()
            weights = torch.stack([layer[0, :, positions, keys.clamp(min=0)] for layer in out.attentions], dim=0)
            window.append(weights * valid)
        arrays["attention_window"] = torch.stack(window, dim=-1).permute(2, 0, 1, 3).float().cpu().numpy()
    if options.attention_to_self:
        arrays["attention_to_self"] = torch.stack([layer[0, :, positions, positions] for layer in out.attentions],
                                                  dim=0).permute(2, 0, 1).float().cpu().numpy()
    hidden = torch.stack([out.hidden_states[index][0, positions] for index in options.hidden_layers], dim=1)
    exact = hidden.float().cpu().numpy()
    if options.hidden_compression == "none" and options.hidden_dtype == "bfloat16":
        # numpy has no bfloat16: stored as its raw 16 bits
        rounded = hidden.to(torch.bfloat16).cpu()
        arrays["hidden"] = rounded.view(torch.int16).numpy()
        error = relative_errors(exact, rounded.float().numpy())
    else:
        stored = encode_hidden(exact, options.hidden_compression, dtype=options.hidden_dtype, basis=basis)
        arrays.update(stored)
        from much_dataset.internals_compression import decode_hidden

        error = relative_errors(exact, decode_hidden(stored, options.hidden_compression, basis=basis))
    logits = out.logits[0, n_prompt - 1 : n_prompt + n - 1].float()
    return arrays, logits, error


def stored_probability_difference(logits: Any, stored_ids: Sequence[Sequence[int]],
                                  stored_probs: Sequence[Sequence[float]], temperature: float) -> float:
    """Largest |softmax(logits / T)[id] - stored probability| over every stored candidate of every position."""
    import torch

    probs = torch.softmax(logits / temperature, dim=-1)
    worst = 0.0
    for position, (ids, values) in enumerate(zip(stored_ids, stored_probs, strict=True)):
        if len(ids):
            got = probs[position, torch.tensor([int(i) for i in ids], device=probs.device)].double().cpu().numpy()
            worst = max(worst, float(np.abs(got - np.asarray(values, dtype=np.float64)).max()))
    return worst


def prompt_ids(tokenizer: Any, question: str, style: str, *, brief: bool = True) -> list[int]:
    """The prompt's token ids as ``replay`` builds them: ``much`` = generate's chat (system prompt, brevity sentence,
    pinned date), ``user`` = one user message (the embedded sample's observer)."""
    from builder._llm import build_prompt

    if style == "much":
        text = build_prompt(tokenizer, question, brief=brief)
    elif style == "user":
        text = tokenizer.apply_chat_template([{"role": "user", "content": question}], tokenize=False,
                                             add_generation_prompt=True)
    else:
        raise ValueError(f"prompt_style must be one of {PROMPT_STYLES}, got {style!r}")
    return tokenizer.encode(text, add_special_tokens=False)


def row_internals(llm: Any, row: dict[str, Any], options: InternalsOptions, *,
                  basis: dict[str, np.ndarray] | None = None) -> tuple[dict[str, np.ndarray], float, np.ndarray]:
    """Pack arrays of one stored row, the largest difference with its stored probabilities (nan if none) and the
    hidden vectors' relative reconstruction errors (see :func:`forward_internals`)."""
    tokens = [int(t) for t in row[schema.OUTPUT_TOKENS]]
    if not tokens:
        raise ValueError(f"generation_id={row.get(schema.GENERATION_ID)!r}: field {schema.OUTPUT_TOKENS!r} is empty")
    prompt = prompt_ids(llm.tokenizer, row[schema.PROMPT], options.prompt_style, brief=options.brief)
    arrays, logits, error = forward_internals(llm.model, prompt, tokens, options, basis=basis)
    ids, probs = row.get(schema.LOGITS_TOKEN_IDS), row.get(schema.LOGITS_VALUES)
    if ids is None or probs is None:
        return arrays, float("nan"), error
    if len(ids) != len(tokens):
        raise ValueError(f"generation_id={row.get(schema.GENERATION_ID)!r}: {len(ids)} stored probability rows for "
                         f"{len(tokens)} output tokens")
    return arrays, stored_probability_difference(logits, ids, probs, options.temperature), error


def _ensure_basis(pack: Path, identity: dict[str, Any], llm: Any, options: InternalsOptions,
                  fit_rows: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    """The pack's PCA basis: the stored one, or (first run) fitted on ``fit_rows`` (the source's first
    ``pca_fit_rows`` rows), stored content-addressed and named in the manifest, under the pack's lock so that
    concurrent ``--shard`` runs share one basis."""
    import dataclasses

    from builder._locks import atomic_write_text, locked

    with locked(pack / MANIFEST):
        manifest = read_manifest(pack)
        if manifest and manifest.get("pca_basis"):
            return read_basis(pack / BASIS / manifest["pca_basis"])
        _, k = parse_compression(options.hidden_compression)
        plain = dataclasses.replace(options, hidden_compression="none", hidden_dtype="float32", attention_window=0,
                                    attention_to_self=False)
        vectors = []
        for row in fit_rows:
            try:
                arrays, _, _ = row_internals(llm, row, plain)
            except Exception:  # a row that cannot be re-forwarded is recorded as failed by the run
                continue
            vectors.append(arrays["hidden"])
        if not vectors:
            raise BuilderError(f"pca:{k}: none of the first {len(fit_rows)} source rows could be re-forwarded to fit "
                               "the basis")
        fitted = np.concatenate(vectors)
        try:
            name = write_basis(pack, fit_pca(fitted, k))
        except ValueError as error:
            raise BuilderError(str(error)) from None
        manifest = manifest or new_manifest(identity)
        manifest.update({"pca_basis": name, "pca_fit_tokens": int(fitted.shape[0])})
        atomic_write_text(pack / MANIFEST, json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    print(f"internals: pca:{k} basis fitted on {fitted.shape[0]} token vectors of the first {len(vectors)} rows "
          f"({BASIS}/{name})")
    return read_basis(pack / BASIS / name)


def _source_rows(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The source's rows (of ``--generation-config`` only, when given), after checking the numeric options; sets
    the default temperature (the MUCH config's, else 1.0)."""
    if args.temperature is None:
        known = schema.MUCH_CONFIGS.get(args.generation_config or "")
        args.temperature = float(known[1]) if known else 1.0
    if args.temperature <= 0:
        raise BuilderError(f"--temperature must be > 0, got {args.temperature}")
    if args.rows_per_shard < 1 or args.attention_window < 0 or args.pca_fit_rows < 1:
        raise BuilderError("--rows-per-shard and --pca-fit-rows must be >= 1 and --attention-window >= 0")
    every_row = list(read_rows(Path(args.source)))
    if args.generation_config:
        every_row = [r for r in every_row if r.get(schema.GENERATION_CONFIG) == args.generation_config]
        if not every_row:
            raise BuilderError(f"{args.source}: no row has {schema.GENERATION_CONFIG}={args.generation_config!r}")
    return every_row


def _compute_chunk(llm: Any, chunk: list[dict[str, Any]], options: InternalsOptions,
                   basis: dict[str, np.ndarray] | None) -> tuple[dict[str, np.ndarray], dict[str, dict[str, Any]],
                                                                 dict[str, str], list[np.ndarray]]:
    """One shard's arrays, manifest entries, failures (per row: the run goes on) and hidden errors."""
    arrays: dict[str, np.ndarray] = {}
    entries: dict[str, dict[str, Any]] = {}
    failures: dict[str, str] = {}
    errors = []
    for row in chunk:
        gid = str(row[schema.GENERATION_ID])
        try:
            values, diff, error = row_internals(llm, row, options, basis=basis)
        except Exception as problem:  # noqa: BLE001 - recorded per row, the run goes on
            failures[gid] = f"{type(problem).__name__}: {problem}"
            continue
        arrays.update({f"{gid}/{name}": value for name, value in values.items()})
        entries[gid] = {"n_tokens": int(values["hidden"].shape[0]), "max_abs_diff": diff,
                        "hidden_error_mean": float(error.mean()), "hidden_error_max": float(error.max())}
        errors.append(error.ravel())
    return arrays, entries, failures, errors


def run(args: argparse.Namespace) -> int:
    from builder._llm import load_model

    pack = Path(args.out)
    source = Path(args.source)
    every_row = _source_rows(args)
    rows = list(Shard.parse(args.shard).select(every_row))[: args.limit]
    manifest = read_manifest(pack)
    done = set(manifest["rows"]) if manifest else set()
    todo = [r for r in rows if r[schema.GENERATION_ID] not in done]
    print(f"internals: {len(rows) - len(todo)} done, {len(todo)} to go")
    if not todo:
        return 0
    llm = load_model(args.model, device=args.device, dtype=args.dtype)
    use_eager_attention(llm.model)
    options = InternalsOptions(hidden_layers=parse_layers(args.hidden_layers, llm.model.config.num_hidden_layers),
                               temperature=args.temperature, generation_config=args.generation_config,
                               prompt_style=args.prompt_style,
                               brief=not args.no_brief, hidden_dtype=args.hidden_dtype,
                               attention_window=args.attention_window, hidden_compression=args.hidden_compression,
                               pca_fit_rows=args.pca_fit_rows, attention_to_self=args.attention_to_self)
    identity = pack_identity(args.model, weights_sha256(args.model, llm.model), llm.model.config, options,
                         file_sha256(source))
    pack.mkdir(parents=True, exist_ok=True)
    check_identity(pack, identity)
    basis = None
    if options.hidden_compression.startswith("pca"):
        basis = _ensure_basis(pack, identity, llm, options, every_row[: options.pca_fit_rows])
    failed, worst, start, all_errors = 0, 0.0, time.perf_counter(), []
    for begin in range(0, len(todo), args.rows_per_shard):
        arrays, entries, failures, errors = _compute_chunk(llm, todo[begin : begin + args.rows_per_shard], options,
                                                           basis)
        diffs = [entry["max_abs_diff"] for entry in entries.values() if not np.isnan(entry["max_abs_diff"])]
        stored = write_shard(pack, arrays) if arrays else None
        for entry in entries.values():
            entry["shard"] = stored[0] if stored else None
        manifest = commit_rows(pack, identity, stored, entries, failures)
        worst = max([worst, *diffs])
        failed += len(failures)
        all_errors += errors
    seconds = time.perf_counter() - start
    print(f"internals: {len(todo) - failed} rows stored in {seconds:.1f}s, {failed} failed; largest difference "
          f"with the stored probabilities: {worst:.3g} (pack: {manifest['max_abs_diff']:.3g}, "
          f"{manifest['n_rows']} rows, {manifest['n_tokens']} tokens)")
    if all_errors:
        flat = np.concatenate(all_errors)
        total = manifest.get("hidden_error", {})
        print(f"internals: hidden reconstruction error ({options.hidden_compression}; relative L2 per token vector "
              f"against float32): mean {flat.mean():.3g}, max {flat.max():.3g} over {flat.size} vectors "
              f"(pack: mean {total.get('mean', float('nan')):.3g}, max {total.get('max', float('nan')):.3g})")
    return 1 if failed else 0


def use_eager_attention(model: Any) -> None:
    """Switch a loaded model to eager attention (SDPA/flash kernels return no weights)."""
    setter = getattr(model, "set_attn_implementation", None)
    if callable(setter):
        setter("eager")
    else:  # older transformers
        model.config._attn_implementation = "eager"
