"""samples: draw N further answers per stored answer with its generation config, into a samples pack.

``python -m builder samples --source ROWS --model MODEL --out PACK --n N [--generation-config ID]
[--engine hf|vllm] [--executor local|ray] [--prompt-style much|user] [--stored-candidates K] [--shard i/n]``

``ROWS`` is a builder folder (its ``generations.jsonl``; its ``configs.jsonl`` gives the config), an export or hub
folder (parquet shards), one ``.jsonl``/``.parquet`` file, ``sample`` (the embedded sample) or a hub id. For every
row, sample ``i`` (0..N-1) answers the row's ``prompt`` with the pack's generation config -- the row's own
(``--generation-config``: its record in ``configs.jsonl``, else MUCH's 8 configs; flags override a field) -- and
MUCH's sampler (top_p 0.9 / top_k 20 by default), seeded :func:`much_dataset.samples.sample_seed` (config seed + 1 +
i), through the same engines, record builder and row checks as ``generate``
(:func:`builder.generation.run_engine`): a row that breaks a rule is a failure, never stored.

One pack per generation config: ``PACK/manifest.json`` (model, weights hash, engine and versions, sampler, seed rule,
prompt style, N, source hashes, rows) and ``PACK/shards/<sha256>.parquet`` (:mod:`much_dataset.samples` reads
them). Resumable, idempotent and kill-safe like ``internals``: samples are flushed ``--rows-per-shard`` answers at a
time, a shard is complete before the manifest names it, a (generation_id, sample_index) already listed is never
drawn again, and ``--shard i/n`` processes can share one pack. ``--n`` can grow on a rerun (indices N.. are added).

``--executor ray`` computes the rows in Ray Data actors (``--ray-address``; default: a cluster started for the run),
each holding the engine, and stores them here through the same checks: it changes where rows are computed, never
what they are. ``--stored-candidates K`` (< 24) keeps K candidates per position (plus the sampled token when it ranked
lower) after the full 24 were checked: smaller packs that lose the probabilities of ranks K+1..24.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from pathlib import Path
from typing import Any

from builder.configs import GenerationConfig
from builder.errors import BuilderError
from builder.generation import (
    EngineOptions,
    EngineRun,
    ExecutorOptions,
    add_executor_arguments,
    close_engine,
    make_executed_engine,
    run_engine,
    settings_for,
)
from builder.generation.dtype import run_dtype
from builder.samples_store import (
    PackWriter,
    check_identity,
    done_pairs,
    read_manifest,
    samples_identity,
    trim_candidates,
)
from builder.store import Shard
from much_dataset import schema
from much_dataset.samples import sample_seed

__all__ = ["add_arguments", "run", "read_source", "resolve_config", "sample_items"]
_ROW_FIELDS = (schema.GENERATION_ID, schema.GENERATION_CONFIG, schema.LANG, schema.WIKI_URL, schema.PROMPT)


READS = ("source", "model")
WRITES = ("manifest.json", "shards/*")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from builder._llm import PROMPT_STYLES

    parser.add_argument("--source", required=True,
                        help="answers: a builder or export folder, a .jsonl/.parquet file, 'sample' or a hub id")
    parser.add_argument("--model", required=True, help="hub id, local folder or .gguf file of the config's model")
    parser.add_argument("--model-name", default=None, help="model_name of the config (default: the config's, else "
                                                           "--model)")
    parser.add_argument("--n", type=int, default=10, help="samples per answer (indices 0..n-1)")
    parser.add_argument("--generation-config", default=None,
                        help="only the answers of this config, sampled with it (one pack per generation config)")
    for flag, kind, what in (("--temperature", float, "T"), ("--seed", int, "seed"), ("--top-p", float, "top_p"),
                             ("--top-k", int, "top_k"), ("--max-new-tokens", int, "max_new_tokens")):
        parser.add_argument(flag, type=kind, default=None,
                            help=f"{what} (default: the generation config's, else generate's default)")
    parser.add_argument("--no-brief", action="store_true", help="drop the brevity sentence of the system prompt")
    parser.add_argument("--prompt-style", choices=PROMPT_STYLES, default="much",
                        help="much (generate's chat, default) or user (one user message: import-mushroom's observer)")
    parser.add_argument("--engine", choices=("hf", "vllm"), default="hf")
    add_executor_arguments(parser)
    parser.add_argument("--batch-size", type=int, default=None,
                        help="samples per engine call (default: hf n, one prefill per answer; vllm 16 n)")
    parser.add_argument("--no-share-prefill", action="store_true",
                        help="vllm: one request per sample instead of one request with n samples per answer")
    parser.add_argument("--rows-per-shard", type=int, default=8, help="answers whose samples make one shard")
    parser.add_argument("--stored-candidates", type=int, default=schema.TOP_K,
                        help="candidates kept per position, <= 24 (fewer: smaller packs; see the module docstring)")
    parser.add_argument("--device", default=None, help="hf: cuda / mps / cpu")
    parser.add_argument("--dtype", default=None, help="torch dtype name (default: bfloat16 on GPU, float32 on CPU)")
    parser.add_argument("--gpu-memory-utilization", type=float, default=None, help="vllm: memory fraction")
    parser.add_argument("--limit", type=int, default=None, help="only the first N answers (after sharding)")


def read_source(source: str) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """The answers of ``source`` (the fields a sample needs) and the config records found beside them."""
    from builder.replay import read_rows
    from builder.store import read_store

    path = Path(source)
    configs: dict[str, dict[str, Any]] = {}
    if path.is_dir():
        if (path / "configs.jsonl").is_file():
            configs = {r[schema.GENERATION_CONFIG]: r for r in read_store(path / "configs.jsonl")}
        if (path / "generations.jsonl").is_file():
            rows = list(read_rows(path / "generations.jsonl"))
        else:
            from much_dataset.samples import is_samples_pack

            # the shards of a samples pack kept inside the folder (the embedded sample's) are not answers
            files = [f for f in sorted(path.rglob("*.parquet")) if not is_samples_pack(f.parent.parent)]
            if not files:
                raise BuilderError(f"{path}: neither a builder folder (generations.jsonl) nor parquet shards")
            rows = [row for file in files for row in _parquet_rows(file)]
    elif path.is_file():
        rows = list(read_rows(path))
    else:
        import much_dataset

        loaded = much_dataset.load(source)
        rows = [row for split in sorted(loaded) for row in loaded[split].select_columns(list(_ROW_FIELDS))]
    answers = [{key: row.get(key) for key in (*_ROW_FIELDS, "question_id")} for row in rows]
    if not answers:
        raise BuilderError(f"{source}: no answers")
    return answers, configs


def _parquet_rows(file: Path) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    return pq.read_table(file, columns=[c for c in _ROW_FIELDS if c in pq.read_schema(file).names]).to_pylist()


def resolve_config(args: argparse.Namespace, configs: dict[str, dict[str, Any]]) -> GenerationConfig:
    """The pack's generation config: ``--generation-config``'s record (``configs.jsonl``, else MUCH's), the flags
    overriding its fields; without it, the flags over generate's defaults."""
    base: dict[str, Any] = {}
    chosen = args.generation_config
    if chosen in configs:
        base = dict(configs[chosen])
    elif chosen in schema.MUCH_CONFIGS:
        model, temperature = schema.MUCH_CONFIGS[chosen]
        base = GenerationConfig(model_name=model, temperature=temperature).to_record()
    flags = {"temperature": args.temperature, "seed": args.seed, "top_p": args.top_p, "top_k": args.top_k,
             "max_new_tokens": args.max_new_tokens, "model_name": args.model_name}
    fields = {k: v for k, v in base.items() if k in GenerationConfig.__dataclass_fields__}
    fields.update({k: v for k, v in flags.items() if v is not None})
    fields.setdefault("model_name", args.model)
    if args.no_brief:
        fields["brief"] = False
    try:
        return GenerationConfig(**fields)
    except (TypeError, ValueError) as error:
        raise BuilderError(f"generation config: {error}") from None


def sample_items(answers: list[dict[str, Any]], config: GenerationConfig, n: int,
                 done: set[tuple[str, int]]) -> list[dict[str, Any]]:
    """The work items (question-like dicts with their ``seed``) of the samples not in ``done``, answer by answer."""
    items = []
    for answer in answers:
        gid = str(answer[schema.GENERATION_ID])
        for index in range(n):
            if (gid, index) not in done:
                items.append({"question_id": f"{gid}#{index}", schema.LANG: answer[schema.LANG],
                              schema.WIKI_URL: answer[schema.WIKI_URL], schema.PROMPT: answer[schema.PROMPT],
                              "seed": sample_seed(config.seed, index)})
    return items


class _SampleRows:
    """What run_engine appends to: turns a validated generate row into a sample row and hands it to the pack."""

    def __init__(self, writer: PackWriter, config: GenerationConfig, keep: int) -> None:
        self.writer, self.config, self.keep = writer, config, keep

    def append(self, row: dict[str, Any]) -> bool:
        gid, index = str(row.pop("question_id")).rsplit("#", 1)
        sampling = {"temperature": self.config.temperature, "top_p": self.config.top_p, "top_k": self.config.top_k,
                    "max_new_tokens": self.config.max_new_tokens, "seed": sample_seed(self.config.seed, int(index))}
        sample = {**trim_candidates(row, self.keep), schema.SAMPLE_ID: row[schema.GENERATION_ID],
                  schema.GENERATION_ID: gid, schema.SAMPLE_INDEX: int(index), schema.SAMPLING: sampling}
        return self.writer.append(sample)

    def record_failure(self, key: str, reason: str) -> None:
        self.writer.record_failure(key, reason)


def _source_digest(answers: list[dict[str, Any]]) -> str:
    text = json.dumps([[a[schema.GENERATION_ID], a[schema.PROMPT]] for a in answers], ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _options(args: argparse.Namespace, batch_size: int, dtype: str | None) -> EngineOptions:
    return EngineOptions(model=args.model, device=args.device, dtype=dtype, batch_size=batch_size,
                         gpu_memory_utilization=args.gpu_memory_utilization, prompt_style=args.prompt_style,
                         share_prefill=not args.no_share_prefill)


def _check_numbers(args: argparse.Namespace) -> None:
    for name in ("n", "rows_per_shard"):
        if getattr(args, name) < 1:
            raise BuilderError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if args.batch_size is not None and args.batch_size < 1:
        raise BuilderError(f"--batch-size must be >= 1, got {args.batch_size}")
    if not 1 <= args.stored_candidates <= schema.TOP_K:
        raise BuilderError(f"--stored-candidates must be in 1..{schema.TOP_K}, got {args.stored_candidates}")


def run(args: argparse.Namespace) -> int:
    from builder.internals_store import weights_sha256

    _check_numbers(args)
    placement = ExecutorOptions.from_args(args)  # --ray-workers, --ray-gpus checked here
    pack = Path(args.out)
    answers, configs = read_source(args.source)
    if args.generation_config:
        answers = [a for a in answers if a[schema.GENERATION_CONFIG] == args.generation_config]
        if not answers:
            raise BuilderError(f"{args.source}: no answer has {schema.GENERATION_CONFIG}={args.generation_config!r}")
    else:
        known = sorted({a[schema.GENERATION_CONFIG] for a in answers} & (set(configs) | set(schema.MUCH_CONFIGS)))
        present = {a[schema.GENERATION_CONFIG] for a in answers}
        if known and len(present) > 1:  # answers of several known models/temperatures: one pack per config
            raise BuilderError(f"{args.source} holds the answers of {len(present)} generation configs ({known[0]}, "
                               "...): pass --generation-config ID (one pack per generation config)")
        if known:
            args.generation_config = known[0]  # the answers' own config is the pack's
    config = resolve_config(args, configs)
    if config.greedy:
        raise BuilderError("a greedy config draws the same answer every time: samples need a sampling config")
    if args.engine != "hf":
        settings_for(config)  # refuses a configuration that would change MUCH's probabilities, before any work
    answers = list(Shard.parse(args.shard).select(answers))[: args.limit]
    weights = weights_sha256(args.model)
    # generate's dtype rule (builder.generation.dtype): the values are computed in --dtype or the device's default,
    # never an engine's own "auto", and the pack's identity records it
    dtype = run_dtype(args.engine, args.dtype, args.device)
    identity = samples_identity(model=args.model, weights=weights, engine=args.engine, config=config.to_record(),
                             prompt_style=args.prompt_style, stored_candidates=args.stored_candidates, dtype=dtype)
    check_identity(pack, identity)  # before the model is loaded
    items = sample_items(answers, config, args.n, done_pairs(read_manifest(pack)))
    print(f"samples: config {config.id} ({config.model_name}, T={config.temperature}, top_p {config.top_p}, top_k "
          f"{config.top_k}, max {config.max_new_tokens} tokens, engine {args.engine}, executor {args.executor}); "
          f"{len(answers)} answers x {args.n}: {len(answers) * args.n - len(items)} done, {len(items)} to go")
    if not items:
        return 0
    batch_size = args.batch_size or (args.n if args.engine == "hf" else 16 * args.n)
    engine = make_executed_engine(args.engine, config, _options(args, batch_size, dtype),
                                  placement)
    pack.mkdir(parents=True, exist_ok=True)
    check_identity(pack, identity)  # again: a concurrent --shard run may have created the pack meanwhile
    writer = PackWriter(pack, identity, flush_every=args.rows_per_shard * args.n, n=args.n,
                        source=_source_digest(answers))
    from tqdm.auto import tqdm

    started = time.perf_counter()
    with tqdm(total=len(items), desc=f"samples {config.id}", unit="sample") as bar:
        def progress(counts: EngineRun) -> None:
            bar.update(1)
            bar.set_postfix(tok_s=f"{counts.tokens / (time.perf_counter() - started):.1f}")

        try:
            counts = run_engine(engine, items, _SampleRows(writer, config, args.stored_candidates),
                                config_id=config.id, progress=progress)
        finally:
            manifest = writer.close()
            close_engine(engine)
    seconds = time.perf_counter() - started
    rate = counts.tokens / seconds
    stored = manifest or {"n_rows": 0, "n_samples": 0}
    print(f"samples: {counts.generated} drawn, {counts.failed} failed, {counts.tokens} tokens ({rate:.1f} tokens/s); "
          f"pack: {stored['n_rows']} answers, {stored['n_samples']} samples")
    return 1 if counts.failed else 0

