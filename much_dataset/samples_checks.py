"""What a samples pack's shards and values must be: the samples layout of the one pack check
(:func:`much_dataset.packs.pack_damage`) and the rules every sample value meets where it enters (:func:`load_samples
<much_dataset.samples.load_samples>`, ``builder replay --source PACK``, a resumed ``builder samples``).

The shards (:func:`samples_pack_damage`), beyond the sizes and content addresses every pack kind checks:

* the manifest lists each (generation_id, sample_index) once, with integer indices;
* a shard is a readable parquet file with the columns and Arrow types ``builder samples`` writes
  (:func:`arrow_schema`: ids int32, probabilities float32; a float64 column is refused, not converted), as many rows
  as the manifest's ``n_samples`` for it, no (generation_id, sample_index) twice, and every pair the manifest puts in
  it;
* the manifest's counts (:func:`count_problem`): ``n_samples`` the (generation_id, sample_index) pairs it lists, each
  held by its shard once the shards pass, and ``n_rows`` the generation_ids it lists;
* the identity a shard was written under (its parquet metadata ``much_samples``: weights, engine, generation config,
  prompt style, stored candidates, dtype, seed rule) is the manifest's, and the manifest's identity fields still
  hash to the ``identity_sha256`` written with it (:func:`identity_problem`): a manifest edited to claim another
  dtype over the same shards is refused. Packs written before these records carry none and are not compared.

The values (:func:`value_problems`), per sample: at least one output token; one candidate row per output token and one
probability per candidate id; probabilities finite, in [0, 1], sorted descending, summing to at most 1 (+1e-4); the
sampled token among its candidates; token ids in ``[0, vocab_size)`` (the manifest's ``vocab_size`` when it records
one, else ``>= 0``); at most ``stored_candidates + 1`` candidates when the pack keeps fewer than 24; the sampler and
the seed rule of the manifest (``sampling.seed`` = config seed + 1 + ``sample_index``); the manifest's generation
config; with the pack's tokenizer (:func:`check_sample_texts <much_dataset.samples.check_sample_texts>`, ``much
run --samples``, a resumed ``builder samples``), the ``output`` text equal to ``output_tokens`` decoded
(:mod:`much_dataset.decoded_text`, the rule of ``builder verify``). Each defect names the pack, the shard, the
``generation_id``, the sample index, the column and the position.
"""

from __future__ import annotations

import json
import numbers
from collections.abc import Hashable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from much_dataset import schema
from much_dataset.decoded_text import Decoder, text_problems
from much_dataset.packs import PackError, PackLayout, ShardDamage, manifest_digest, pack_damage
from much_dataset.params import Interval

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

__all__ = ["IDENTITY_KEYS", "METADATA_KEY", "ROW_FIELDS", "arrow_schema", "samples_pack_damage", "value_problems",
           "row_field_problems", "identity_digest", "identity_problem", "count_problem"]

#: The manifest keys a shard records in its parquet metadata (under :data:`METADATA_KEY`) and must agree with.
IDENTITY_KEYS = ("weights_sha256", "engine", "generation_config", "prompt_style", "stored_candidates", "dtype",
                 "seed_rule")
METADATA_KEY = b"much_samples"
SHARD_SUFFIX = ".parquet"
_SAMPLER = ("temperature", "top_p", "top_k", "max_new_tokens")

#: What a manifest may list as a sample index.
SAMPLE_INDEX_VALUES = Interval(numbers.Integral, 0, None)

#: One defect of one sample: ``(row of the table, column, where in it and why)``.
ValueProblem = tuple[int, str, str]

#: A sample answers its row's question: these fields are the row's.
ROW_FIELDS = (schema.PROMPT, schema.WIKI_URL, schema.LANG)


