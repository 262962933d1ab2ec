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
A rerun first checks the pack as its readers do (:func:`builder.samples_store.repair_samples_pack`): the samples of a
truncated, missing, edited, duplicated or value-damaged shard are taken out of the manifest, said, and drawn again;
with the model's tokenizer known offline (``--model`` a local file or folder, SmolLM2, a MUCH model's packaged
tokenizer, the local hub cache) a sample whose text is not its decoded tokens is damage too (else a note says the
texts were not compared).

``--executor ray`` computes the rows in Ray Data actors (``--ray-address``; default: a cluster started for the run),
each holding the engine, and stores them here through the same checks: it changes where rows are computed, never
what they are. ``--stored-candidates K`` (< 24) keeps K candidates per position (plus the sampled token when it ranked
lower) after the full 24 were checked: smaller packs that lose the probabilities of ranks K+1..24.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

from builder.configs import GenerationConfig
from builder.errors import BuilderError
from builder.generation import (
    EngineOptions,
    ExecutorOptions,
    add_executor_arguments,
    make_executed_engine,
    settings_for,
)
from builder.generation.dtype import run_dtype
from builder.samples_store import (
    PackWriter,
    check_identity,
    done_pairs,
    repair_samples_pack,
    samples_identity,
    trim_candidates,
)
from builder.store import Shard
from much_dataset import schema
from much_dataset.decoded_text import Decoder
from much_dataset.samples import MANIFEST, sample_seed

__all__ = ["add_arguments", "run", "run_samples", "SamplesOptions", "SampleItem", "read_source", "resolve_config",
           "sample_items"]
_ROW_FIELDS = (schema.GENERATION_ID, schema.GENERATION_CONFIG, schema.LANG, schema.WIKI_URL, schema.PROMPT)


READS = ("source", "model")
WRITES = ("manifest.json", "shards/*")


#: Answers whose N samples ``hf`` draws in one batch by default: the fastest exact path measured on a 2-core CPU
#: (``benchmarks/bench_samples.py``: 5.3x the usable samples per hour of batch 1, each sample what batch 1 draws).
HF_ANSWERS_PER_BATCH = 8


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
                        help=f"samples per engine call (default: hf {HF_ANSWERS_PER_BATCH} n, the samples of "
                             f"{HF_ANSWERS_PER_BATCH} answers; vllm 16 n)")
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
            files = [f for f in sorted(path.rglob("*.parquet")) if not _pack_shard(f)]
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


def _pack_shard(file: Path) -> bool:
    """Whether ``file`` is a shard of a samples pack kept inside the source folder (the embedded sample's): not an
    answer. A pack whose manifest is not JSON or not a samples pack's is refused naming it (its samples would
    otherwise be read as answers, each answer several times)."""
    from much_dataset.samples import SHARDS, read_samples_manifest

    if file.parent.name != SHARDS or not (file.parent.parent / MANIFEST).is_file():
        return False
    read_samples_manifest(file.parent.parent)
    return True


def _parquet_rows(file: Path) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    return pq.read_table(file, columns=[c for c in _ROW_FIELDS if c in pq.read_schema(file).names]).to_pylist()


@dataclasses.dataclass(frozen=True)
class SamplesOptions:
    """Everything ``builder samples`` is asked, typed and checked once (:meth:`from_args`: the step's one
    ``argparse.Namespace`` boundary; nothing past it reads or changes ``args``)."""

    source: str
    model: str
    out: Path
    n: int = 10
    model_name: str | None = None
    generation_config: str | None = None
    overrides: tuple[tuple[str, Any], ...] = ()  # --temperature/--seed/--top-p/--top-k/--max-new-tokens given
    brief: bool = True
    prompt_style: str = "much"
    engine: str = "hf"
    placement: ExecutorOptions = ExecutorOptions()
    batch_size: int | None = None
    share_prefill: bool = True
    rows_per_shard: int = 8
    stored_candidates: int = schema.TOP_K
    device: str | None = None
    dtype: str | None = None
    gpu_memory_utilization: float | None = None
    limit: int | None = None
    shard: str | None = None

    def __post_init__(self) -> None:
        for flag, value in (("--n", self.n), ("--rows-per-shard", self.rows_per_shard)):
            if value < 1:
                raise BuilderError(f"{flag} must be >= 1, got {value}")
        if self.batch_size is not None and self.batch_size < 1:
            raise BuilderError(f"--batch-size must be >= 1, got {self.batch_size}")
        if not 1 <= self.stored_candidates <= schema.TOP_K:
            raise BuilderError(f"--stored-candidates must be in 1..{schema.TOP_K}, got {self.stored_candidates}")

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> SamplesOptions:
        """The options of a parsed command line (numbers checked before anything is read)."""
        overrides = tuple((field, getattr(args, field)) for field in _OVERRIDES if getattr(args, field) is not None)
        return cls(source=args.source, model=args.model, out=Path(args.out), n=args.n, model_name=args.model_name,
                   generation_config=args.generation_config, overrides=overrides, brief=not args.no_brief,
                   prompt_style=args.prompt_style, engine=args.engine,
                   placement=ExecutorOptions.from_args(args),  # --ray-workers, --ray-gpus checked
                   batch_size=args.batch_size, share_prefill=not args.no_share_prefill,
                   rows_per_shard=args.rows_per_shard, stored_candidates=args.stored_candidates, device=args.device,
                   dtype=args.dtype, gpu_memory_utilization=args.gpu_memory_utilization, limit=args.limit,
                   shard=args.shard)

    def engine_options(self, n: int, dtype: str | None) -> EngineOptions:
        """What the engine is built with (``n``: samples per answer, the default batch)."""
        batch_size = self.batch_size or (HF_ANSWERS_PER_BATCH * n if self.engine == "hf" else 16 * n)
        return EngineOptions(model=self.model, device=self.device, dtype=dtype, batch_size=batch_size,
                             gpu_memory_utilization=self.gpu_memory_utilization, prompt_style=self.prompt_style,
                             share_prefill=self.share_prefill)


