"""The neighbour-statistics data job behind ``much neighbours``: sharded, resumable, reducible byte for byte.

The corpus is a list of sources (a hub dataset read through ``datasets``, local text files); each source is cut
into blocks of ``block_size`` documents, numbered in corpus order. A block is tokenised in one batched Rust call
(``tokenizers``' ``encode_batch``), counted with :func:`much_metric.baselines.neighbours.count_pairs`, clipped to the
``keep`` most frequent neighbours of each target (bounded memory and disk) and written atomically to
``<out>/blocks/``. Block ``b`` of source ``s`` belongs to shard ``(s + b) % n``; a shard skips the blocks it finds on
disk, so a killed run continues where it stopped. A block file is named by its position and a digest of its
documents' text (``s000-b0000003-<sha256 prefix>.npz``): a corpus file edited between runs in the same folder has
its changed blocks recounted (and the stale ones removed), never reused by name; shards that read different corpora
are refused at the reduce step. The reduce step sums the block files in block order: its result
depends only on the blocks, never on how they were spread over shards, so ``--shard i/n`` + reduce gives the same
bytes as one unsharded run.

The reference (``compute-replaceability``) counts each language exactly and sums them; clipping per block makes the
counts of rare neighbours approximate (a neighbour outside a block's top ``keep`` loses that block's count). With
``keep`` well above ``nu`` (default 64 vs nu <= 8) the top-8 lists are those of exact counting except for near ties.
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import chain, islice
from pathlib import Path
from typing import Any

import numpy as np

from much_dataset.jsonl import read_jsonl
from much_dataset.params import POSITIVE_INT, OneOf, check_param
from much_metric.baselines.neighbours import (
    POSITIONS,
    NeighbourStats,
    clip_top,
    count_pairs,
    merge_counts,
    stats_from_counts,
)

__all__ = [
    "CountOptions",
    "Source",
    "count_shard",
    "files_source",
    "hub_source",
    "parse_shard",
    "reduce_shards",
    "tokenizer_vocabulary",
    "encode_documents",
]


@dataclass(frozen=True)
class Source:
    """A named corpus part; ``documents()`` yields its texts in a fixed order (called once per run)."""

    label: str
    documents: Callable[[], Iterable[str]]


def hub_source(name: str, config: str | None, *, n_articles: int, seed: int = 42, streaming: bool = True,
               split: str = "train", text_field: str = "text") -> Source:
    """``wikimedia/wikipedia`` ``20231101.<lang>`` (or any dataset with a text field), shuffled, first N rows.

    ``streaming=False`` reproduces the reference's selection exactly (``Dataset.shuffle(seed=42)``, a full
    download); streaming shuffles with a buffer (``IterableDataset.shuffle(seed, buffer_size=10_000)``), another
    random sample of the same corpus, without downloading it whole. ``name`` may be a local dataset folder.
    """

    def documents() -> Iterator[str]:
        import datasets

        dataset = datasets.load_dataset(name, config, split=split, streaming=streaming)
        dataset = dataset.shuffle(seed=seed)
        rows = dataset.take(n_articles) if streaming else dataset.select(range(min(n_articles, len(dataset))))
        for index, row in enumerate(rows):
            text = row.get(text_field)
            if not isinstance(text, str):
                raise ValueError(f"{name} ({config}) row {index}: field {text_field!r} is not a string")
            yield text

    mode = "streaming, buffer-shuffled" if streaming else "shuffled"
    return Source(f"{name}:{config or 'default'} first {n_articles:,} rows ({mode}, seed {seed})", documents)


def files_source(paths: Sequence[str | Path], *, jsonl_fields: Sequence[str] = ()) -> Source:
    """Local text: ``.txt`` files give one document per non-empty line; ``.jsonl`` files one per listed field of
    every record (e.g. Mu-SHROOM's ``model_input`` and ``model_output_text``)."""
    paths = [Path(p) for p in paths]
    for path in paths:
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no such file")
        if path.suffix == ".jsonl" and not jsonl_fields:
            raise ValueError(f"{path}: name the text fields of the JSONL records (jsonl_fields)")

    def documents() -> Iterator[str]:
        for path in paths:
            if path.suffix != ".jsonl":
                with path.open(encoding="utf-8") as handle:
                    yield from (line.rstrip("\n") for line in handle if line.strip())
                continue
            for number, record in read_jsonl(path, objects=True):
                for name in jsonl_fields:
                    if not isinstance(record.get(name), str):
                        raise ValueError(f"{path}:{number}: field {name!r} is missing or not a string")
                    yield record[name]

    label = ", ".join(p.name for p in paths) + (f" (fields {', '.join(jsonl_fields)})" if jsonl_fields else "")
    return Source(label, documents)


def _backend(tokenizer: Any) -> Any:
    backend = getattr(tokenizer, "backend_tokenizer", None) or getattr(tokenizer, "_tokenizer", None)
    if backend is None and hasattr(tokenizer, "encode_batch"):
        backend = tokenizer
    if backend is None:
        raise TypeError(f"need a fast (Rust) tokenizer with encode_batch, got {type(tokenizer).__name__}")
    return backend


def tokenizer_vocabulary(tokenizer: Any) -> tuple[str, ...]:
    """The raw vocabulary string of every id (``Ġthe``), added tokens included; ids without one get ''."""
    vocab = _backend(tokenizer).get_vocab(with_added_tokens=True)
    size = max(vocab.values()) + 1 if vocab else 0
    strings = [""] * size
    for text, index in vocab.items():
        strings[index] = text
    return tuple(strings)


def encode_documents(tokenizer: Any, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """(concatenated ids, lengths) of ``texts``, special tokens added as ``tokenizer.encode``; one Rust batch."""
    backend = _backend(tokenizer)
    # encode_batch_fast (tokenizers >= 0.21) skips the character offsets, half the tokenisation time; same ids.
    encode = getattr(backend, "encode_batch_fast", backend.encode_batch)
    encodings = encode(list(texts), add_special_tokens=True)
    lengths = np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(encodings))
    ids = np.fromiter(chain.from_iterable(e.ids for e in encodings), dtype=np.int64, count=int(lengths.sum()))
    return ids, lengths


def parse_shard(text: str) -> tuple[int, int]:
    """``"i/n"`` -> (i, n) with 0 <= i < n."""
    try:
        index, total = (int(part) for part in str(text).split("/"))
    except ValueError:
        raise ValueError(f"shard must look like i/n (e.g. 0/4), got {text!r}") from None
    if not 0 <= index < total:
        raise ValueError(f"shard {text!r}: need 0 <= i < n")
    return index, total


def _write_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    from much_metric.fileio import atomic_write_bytes

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, array in arrays.items():
            member = io.BytesIO()
            np.lib.format.write_array(member, np.ascontiguousarray(array), allow_pickle=False)
            archive.writestr(zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0)), member.getvalue(),
                             compress_type=zipfile.ZIP_DEFLATED)
    atomic_write_bytes(path, buffer.getvalue())