def arrow_schema() -> pa.Schema:
    """The Arrow schema of a samples shard, as ``builder samples`` writes it."""
    import pyarrow as pa

    sampling = pa.struct([("temperature", pa.float64()), ("top_p", pa.float64()), ("top_k", pa.int64()),
                          ("max_new_tokens", pa.int64()), ("seed", pa.int64())])
    return pa.schema([
        (schema.GENERATION_ID, pa.string()), (schema.SAMPLE_INDEX, pa.int32()), (schema.OUTPUT, pa.string()),
        (schema.OUTPUT_TOKENS, pa.list_(pa.int32())), (schema.LOGITS_TOKEN_IDS, pa.list_(pa.list_(pa.int32()))),
        (schema.LOGITS_VALUES, pa.list_(pa.list_(pa.float32()))), (schema.FINISHED, pa.bool_()),
        (schema.SAMPLING, sampling), (schema.SAMPLE_ID, pa.string()), (schema.GENERATION_CONFIG, pa.string()),
        (schema.LANG, pa.string()), (schema.WIKI_URL, pa.string()), (schema.PROMPT, pa.string()),
        ("engine", pa.string()), ("engine_version", pa.string()),
    ])


def _assignment(manifest: Mapping[str, Any]) -> tuple[dict[str, list[tuple[str, int]]], list[ShardDamage]]:
    """shard -> the (generation_id, sample_index) pairs the manifest puts in it, and the manifest's own defects (an
    index that is not an integer, a pair listed twice: every shard listing it is damaged)."""
    by_shard: dict[str, list[tuple[str, int]]] = {}
    where: dict[tuple[str, int], list[str]] = {}
    bad: dict[str, str] = {}
    for gid, listing in manifest["rows"].items():
        if not isinstance(listing, Mapping):
            bad.setdefault("(none)", f"generation_id={gid!r} has no {{shard: [sample_index, ...]}} listing")
            continue
        for shard, indices in listing.items():
            for index in indices if isinstance(indices, list) else [indices]:
                if not SAMPLE_INDEX_VALUES.is_satisfied_by(index):
                    bad.setdefault(str(shard), f"generation_id={gid!r}: sample_index {index!r} in the manifest is "
                                               f"not {SAMPLE_INDEX_VALUES.description}")
                    continue
                by_shard.setdefault(str(shard), []).append((str(gid), index))
                where.setdefault((str(gid), index), []).append(str(shard))
    for (gid, index), shards in where.items():
        if len(shards) > 1:
            for shard in dict.fromkeys(shards):
                bad.setdefault(shard, f"the manifest lists generation_id={gid!r}, sample_index {index} "
                                      f"{len(shards)} times (shards {', '.join(s[:12] for s in shards)})")
    damage = [ShardDamage(shard, tuple(by_shard.get(shard, ())), reason) for shard, reason in bad.items()]
    for shard in bad:
        by_shard.pop(shard, None)
    return by_shard, damage


def _schema_problem(found: pa.Schema) -> str | None:
    for field in arrow_schema():
        if field.name not in found.names:
            return f"has no column {field.name!r} (a samples shard has {arrow_schema().names})"
        kind = found.field(field.name).type
        if kind != field.type:
            return (f"column {field.name!r} is {kind}, a samples shard stores {field.type} (as builder samples "
                    "writes it)")
    return None


def _identity_problem(metadata: Mapping[bytes, bytes] | None, manifest: Mapping[str, Any]) -> str | None:
    raw = (metadata or {}).get(METADATA_KEY)
    if raw is None:
        return None  # written before shards recorded their identity
    try:
        recorded = json.loads(raw)
    except ValueError:
        return f"its {METADATA_KEY.decode()} metadata is not JSON"
    for key in IDENTITY_KEYS:
        if key in recorded and recorded[key] != manifest.get(key):
            return (f"it was written with {key} {recorded[key]!r}, the manifest says {manifest.get(key)!r} (a "
                    "manifest edited over another pack's shards?)")
    return None


#: The manifest fields :func:`identity_digest` covers: how every sample of the pack was drawn.
DIGEST_KEYS = ("format", *IDENTITY_KEYS, "config", "sampler")


def identity_digest(manifest: Mapping[str, Any]) -> str:
    """sha256 of the manifest's identity fields (:data:`DIGEST_KEYS`), written as ``identity_sha256`` when the pack
    is created: a manifest whose identity was edited afterwards (another dtype claimed over the same shards) no
    longer hashes to it, whether or not its shards record their own identity."""
    import hashlib

    record = {key: manifest.get(key) for key in DIGEST_KEYS}
    return hashlib.sha256(json.dumps(record, sort_keys=True).encode("utf-8")).hexdigest()