#: The sampler flags that override a field of the pack's generation config.
_OVERRIDES = ("temperature", "seed", "top_p", "top_k", "max_new_tokens")


def resolve_config(options: SamplesOptions, configs: dict[str, dict[str, Any]], chosen: str | None) -> GenerationConfig:
    """The pack's generation config: config ``chosen``'s record (``configs.jsonl``, else MUCH's), the flags
    overriding its fields; without one, the flags over generate's defaults."""
    base: dict[str, Any] = {}
    if chosen in configs:
        base = dict(configs[chosen])
    elif chosen in schema.MUCH_CONFIGS:
        model, temperature = schema.MUCH_CONFIGS[chosen]
        base = GenerationConfig(model_name=model, temperature=temperature).to_record()
    fields = {k: v for k, v in base.items() if k in GenerationConfig.__dataclass_fields__}
    fields.update(dict(options.overrides))
    if options.model_name is not None:
        fields["model_name"] = options.model_name
    fields.setdefault("model_name", options.model)
    if not options.brief:
        fields["brief"] = False
    try:
        return GenerationConfig(**fields)
    except (TypeError, ValueError) as error:
        raise BuilderError(f"generation config: {error}") from None


@dataclasses.dataclass(frozen=True)
class SampleItem:
    """One sample to draw: answer ``generation_id``, ``sample_index``, and the question it answers."""

    generation_id: str
    sample_index: int
    question: dict[str, Any]


def sample_items(answers: list[dict[str, Any]], config: GenerationConfig, n: int,
                 done: set[tuple[str, int]]) -> list[SampleItem]:
    """The samples not in ``done``, answer by answer, each with the question-like dict an engine takes (its
    ``seed``: :func:`~much_dataset.samples.sample_seed`; its ``question_id`` a label only, never parsed)."""
    items = []
    for answer in answers:
        gid = str(answer[schema.GENERATION_ID])
        for index in range(n):
            if (gid, index) not in done:
                question = {"question_id": f"{gid}#{index}", schema.LANG: answer[schema.LANG],
                            schema.WIKI_URL: answer[schema.WIKI_URL], schema.PROMPT: answer[schema.PROMPT],
                            "seed": sample_seed(config.seed, index)}
                items.append(SampleItem(gid, index, question))
    return items


class _SampleRows:
    """What run_engine appends to: turns a validated generate row into a sample row and hands it to the pack."""

    def __init__(self, writer: PackWriter, config: GenerationConfig, keep: int, items: list[SampleItem]) -> None:
        self.writer, self.config, self.keep = writer, config, keep
        self.items = {item.question["question_id"]: item for item in items}

    def append(self, row: dict[str, Any]) -> bool:
        item = self.items[row.pop("question_id")]
        sampling = {"temperature": self.config.temperature, "top_p": self.config.top_p, "top_k": self.config.top_k,
                    "max_new_tokens": self.config.max_new_tokens,
                    "seed": sample_seed(self.config.seed, item.sample_index)}
        sample = {**trim_candidates(row, self.keep), schema.SAMPLE_ID: row[schema.GENERATION_ID],
                  schema.GENERATION_ID: item.generation_id, schema.SAMPLE_INDEX: item.sample_index,
                  schema.SAMPLING: sampling}
        return self.writer.append(sample)

    def record_failure(self, key: str, reason: str) -> None:
        item = self.items[key.removeprefix(f"{self.config.id}/")]  # run_engine's key: "<config id>/<question_id>"
        self.writer.record_failure((item.generation_id, item.sample_index), reason)