def _block_digest(texts: Sequence[str]) -> str:
    """A digest of a block's documents (each length-prefixed, so document boundaries count)."""
    digest = hashlib.sha256()
    for text in texts:
        data = text.encode("utf-8", errors="surrogatepass")
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.hexdigest()[:16]


def _block_path(blocks_dir: Path, s: int, b: int, digest: str) -> Path:
    return blocks_dir / f"s{s:03d}-b{b:07d}-{digest}.npz"


def _remove_stale(blocks_dir: Path, s: int, shard: tuple[int, int], current: dict[int, Path]) -> None:
    """Delete the block files of source ``s`` that ``shard`` owns and that are not ``current`` (an older corpus's)."""
    index, total = shard
    if not blocks_dir.is_dir():
        return
    for path in blocks_dir.glob(f"s{s:03d}-b*.npz"):
        try:
            b = int(path.name[len(f"s{s:03d}-b"):].split("-")[0].split(".")[0])
        except ValueError:
            continue
        if (s + b) % total == index and current.get(b) != path:
            path.unlink(missing_ok=True)


def _read_json(path: Path) -> Any:
    """A job file's JSON; ValueError naming the file when it is not JSON (a truncated or edited manifest)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError as error:
        raise ValueError(f"{path}: not valid JSON ({error}); delete the job folder or use another") from None


def _manifest(out: Path, params: dict[str, Any]) -> None:
    path = out / "manifest.json"
    if path.exists():
        found = _read_json(path)
        if found != params:
            changed = sorted(k for k in set(found) | set(params) if found.get(k) != params.get(k))
            raise ValueError(f"{out} holds counts of another job (different {', '.join(changed)}); use another "
                             "folder or delete it")
        return
    from much_metric.fileio import atomic_write_bytes

    atomic_write_bytes(path, (json.dumps(params, indent=2, sort_keys=True) + "\n").encode("utf-8"))


@dataclass(frozen=True, kw_only=True)
class CountOptions:
    """How :func:`count_shard` counts: ``block_size`` documents per block file, the ``keep`` most frequent neighbours
    kept per token and block, and the neighbour ``position`` (0: the previous token, 1: the next; see
    :func:`much_metric.baselines.neighbours.count_pairs`). Part of the job's manifest: a folder counted with other
    options is refused."""

    block_size: int = 10_000
    keep: int = 64
    position: int = 0

    def __post_init__(self) -> None:
        check_param("block_size", self.block_size, POSITIVE_INT, owner="CountOptions")
        check_param("keep", self.keep, POSITIVE_INT, owner="CountOptions")
        check_param("position", self.position, OneOf(POSITIONS), owner="CountOptions")


def count_shard(
    sources: Sequence[Source],
    tokenizer: Any,
    out: str | Path,
    *,
    tokenizer_name: str,
    shard: tuple[int, int] = (0, 1),
    options: CountOptions | None = None,
    progress: bool = False,
) -> dict[str, Any]:
    """Count this shard's blocks into ``<out>/blocks`` (skipping those already there); returns its summary.

    ``options``: block size, neighbours kept, position (None: ``CountOptions()``). The summary (also written to
    ``<out>/shards/<i>-of-<n>.json`` when the shard is complete) gives the number of blocks of every source, which
    the reduce step checks.
    """
    from tqdm.auto import tqdm

    index, total = shard
    options = CountOptions() if options is None else options
    if not isinstance(options, CountOptions):
        raise TypeError(f"count_shard: options must be a CountOptions or None, got {type(options).__name__}")
    block_size, keep, position = options.block_size, options.keep, options.position
    out = Path(out)
    vocabulary = tokenizer_vocabulary(tokenizer)
    _manifest(out, {"tokenizer": tokenizer_name, "vocab_size": len(vocabulary), "sources": [s.label for s in sources],
                    "block_size": block_size, "keep": keep, "position": position})
    blocks_dir = out / "blocks"
    n_blocks, digests, done, skipped = {}, {}, 0, 0
    for s, source in enumerate(sources):
        documents = iter(source.documents())
        b = 0
        bar = tqdm(desc=source.label[:40], unit="block", disable=not progress)
        current: dict[int, Path] = {}
        while True:
            texts = list(islice(documents, block_size))
            if not texts:
                break
            digest = _block_digest(texts)
            digests.setdefault(source.label, []).append(digest)
            path = _block_path(blocks_dir, s, b, digest)
            if (s + b) % total == index:
                current[b] = path
                if path.exists():
                    skipped += 1
                else:
                    ids, lengths = encode_documents(tokenizer, texts)
                    keys, counts = count_pairs(ids, lengths, len(vocabulary), position=position)
                    keys, counts = clip_top(keys, counts, len(vocabulary), keep)
                    _write_npz(path, {"keys": keys, "counts": counts,
                                      "n": np.asarray([ids.size, len(texts)], dtype=np.int64)})
                    done += 1
                bar.update()
            b += 1
        bar.close()
        n_blocks[source.label] = b
        # This shard's blocks of an older corpus (changed content, or past the end of a shorter source).
        _remove_stale(blocks_dir, s, shard, current)
    summary = {"shard": f"{index}/{total}", "blocks": n_blocks, "counted": done, "skipped": skipped}
    from much_metric.fileio import atomic_write_bytes

    marker = {"n_shards": total, "blocks": n_blocks, "digests": digests}
    atomic_write_bytes(out / "shards" / f"{index}-of-{total}.json",
                       (json.dumps(marker, sort_keys=True) + "\n").encode("utf-8"))
    return summary


def reduce_shards(out: str | Path, tokenizer: Any, *, top: int = 8, corpus: str | None = None,
                  meta: dict[str, Any] | None = None) -> NeighbourStats:
    """Sum every block of a complete job (all shards finished) into :class:`NeighbourStats` (top ``top``)."""
    out = Path(out)
    manifest = _read_json(out / "manifest.json")
    markers = sorted((out / "shards").glob("*-of-*.json")) if (out / "shards").is_dir() else []
    if not markers:
        raise ValueError(f"{out}: no finished shard (run the count step first)")
    records = [_read_json(p) for p in markers]
    totals = {r["n_shards"] for r in records}
    if len(totals) != 1:
        raise ValueError(f"{out}: shards of different splits {sorted(totals)} (one job, one n)")
    total = totals.pop()
    found = {int(p.name.split("-of-")[0]) for p in markers if p.name.endswith(f"-of-{total}.json")}
    if missing := sorted(set(range(total)) - found):
        raise ValueError(f"{out}: shards {missing} of {total} have not finished")
    if any("digests" not in r for r in records):
        raise ValueError(f"{out}: shard markers of an older version without block digests: re-run every shard")
    if any(r["blocks"] != records[0]["blocks"] or r["digests"] != records[0]["digests"] for r in records):
        raise ValueError(f"{out}: shards read different documents (the corpus changed between shards?): re-run "
                         "every shard on the same corpus")
    vocab_size, keep = manifest["vocab_size"], manifest["keep"]
    if top > keep:
        raise ValueError(f"top={top} is more than the {keep} neighbours kept per block")
    keys, counts = np.zeros(0, np.int64), np.zeros(0, np.int64)
    n_tokens = n_documents = 0
    for s, label in enumerate(manifest["sources"]):
        for b, digest in enumerate(records[0]["digests"].get(label, [])):
            path = _block_path(out / "blocks", s, b, digest)
            if not path.exists():
                raise ValueError(f"{out}: block {path.name} is missing (re-run its shard)")
            block_keys, block_counts, block_n = _read_block(path)
            keys, counts = merge_counts([(keys, counts), (block_keys, block_counts)])
            n_tokens += block_n[0]
            n_documents += block_n[1]
            # Bounded memory: the running sum keeps 4 x keep neighbours per target (same order of blocks -> same
            # result however they were sharded).
            keys, counts = clip_top(keys, counts, vocab_size, 4 * keep)
    vocabulary = tokenizer_vocabulary(tokenizer)
    if len(vocabulary) != vocab_size:
        raise ValueError(f"the tokenizer has {len(vocabulary)} ids, the counts were made with {vocab_size}")
    return stats_from_counts(
        keys, counts, vocab_size, keep=top, vocabulary=vocabulary, position=manifest["position"],
        tokenizer=manifest["tokenizer"], corpus=corpus or "; ".join(manifest["sources"]), n_tokens=n_tokens,
        meta={"n_documents": n_documents, "block_size": manifest["block_size"], "block_keep": keep, **(meta or {})},
    )


def _read_block(path: Path) -> tuple[np.ndarray, np.ndarray, tuple[int, int]]:
    """The ``keys``, ``counts`` and ``(n_tokens, n_documents)`` of one block file; a file that is not a block (a
    truncated or overwritten file, another archive) is a ``ValueError`` naming it."""
    import zipfile

    def bad(reason: str) -> ValueError:
        return ValueError(f"{path}: not a readable block of neighbour counts ({reason}); delete it and re-run its "
                          "shard")

    try:
        with np.load(path, allow_pickle=False) as block:
            keys, counts, n = block["keys"], block["counts"], block["n"]
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as error:
        raise bad(f"{type(error).__name__}: {error}") from None
    if keys.ndim != 1 or counts.shape != keys.shape or n.shape != (2,) \
            or not all(np.issubdtype(a.dtype, np.integer) for a in (keys, counts, n)) \
            or (counts.size and counts.min() < 0) or (keys.size and keys.min() < 0) or n.min() < 0:
        raise bad(f"keys {keys.dtype}{keys.shape}, counts {counts.dtype}{counts.shape}, n {n.dtype}{n.shape}: "
                  "expected equal 1-d non-negative integer arrays and n of 2")
    return keys, counts, (int(n[0]), int(n[1]))