def identity_problem(manifest: Mapping[str, Any]) -> str | None:
    """Why the manifest's identity fields are not the ones it was written with, or None (none recorded: a pack
    written before ``identity_sha256`` existed)."""
    recorded = manifest.get("identity_sha256")
    if recorded is None or recorded == identity_digest(manifest):
        return None
    fields = ", ".join(f"{key} {manifest.get(key)!r}" for key in ("dtype", "engine", "generation_config",
                                                                  "stored_candidates"))
    return (f"its identity ({fields}, ...) does not hash to its identity_sha256: the manifest was edited after the "
            "pack was written")


def count_problem(manifest: Mapping[str, Any]) -> str | None:
    """Why a count of the manifest (``n_samples``, ``n_rows``) is not what it lists, or None. Run after
    :func:`samples_pack_damage` found nothing: every listed pair is then held by its shard, so the pairs listed are
    the samples the shards hold for the pack (a shard may hold more, drawn twice by a resumed run: not listed, never
    read)."""
    by_shard, _ = _assignment(manifest)
    found = {"n_samples": sum(len(pairs) for pairs in by_shard.values()), "n_rows": len(manifest["rows"])}
    for field, value in found.items():
        stated = manifest.get(field)
        if isinstance(stated, bool) or stated != value:
            return (f"field {field!r} states {stated!r}, but the manifest lists {value} (held by its shards); a "
                    "manifest edited or written by another tool")
    return None


def samples_layout(manifest: Mapping[str, Any]) -> PackLayout:
    """The samples pack's :class:`~much_dataset.packs.PackLayout` (module docstring)."""
    import pyarrow.parquet as pq

    by_shard, damage = _assignment(manifest)
    listing = manifest.get("shards") if isinstance(manifest.get("shards"), Mapping) else {}

    def contents(path: Path, keys: Sequence[Hashable]) -> str | None:
        try:
            file = pq.ParquetFile(path)
            table = file.read(columns=[schema.GENERATION_ID, schema.SAMPLE_INDEX]) \
                if {schema.GENERATION_ID, schema.SAMPLE_INDEX} <= set(file.schema_arrow.names) else None
        except Exception as error:  # any unreadable shard is damage, named by the caller
            raise PackError(f"{path}: unreadable parquet shard ({type(error).__name__}: {error})") from None
        problem = _schema_problem(file.schema_arrow) or _identity_problem(file.schema_arrow.metadata, manifest)
        if problem is not None or table is None:
            return problem
        listed = (listing.get(path.name) or {}).get("n_samples")
        if listed is not None and int(listed) != table.num_rows:
            return f"holds {table.num_rows} samples, the manifest lists {listed}"
        held = list(zip(table.column(0).to_pylist(), table.column(1).to_pylist(), strict=True))
        if len(set(held)) < len(held):
            twice = next(pair for pair in held if held.count(pair) > 1)
            return f"stores generation_id={twice[0]!r}, sample_index {twice[1]} twice"
        missing = set(keys) - set(held)
        if missing:
            gid, index = min(missing)
            return f"does not hold generation_id={gid!r}, sample_index {index}, which the manifest lists in it"
        return None

    return PackLayout(by_shard, contents, tuple(damage), suffix=SHARD_SUFFIX, manifest_key=manifest_digest(manifest))


def samples_pack_damage(folder: str | Path, manifest: Mapping[str, Any], *, hashes: bool = True) -> list[ShardDamage]:
    """The shards of a samples pack that do not match its manifest (module docstring); empty: the pack is what its
    manifest says. ``ShardDamage.rows`` holds the (generation_id, sample_index) pairs listed in each."""
    return pack_damage(folder, manifest, layout=samples_layout(manifest), hashes=hashes)


def _flat(column: Any) -> tuple[np.ndarray, np.ndarray]:
    """A list<int> column's per-row lengths and flat int64 values."""
    from much_dataset._arrow import flat_numpy, list_array, list_lengths

    array = list_array(column)
    return list_lengths(array), flat_numpy(array.flatten(), np.int64)