def _source_digest(answers: list[dict[str, Any]]) -> str:
    text = json.dumps([[a[schema.GENERATION_ID], a[schema.PROMPT]] for a in answers], ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _select_answers(options: SamplesOptions, answers: list[dict[str, Any]],
                    configs: dict[str, dict[str, Any]]) -> tuple[list[dict[str, Any]], str | None]:
    """The answers of the pack's generation config, and that config's id (``--generation-config``, else the
    answers' own when they all have one known config)."""
    chosen = options.generation_config
    if chosen:
        answers = [a for a in answers if a[schema.GENERATION_CONFIG] == chosen]
        if not answers:
            raise BuilderError(f"{options.source}: no answer has {schema.GENERATION_CONFIG}={chosen!r}")
        return answers, chosen
    known = sorted({a[schema.GENERATION_CONFIG] for a in answers} & (set(configs) | set(schema.MUCH_CONFIGS)))
    present = {a[schema.GENERATION_CONFIG] for a in answers}
    if known and len(present) > 1:  # answers of several known models/temperatures: one pack per config
        raise BuilderError(f"{options.source} holds the answers of {len(present)} generation configs ({known[0]}, "
                           "...): pass --generation-config ID (one pack per generation config)")
    return answers, (known[0] if known else None)  # the answers' own config is the pack's


def _pack_decoder(pack: Path, models: list[str]) -> Decoder | None:
    """The batch decoder of the pack's model (``--model``, the config's model name) when an existing pack is resumed
    and its tokenizer is known without a hub call (:func:`much_metric.models.local_tokenizer`); else None, said."""
    from much_dataset.decoded_text import text_decoder
    from much_metric.models import local_tokenizer

    if not (pack / MANIFEST).is_file():
        return None
    tokenizer, said = local_tokenizer(models)
    if tokenizer is None:
        print(f"samples: note: the pack's texts are not compared with their decoded tokens ({said})")
        return None
    return text_decoder(tokenizer)


def _repair(pack: Path, decode: Decoder | None, answers: list[dict[str, Any]]) -> set[tuple[str, int]]:
    """The pairs the pack holds after taking out the samples of damaged shards (:func:`repair_samples_pack`; a
    sample of another question than its answer's is damage too), each damage said."""
    manifest, damage = repair_samples_pack(pack, decode=decode,
                                           rows={str(answer[schema.GENERATION_ID]): answer for answer in answers})
    for found in damage:
        print(f"samples: {pack} does not match its manifest: shard {found.shard}: {found.reason}; "
              f"{len(found.rows)} sample(s) to redraw")
    return done_pairs(manifest)


def run(args: argparse.Namespace) -> int:
    return run_samples(SamplesOptions.from_args(args))


def run_samples(options: SamplesOptions) -> int:
    """Draw the samples ``options`` asks for into the pack ``options.out`` (module docstring); 1 when a sample
    failed."""
    from builder.internals_store import weights_sha256

    pack = options.out
    answers, configs = read_source(options.source)
    answers, chosen = _select_answers(options, answers, configs)
    config = resolve_config(options, configs, chosen)
    if config.greedy:
        raise BuilderError("a greedy config draws the same answer every time: samples need a sampling config")
    if options.engine != "hf":
        settings_for(config)  # refuses a configuration that would change MUCH's probabilities, before any work
    answers = list(Shard.parse(options.shard).select(answers))[: options.limit]
    weights = weights_sha256(options.model)
    # generate's dtype rule (builder.generation.dtype): the values are computed in --dtype or the device's default,
    # never an engine's own "auto", and the pack's identity records it
    dtype = run_dtype(options.engine, options.dtype, options.device)
    identity = samples_identity(model=options.model, weights=weights, engine=options.engine,
                                config=config.to_record(), prompt_style=options.prompt_style,
                                stored_candidates=options.stored_candidates, dtype=dtype)
    check_identity(pack, identity)  # before the model is loaded
    decode = _pack_decoder(pack, [options.model, config.model_name])  # the texts' rule, where a tokenizer is known
    items = sample_items(answers, config, options.n, _repair(pack, decode, answers))
    print(f"samples: config {config.id} ({config.model_name}, T={config.temperature}, top_p {config.top_p}, top_k "
          f"{config.top_k}, max {config.max_new_tokens} tokens, engine {options.engine}, executor "
          f"{options.placement.executor}); {len(answers)} answers x {options.n}: "
          f"{len(answers) * options.n - len(items)} done, {len(items)} to go")
    if not items:
        return 0
    engine = make_executed_engine(options.engine, config, options.engine_options(options.n, dtype), options.placement)
    pack.mkdir(parents=True, exist_ok=True)
    check_identity(pack, identity)  # again: a concurrent --shard run may have created the pack meanwhile
    vocab_size = getattr(getattr(engine, "limits", None), "vocab_size", None)  # recorded beside the identity
    writer = PackWriter(pack, {**identity, **({"vocab_size": vocab_size} if vocab_size else {})},
                        flush_every=options.rows_per_shard * options.n, n=options.n, source=_source_digest(answers))
    from builder.generation.loop import run_with_progress

    try:
        counts, seconds = run_with_progress(engine, [item.question for item in items],
                                            _SampleRows(writer, config, options.stored_candidates, items),
                                            config_id=config.id, bar=(f"samples {config.id}", "sample"))
    finally:
        manifest = writer.close()
    stored = manifest or {"n_rows": 0, "n_samples": 0}
    print(f"samples: {counts.generated} drawn, {counts.failed} failed, {counts.tokens} tokens "
          f"({counts.tokens / seconds:.1f} tokens/s); pack: {stored['n_rows']} answers, {stored['n_samples']} samples")
    return 1 if counts.failed else 0
