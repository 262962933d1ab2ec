"""internals: re-forward stored rows with eager attention and write an internals pack (attention, hidden states).

``python -m builder internals --source ROWS --model MODEL --out PACK [--prompt-style much|user] [--temperature T]
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
import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from builder.errors import BuilderError
from builder.replay import PROMPT_STYLES, read_rows
from builder.store import Shard
from much_dataset import schema
from much_dataset._version import __version__
from much_dataset.internals import BASIS, FORMAT, MANIFEST, SHARDS, read_basis
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
    parser.add_argument("--temperature", type=float, default=1.0,
                        help="temperature of the re-derived probabilities compared with the stored ones")
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


def file_sha256(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def weights_sha256(model: str, loaded: Any = None) -> str:
    """sha256 of the weights: of the ``.gguf`` file itself (as ``sha256sum`` prints it), of a folder's weight files
    (name and hash of each, sorted by name), or, for a hub id resolved from the local cache, of its snapshot's weight
    files; else of the loaded tensors."""
    name = model
    path = Path(name)
    files: list[Path] = []
    if path.is_file():
        return file_sha256(path)
    else:
        folder = path if path.is_dir() else None
        if folder is None:
            try:
                from huggingface_hub import snapshot_download

                folder = Path(snapshot_download(name, local_files_only=True))
            except Exception:  # noqa: BLE001 - not in the cache: hash the loaded tensors instead
                folder = None
        if folder is not None:
            files = sorted(p for p in folder.iterdir() if p.suffix in (".safetensors", ".bin", ".gguf", ".pt"))
    digest = hashlib.sha256()
    if files:
        for file in files:
            digest.update(file.name.encode() + b"\0" + file_sha256(file).encode())
        return digest.hexdigest()
    if loaded is None:
        raise BuilderError(f"{model}: no weight files found to fingerprint")
    for key, tensor in sorted(loaded.state_dict().items()):
        digest.update(key.encode() + b"\0")
        digest.update(tensor.detach().float().cpu().numpy().tobytes())
    return digest.hexdigest()


#: Identity keys newer than the first packs, and the value a manifest without them stands for.
_IDENTITY_DEFAULTS = {"attention_to_self": False, "pca_fit_rows": None, "compression": "none"}


def _hidden_dtypes(options: InternalsOptions) -> dict[str, str]:
    kind, _ = parse_compression(options.hidden_compression)
    if kind == "int8":
        return {"hidden": "int8", "hidden_scale": "float16"}
    return {"hidden": "float32" if kind == "pca" else options.hidden_dtype}


def _identity(model: str, weights: str, config: Any, options: InternalsOptions, source: str) -> dict[str, Any]:
    kind, _ = parse_compression(options.hidden_compression)
    extra: dict[str, Any] = {}
    if kind == "pca":
        extra["pca_fit_rows"] = options.pca_fit_rows
    if options.attention_to_self:
        extra["attention_to_self"] = True
    return {**extra,
        "format": FORMAT,
        "model": model,
        "weights_sha256": weights,
        "n_layers": int(config.num_hidden_layers),
        "n_heads": int(config.num_attention_heads),
        "hidden_size": int(config.hidden_size),
        "hidden_layers": list(options.hidden_layers),
        "attention_window": options.attention_window,
        "dtypes": {"attention_to_previous": "float32", **_hidden_dtypes(options),
                   **({"attention_window": "float32"} if options.attention_window else {}),
                   **({"attention_to_self": "float32"} if options.attention_to_self else {})},
        "compression": options.hidden_compression,
        "temperature": options.temperature,
        "prompt_style": options.prompt_style,
        "brief": options.brief,
        "source_sha256": source,
    }


def _read_manifest(pack: Path) -> dict[str, Any] | None:
    path = pack / MANIFEST
    if not path.exists():
        return None
    return json.loads(path.read_text(encoding="utf-8"))


def _write_shard(pack: Path, arrays: dict[str, np.ndarray]) -> tuple[str, int]:
    from safetensors.numpy import save

    from builder._locks import atomic_write_bytes

    payload = save({key: np.ascontiguousarray(value) for key, value in arrays.items()})
    digest = hashlib.sha256(payload).hexdigest()
    name = f"{digest}.safetensors"
    (pack / SHARDS).mkdir(parents=True, exist_ok=True)
    target = pack / SHARDS / name
    if not target.exists():  # content-addressed: an existing file of this name holds these bytes
        atomic_write_bytes(target, payload)
    return name, len(payload)


def _write_basis(pack: Path, basis: dict[str, np.ndarray]) -> str:
    from safetensors.numpy import save

    from builder._locks import atomic_write_bytes

    payload = save({key: np.ascontiguousarray(value, dtype=np.float32) for key, value in basis.items()})
    name = f"{hashlib.sha256(payload).hexdigest()}.safetensors"
    target = pack / BASIS / name
    target.parent.mkdir(parents=True, exist_ok=True)
    if not target.exists():
        atomic_write_bytes(target, payload)
    return name


def _new_manifest(identity: dict[str, Any]) -> dict[str, Any]:
    return {**identity, "rows": {}, "shards": {}, "failures": {}, "max_abs_diff": 0.0}


def _ensure_basis(pack: Path, identity: dict[str, Any], llm: Any, options: InternalsOptions,
                  fit_rows: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    """The pack's PCA basis: the stored one, or (first run) fitted on ``fit_rows`` (the source's first
    ``pca_fit_rows`` rows), stored content-addressed and named in the manifest, under the pack's lock so that
    concurrent ``--shard`` runs share one basis."""
    import dataclasses

    from builder._locks import atomic_write_text, locked

    with locked(pack / MANIFEST):
        manifest = _read_manifest(pack)
        if manifest and manifest.get("pca_basis"):
            return read_basis(pack / BASIS / manifest["pca_basis"])
        _, k = parse_compression(options.hidden_compression)
        plain = dataclasses.replace(options, hidden_compression="none", hidden_dtype="float32", attention_window=0,
                                    attention_to_self=False)
        vectors = []
        for row in fit_rows:
            try:
                arrays, _, _ = row_internals(llm, row, plain)
            except Exception:  # noqa: BLE001 - a row that cannot be re-forwarded is recorded as failed later
                continue
            vectors.append(arrays["hidden"])
        if not vectors:
            raise BuilderError(f"pca:{k}: none of the first {len(fit_rows)} source rows could be re-forwarded to fit "
                               "the basis")
        fitted = np.concatenate(vectors)
        try:
            name = _write_basis(pack, fit_pca(fitted, k))
        except ValueError as error:
            raise BuilderError(str(error)) from None
        manifest = manifest or _new_manifest(identity)
        manifest.update({"pca_basis": name, "pca_fit_tokens": int(fitted.shape[0])})
        atomic_write_text(pack / MANIFEST, json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    print(f"internals: pca:{k} basis fitted on {fitted.shape[0]} token vectors of the first {len(vectors)} rows "
          f"({BASIS}/{name})")
    return read_basis(pack / BASIS / name)


def _merge_errors(manifest: dict[str, Any], new: dict[str, dict[str, Any]], n_hidden: int) -> None:
    """Fold the new rows' hidden reconstruction errors into the manifest's ``hidden_error`` {mean, max, n_vectors}."""
    total = manifest.get("hidden_error") or {"mean": 0.0, "max": 0.0, "n_vectors": 0}
    count, mean, worst = int(total["n_vectors"]), float(total["mean"]), float(total["max"])
    for entry in new.values():
        if "hidden_error_mean" not in entry:
            continue
        vectors = int(entry["n_tokens"]) * n_hidden
        mean = (mean * count + float(entry["hidden_error_mean"]) * vectors) / max(count + vectors, 1)
        count += vectors
        worst = max(worst, float(entry["hidden_error_max"]))
    if count:
        manifest["hidden_error"] = {"mean": mean, "max": worst, "n_vectors": count}


def _commit(pack: Path, identity: dict[str, Any], shard: str | None, size: int, rows: dict[str, dict[str, Any]],
            failures: dict[str, str], max_abs_diff: float) -> dict[str, Any]:
    """Add one shard's rows to the manifest (under the pack's lock, atomically): rows another process stored
    meanwhile are kept as they were (a row is never listed twice)."""
    from builder._locks import atomic_write_text, locked

    with locked(pack / MANIFEST):
        manifest = _read_manifest(pack) or _new_manifest(identity)
        new = {gid: entry for gid, entry in rows.items() if gid not in manifest["rows"]}
        if shard is not None and new:
            manifest["shards"][shard] = {"bytes": size, "sha256": shard.split(".")[0]}
            manifest["rows"].update(new)
            _merge_errors(manifest, new, len(manifest.get("hidden_layers") or ()))
        for gid in new:
            manifest["failures"].pop(gid, None)
        manifest["failures"].update({gid: error for gid, error in failures.items() if gid not in manifest["rows"]})
        if not np.isnan(max_abs_diff):
            manifest["max_abs_diff"] = max(float(manifest.get("max_abs_diff") or 0.0), max_abs_diff)
        manifest["n_rows"] = len(manifest["rows"])
        manifest["n_tokens"] = int(sum(entry["n_tokens"] for entry in manifest["rows"].values()))
        manifest["toolkit_version"] = __version__
        atomic_write_text(pack / MANIFEST, json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return manifest


def _check_identity(pack: Path, identity: dict[str, Any]) -> None:
    manifest = _read_manifest(pack)
    if manifest is None:
        return
    # the model's name may differ (another path to the same file): its weights hash decides; a key a pack of an
    # earlier version lacks stands for its default (its identity had it implicitly)
    keys = set(identity) | (set(manifest) & set(_IDENTITY_DEFAULTS))

    def value(source: dict[str, Any], key: str) -> Any:
        return source.get(key, _IDENTITY_DEFAULTS.get(key))

    differing = sorted(key for key in keys if key != "model" and value(manifest, key) != value(identity, key))
    if differing:
        details = "; ".join(f"{key}: pack has {value(manifest, key)!r}, asked {value(identity, key)!r}"
                            for key in differing)
        raise BuilderError(f"{pack / MANIFEST} was built differently ({details}); use another --out")


def run(args: argparse.Namespace) -> int:
    from builder._llm import load_model

    if args.temperature <= 0:
        raise BuilderError(f"--temperature must be > 0, got {args.temperature}")
    if args.rows_per_shard < 1 or args.attention_window < 0 or args.pca_fit_rows < 1:
        raise BuilderError("--rows-per-shard and --pca-fit-rows must be >= 1 and --attention-window >= 0")
    pack = Path(args.out)
    source = Path(args.source)
    every_row = list(read_rows(source))
    rows = list(Shard.parse(args.shard).select(every_row))[: args.limit]
    manifest = _read_manifest(pack)
    done = set(manifest["rows"]) if manifest else set()
    todo = [r for r in rows if r[schema.GENERATION_ID] not in done]
    print(f"internals: {len(rows) - len(todo)} done, {len(todo)} to go")
    if not todo:
        return 0
    llm = load_model(args.model, device=args.device, dtype=args.dtype)
    use_eager_attention(llm.model)
    options = InternalsOptions(hidden_layers=parse_layers(args.hidden_layers, llm.model.config.num_hidden_layers),
                               temperature=args.temperature, prompt_style=args.prompt_style,
                               brief=not args.no_brief, hidden_dtype=args.hidden_dtype,
                               attention_window=args.attention_window, hidden_compression=args.hidden_compression,
                               pca_fit_rows=args.pca_fit_rows, attention_to_self=args.attention_to_self)
    identity = _identity(args.model, weights_sha256(args.model, llm.model), llm.model.config, options,
                         file_sha256(source))
    pack.mkdir(parents=True, exist_ok=True)
    _check_identity(pack, identity)
    basis = None
    if options.hidden_compression.startswith("pca"):
        basis = _ensure_basis(pack, identity, llm, options, every_row[: options.pca_fit_rows])
    failed, worst, start = 0, 0.0, time.perf_counter()
    error_sum, error_max, n_vectors = 0.0, 0.0, 0
    for begin in range(0, len(todo), args.rows_per_shard):
        arrays: dict[str, np.ndarray] = {}
        entries: dict[str, dict[str, Any]] = {}
        failures: dict[str, str] = {}
        chunk_worst = float("nan")
        for row in todo[begin : begin + args.rows_per_shard]:
            gid = str(row[schema.GENERATION_ID])
            try:
                values, diff, error = row_internals(llm, row, options, basis=basis)
            except Exception as error:  # noqa: BLE001 - recorded per row, the run goes on
                failures[gid] = f"{type(error).__name__}: {error}"
                failed += 1
                continue
            arrays.update({f"{gid}/{name}": value for name, value in values.items()})
            entries[gid] = {"n_tokens": int(values["hidden"].shape[0]), "max_abs_diff": diff,
                            "hidden_error_mean": float(error.mean()), "hidden_error_max": float(error.max())}
            error_sum, error_max, n_vectors = error_sum + float(error.sum()), max(error_max, float(error.max())), \
                n_vectors + error.size
            chunk_worst = diff if np.isnan(chunk_worst) else max(chunk_worst, diff)
        shard, size = _write_shard(pack, arrays) if arrays else (None, 0)
        for entry in entries.values():
            entry["shard"] = shard
        manifest = _commit(pack, identity, shard, size, entries, failures, chunk_worst)
        worst = max(worst, 0.0 if np.isnan(chunk_worst) else chunk_worst)
    seconds = time.perf_counter() - start
    print(f"internals: {len(todo) - failed} rows stored in {seconds:.1f}s, {failed} failed; largest difference "
          f"with the stored probabilities: {worst:.3g} (pack: {manifest['max_abs_diff']:.3g}, "
          f"{manifest['n_rows']} rows, {manifest['n_tokens']} tokens)")
    if n_vectors:
        total = manifest.get("hidden_error", {})
        print(f"internals: hidden reconstruction error ({options.hidden_compression}; relative L2 per token vector "
              f"against float32): mean {error_sum / n_vectors:.3g}, max {error_max:.3g} over {n_vectors} vectors "
              f"(pack: mean {total.get('mean', float('nan')):.3g}, max {total.get('max', float('nan')):.3g})")
    return 1 if failed else 0


def use_eager_attention(model: Any) -> None:
    """Switch a loaded model to eager attention (SDPA/flash kernels return no weights)."""
    setter = getattr(model, "set_attn_implementation", None)
    if callable(setter):
        setter("eager")
    else:  # older transformers
        model.config._attn_implementation = "eager"