def _nested(column: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A list<list<int>> column's tokens per row, candidates per token (flattened over rows) and flat values."""
    from much_dataset._arrow import flat_numpy, list_array, list_lengths

    outer = list_array(column)
    inner = outer.flatten()
    return list_lengths(outer), list_lengths(inner), flat_numpy(inner.flatten(), np.int64)


def _first_per_row(bad: np.ndarray, lengths: np.ndarray) -> dict[int, int]:
    """``{row: position of its first bad item}`` for flat items flagged ``bad`` (row ``r`` owns ``lengths[r]``)."""
    hits = np.flatnonzero(bad)
    if not len(hits):
        return {}
    ends = np.cumsum(lengths)
    owner = np.searchsorted(ends, hits, side="right")
    rows, first = np.unique(owner, return_index=True)
    return {int(r): int(hits[f] - (ends[r] - lengths[r])) for r, f in zip(rows, first, strict=True)}


def _id_problems(table: pa.Table, vocab_size: int | None) -> list[ValueProblem]:
    bound = f"[0, {vocab_size})" if vocab_size else ">= 0"

    def outside(ids: np.ndarray) -> np.ndarray:
        return (ids < 0) | (ids >= vocab_size) if vocab_size else ids < 0

    lengths, tokens = _flat(table[schema.OUTPUT_TOKENS])
    starts = np.cumsum(lengths) - lengths
    problems = [(row, schema.OUTPUT_TOKENS, f"token {t}: token id {int(tokens[starts[row] + t])} is not in {bound} "
                 "(the model's vocabulary)") for row, t in _first_per_row(outside(tokens), lengths).items()]
    per_row, per_token, ids = _nested(table[schema.LOGITS_TOKEN_IDS])
    bad = outside(ids)
    if bad.any():
        token_of_id = np.repeat(np.arange(len(per_token)), per_token)
        bad_token = np.bincount(token_of_id[bad], minlength=len(per_token)) > 0
        problems += [(row, schema.LOGITS_TOKEN_IDS, f"token {t}: a candidate id is not in {bound} (the model's "
                      "vocabulary)") for row, t in _first_per_row(bad_token, per_row).items()]
    return problems


def _count_problems(table: pa.Table, stored_candidates: int, max_new_tokens: int | None) -> list[ValueProblem]:
    lengths, _ = _flat(table[schema.OUTPUT_TOKENS])
    problems = [(int(row), schema.OUTPUT_TOKENS, "position 0: no output tokens (an empty sample)")
                for row in np.flatnonzero(lengths == 0)]
    if max_new_tokens is not None:
        problems += [(int(row), schema.OUTPUT_TOKENS, f"position {max_new_tokens}: {lengths[row]} output tokens, "
                      f"more than the sampler's max_new_tokens {max_new_tokens}")
                     for row in np.flatnonzero(lengths > int(max_new_tokens))]
    if stored_candidates < schema.TOP_K:
        per_row, per_token, _ = _nested(table[schema.LOGITS_TOKEN_IDS])
        problems += [(row, schema.LOGITS_TOKEN_IDS, f"token {t}: more than {stored_candidates} + 1 candidates (the "
                      "pack's stored_candidates, plus the sampled token)")
                     for row, t in _first_per_row(per_token > stored_candidates + 1, per_row).items()]
    return problems


def _sampler_problems(table: pa.Table, manifest: Mapping[str, Any]) -> list[ValueProblem]:
    """The seed rule, the manifest's sampler and generation config, whole columns at a time."""
    import pyarrow.compute as pc

    from much_dataset._arrow import list_array

    config = manifest.get("config") if isinstance(manifest.get("config"), Mapping) else {}
    sampling = list_array(table[schema.SAMPLING])
    index = table[schema.SAMPLE_INDEX].to_numpy().astype(np.int64)
    problems: list[ValueProblem] = []
    if "seed" in config:
        seed = pc.struct_field(sampling, "seed").fill_null(-1).to_numpy(zero_copy_only=False)
        want = int(config["seed"]) + 1 + index
        problems += [(int(row), schema.SAMPLING, f"field 'seed': {int(seed[row])} breaks the seed rule "
                      f"{manifest.get('seed_rule', 'seed + 1 + sample_index')} (config seed {config['seed']}: "
                      f"{int(want[row])})") for row in np.flatnonzero(seed != want)]
    for key in (k for k in _SAMPLER if config.get(k) is not None):
        drawn = pc.struct_field(sampling, key).to_numpy(zero_copy_only=False)
        problems += [(int(row), schema.SAMPLING, f"field {key!r}: {drawn[row]!r}, the manifest's sampler has "
                      f"{config[key]!r}") for row in np.flatnonzero(drawn != config[key])]
    if manifest.get("generation_config") is not None:
        wrong = pc.not_equal(table[schema.GENERATION_CONFIG], manifest["generation_config"])
        wrong = wrong.fill_null(True).to_numpy(zero_copy_only=False)
        problems += [(int(row), schema.GENERATION_CONFIG, f"{table[schema.GENERATION_CONFIG][int(row)].as_py()!r}, "
                      f"the pack's generation config is {manifest['generation_config']!r}")
                     for row in np.flatnonzero(wrong)]
    return problems


def value_problems(table: pa.Table, manifest: Mapping[str, Any], *,
                   decode: Decoder | None = None) -> list[ValueProblem]:
    """Every defect of the samples in ``table`` (rows of a samples shard; module docstring for the rules), in row
    order: ``(row, column, position and reason)``. A row's first defect is enough to refuse it. With ``decode`` (the
    pack's tokenizer, :func:`much_dataset.decoded_text.text_decoder`), each sample's ``output`` must also be its
    ``output_tokens`` decoded (:mod:`much_dataset.decoded_text`; rows with another defect are not decoded)."""
    from much_dataset.validation import token_problems

    stored = int(manifest.get("stored_candidates") or schema.TOP_K)
    config = manifest.get("config") if isinstance(manifest.get("config"), Mapping) else {}
    vocab = manifest.get("vocab_size")
    vocab_size = int(vocab) if isinstance(vocab, int) and not isinstance(vocab, bool) and vocab > 0 else None
    problems = _count_problems(table, stored, config.get("max_new_tokens"))
    problems += _id_problems(table, vocab_size)
    problems += token_problems(table, top_k=None)
    problems += _sampler_problems(table, manifest)
    if decode is not None:
        problems += _text_problems(table, decode, {row for row, _, _ in problems})
    return sorted(problems, key=lambda problem: problem[0])


def _text_problems(table: pa.Table, decode: Decoder, skipped: set[int]) -> list[ValueProblem]:
    """The samples (rows not in ``skipped``: an id outside the vocabulary may not decode) whose text is not their
    tokens decoded, all decoded in one call."""
    rows = [row for row in range(table.num_rows) if row not in skipped]
    if not rows:
        return []
    picked = table.select([schema.OUTPUT, schema.OUTPUT_TOKENS]).take(rows)
    found = text_problems(picked[schema.OUTPUT].to_pylist(), picked[schema.OUTPUT_TOKENS].to_pylist(), decode)
    return [(rows[i], schema.OUTPUT, reason) for i, reason in found]


def row_field_problems(table: pa.Table, rows: Mapping[str, Mapping[str, Any]]) -> list[ValueProblem]:
    """The samples in ``table`` whose :data:`ROW_FIELDS` are not their row's (``rows``: ``generation_id -> row``;
    the samples of a row not in ``rows``, and a field its row lacks, are not compared), in row order: the samples
    of another question stored under this row's generation_id. The one rule of the readers (``load_samples(dataset=)``)
    and of a resumed ``builder samples`` (its answers)."""
    gids = table[schema.GENERATION_ID].to_pylist()
    problems = []
    for field in ROW_FIELDS:
        for row, (gid, value) in enumerate(zip(gids, table[field].to_pylist(), strict=True)):
            own = rows.get(gid)
            if own is not None and field in own and value != own[field]:
                problems.append((row, field, f"{str(value)[:60]!r} is not the row's {str(own[field])[:60]!r} (the "
                                             "samples of another question under this generation_id)"))
    return sorted(problems, key=lambda problem: problem[0])
