"""Token-neighbour statistics, KTC's prerequisite (docs/reference-behaviour.md#signals, the reference's
``compute-replaceability``).

For every token id of a tokenizer, the ids that most often stand right before or after it in a corpus tokenised
with that tokenizer (special tokens added, as ``tokenizer.encode``); only interior positions are targets (the first
and last token of a document are counted as neighbours, never as targets), as the reference.

Counting is sparse and vectorised: the (target, neighbour) pairs of a whole batch of documents are encoded as one
int64 key ``target * V + neighbour`` and counted with ``numpy.unique``; no Python loop per token. Partial counts are
clipped to the top neighbours of each target (``clip_top``) so memory stays bounded on Wikipedia-sized corpora.

Ties are broken by the smaller neighbour id (the reference keeps the first neighbour met in the corpus, which depends
on the order of processing); the counts themselves are exact integers.

The statistics are a :class:`NeighbourStats`, stored as one small ``.npz`` per tokenizer (int32 ids, the raw
vocabulary strings for KTC's prefix rule, and where they come from), loaded with :func:`load_neighbours` from a file,
a folder or a hub dataset id.
"""

from __future__ import annotations

import functools
import io
import json
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "NEIGHBOURS_FILE",
    "POSITIONS",
    "NeighbourStats",
    "PerSampleNeighbours",
    "clip_top",
    "count_pairs",
    "load_neighbours",
    "merge_counts",
    "stats_from_counts",
]

#: File name of the statistics in a folder or a hub dataset repository.
NEIGHBOURS_FILE = "neighbours.npz"
#: 0: left and right neighbours (the reference's default); 1: right neighbour only (its ``_right`` files).
POSITIONS = (0, 1)
_FORMAT = "much-neighbours/1"


def count_pairs(ids: np.ndarray, lengths: np.ndarray, vocab_size: int, *, position: int = 0) -> tuple[np.ndarray,
                                                                                                      np.ndarray]:
    """Sparse neighbour counts of a batch of tokenised documents.

    Parameters
    ----------
    ids : ndarray of shape (N,), integer
        The documents' token ids, concatenated.
    lengths : ndarray of shape (n_documents,)
        Tokens per document (sum = N).
    vocab_size : int
        V; every id must be in [0, V).
    position : {0, 1}
        0 counts the left and right neighbours of every interior token, 1 the right one only.

    Returns
    -------
    keys, counts : ndarray of shape (n_pairs,), int64
        Sorted distinct keys ``target * V + neighbour`` and how often each pair occurs.
    """
    if position not in POSITIONS:
        raise ValueError(f"position must be one of {POSITIONS}, got {position!r}")
    ids = np.asarray(ids, dtype=np.int64)
    lengths = np.asarray(lengths, dtype=np.int64)
    if lengths.sum() != ids.size:
        raise ValueError(f"lengths sum to {lengths.sum()} but {ids.size} ids were given")
    if ids.size and (ids.min() < 0 or ids.max() >= vocab_size):
        raise ValueError(f"token ids must be in [0, {vocab_size}), got range [{ids.min()}, {ids.max()}]")
    ends = np.cumsum(lengths)
    interior = np.ones(ids.size, dtype=bool)
    interior[ends[lengths > 0] - 1] = False
    interior[(ends - lengths)[lengths > 0]] = False
    target = np.flatnonzero(interior)
    right = ids[target] * vocab_size + ids[target + 1]
    keys = np.concatenate([ids[target] * vocab_size + ids[target - 1], right]) if position == 0 else right
    return np.unique(keys, return_counts=True) if keys.size else (np.zeros(0, np.int64), np.zeros(0, np.int64))


def merge_counts(parts: Sequence[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Sum sparse counts ``(keys, counts)``; exact int64, result sorted by key."""
    parts = [p for p in parts if p[0].size]
    if not parts:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    keys = np.concatenate([p[0] for p in parts])
    counts = np.concatenate([p[1] for p in parts]).astype(np.int64)
    order = np.argsort(keys, kind="stable")
    keys, counts = keys[order], counts[order]
    starts = np.flatnonzero(np.concatenate([[True], keys[1:] != keys[:-1]]))
    return keys[starts], np.add.reduceat(counts, starts)


def _ranked(keys: np.ndarray, counts: np.ndarray, vocab_size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                                              np.ndarray]:
    """(target, neighbour, count, rank within target) with rank 0 = most frequent, ties by smaller neighbour id."""
    target, neighbour = np.divmod(keys, vocab_size)
    order = np.lexsort((neighbour, -counts, target))
    target, neighbour, counts = target[order], neighbour[order], counts[order]
    starts = np.flatnonzero(np.concatenate([[True], target[1:] != target[:-1]])) if target.size else np.zeros(0, int)
    group_start = np.repeat(starts, np.diff(np.concatenate([starts, [target.size]])))
    return target, neighbour, counts, np.arange(target.size) - group_start


def clip_top(keys: np.ndarray, counts: np.ndarray, vocab_size: int, keep: int) -> tuple[np.ndarray, np.ndarray]:
    """Keep the ``keep`` most frequent neighbours of every target (ties: smaller id first); result sorted by key."""
    target, neighbour, counts, rank = _ranked(keys, counts, vocab_size)
    mask = rank < keep
    kept = target[mask] * vocab_size + neighbour[mask]
    order = np.argsort(kept, kind="stable")
    return kept[order], counts[mask][order]


@dataclass(frozen=True)
class NeighbourStats:
    """The most frequent neighbours of every token id of one tokenizer.

    Attributes
    ----------
    neighbours : ndarray of shape (V, M), int32
        Row ``t``: the neighbour ids of token ``t`` by decreasing count (ties: smaller id), padded with -1.
    counts : ndarray of shape (V, M), int64
        Their counts (0 on padding).
    vocabulary : tuple of str or None
        Raw vocabulary string of every id (``Ġthe``, ``▁Par``), for KTC's prefix rule; None if unknown.
    position : int
        0 = left and right neighbours, 1 = right only.
    tokenizer : str
        Name of the tokenizer.
    corpus : str
        Where the counts come from (printed by ``much run``).
    n_tokens : int
        Tokens counted.
    """

    neighbours: np.ndarray
    counts: np.ndarray
    vocabulary: tuple[str, ...] | None = None
    position: int = 0
    tokenizer: str = ""
    corpus: str = ""
    n_tokens: int = 0
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.neighbours.ndim != 2 or self.counts.shape != self.neighbours.shape:
            raise ValueError(f"neighbours and counts must be (V, M) arrays of one shape, got {self.neighbours.shape}"
                             f" and {self.counts.shape}")
        if self.vocabulary is not None and len(self.vocabulary) != self.neighbours.shape[0]:
            raise ValueError(f"vocabulary has {len(self.vocabulary)} strings for {self.neighbours.shape[0]} ids")
        if self.position not in POSITIONS:
            raise ValueError(f"position must be one of {POSITIONS}, got {self.position!r}")

    @property
    def vocab_size(self) -> int:
        return int(self.neighbours.shape[0])

    @property
    def max_neighbours(self) -> int:
        return int(self.neighbours.shape[1])

    def top(self, nu: int) -> np.ndarray:
        """(V, nu) int32: the ``nu`` most frequent neighbours of every id, -1 padded."""
        if isinstance(nu, bool) or not isinstance(nu, int | np.integer) or not 1 <= nu <= self.max_neighbours:
            raise ValueError(f"nu must be an integer in [1, {self.max_neighbours}] (the neighbours kept in these "
                             f"statistics), got {nu!r}")
        return self.neighbours[:, :nu]

    @functools.cached_property
    def prefix_ranges(self) -> tuple[np.ndarray, np.ndarray]:
        """(rank, last): id ``b``'s raw string starts with id ``a``'s iff ``rank[a] <= rank[b] <= last[a]``.

        ``rank`` is the position in the sorted vocabulary; strings that start with ``s`` are a contiguous range of
        it. An empty string is given an empty range (it would otherwise be a prefix of everything).
        """
        if self.vocabulary is None:
            raise ValueError(f"these neighbour statistics ({self.tokenizer or 'unnamed tokenizer'}) carry no "
                             "vocabulary strings; KTC's prefix rule needs them (prefix_entail=False does not)")
        strings = np.asarray(self.vocabulary, dtype=object)
        order = np.argsort(strings, kind="stable")
        ordered = strings[order]
        rank = np.empty(len(strings), dtype=np.int64)
        rank[order] = np.arange(len(strings))
        upper = np.asarray([s + "\U0010ffff" for s in strings], dtype=object)
        last = np.searchsorted(ordered, upper, side="left") - 1
        last[np.asarray([s == "" for s in strings], dtype=bool)] = -1
        return rank, last

    def describe(self) -> str:
        return (f"{self.tokenizer or 'unnamed tokenizer'}: {self.corpus or 'unknown corpus'} ({self.n_tokens:,} "
                f"tokens, {'left+right' if self.position == 0 else 'right'} neighbours, top {self.max_neighbours})")

    def to_bytes(self) -> bytes:
        """A deterministic ``.npz`` (fixed zip timestamps: equal statistics give equal bytes)."""
        meta = {"format": _FORMAT, "position": self.position, "tokenizer": self.tokenizer, "corpus": self.corpus,
                "n_tokens": int(self.n_tokens), **self.meta}
        arrays = {"neighbours": self.neighbours.astype(np.int32), "counts": self.counts.astype(np.int64),
                  "meta": np.frombuffer(json.dumps(meta, sort_keys=True).encode("utf-8"), dtype=np.uint8)}
        if self.vocabulary is not None:
            encoded = [s.encode("utf-8", "surrogatepass") for s in self.vocabulary]
            arrays["vocabulary"] = np.frombuffer(b"".join(encoded), dtype=np.uint8)
            arrays["vocabulary_offsets"] = np.cumsum([0] + [len(e) for e in encoded]).astype(np.int64)
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            for name, array in arrays.items():
                info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_DEFLATED
                member = io.BytesIO()
                np.lib.format.write_array(member, np.ascontiguousarray(array), allow_pickle=False)
                archive.writestr(info, member.getvalue())
        return buffer.getvalue()

    def save(self, path: str | Path) -> Path:
        from much_metric.fileio import atomic_write_bytes

        path = Path(path)
        atomic_write_bytes(path, self.to_bytes())
        return path

    @classmethod
    def from_file(cls, path: str | Path) -> NeighbourStats:
        path = Path(path)
        try:
            with np.load(path, allow_pickle=False) as data:
                arrays = {name: data[name] for name in data.files}
        except (OSError, ValueError, zipfile.BadZipFile) as error:
            raise ValueError(f"{path}: not a neighbour statistics file ({error})") from None
        missing = {"neighbours", "counts", "meta"} - set(arrays)
        if missing:
            raise ValueError(f"{path}: not a neighbour statistics file (lacks {sorted(missing)})")
        meta = json.loads(arrays["meta"].tobytes().decode("utf-8"))
        if meta.get("format") != _FORMAT:
            raise ValueError(f"{path}: unknown neighbour statistics format {meta.get('format')!r}")
        vocabulary = None
        if "vocabulary" in arrays:
            blob, offsets = arrays["vocabulary"].tobytes(), arrays["vocabulary_offsets"]
            vocabulary = tuple(blob[offsets[i]:offsets[i + 1]].decode("utf-8", "surrogatepass")
                               for i in range(len(offsets) - 1))
        known = {"format", "position", "tokenizer", "corpus", "n_tokens"}
        return cls(arrays["neighbours"], arrays["counts"], vocabulary, int(meta["position"]), meta["tokenizer"],
                   meta["corpus"], int(meta["n_tokens"]), {k: v for k, v in meta.items() if k not in known})


def stats_from_counts(keys: np.ndarray, counts: np.ndarray, vocab_size: int, *, keep: int, **metadata: Any
                      ) -> NeighbourStats:
    """Dense :class:`NeighbourStats` (V, keep) from sparse counts; ``metadata`` as the dataclass fields."""
    target, neighbour, counts, rank = _ranked(keys, counts, vocab_size)
    mask = rank < keep
    dense = np.full((vocab_size, keep), -1, dtype=np.int32)
    dense_counts = np.zeros((vocab_size, keep), dtype=np.int64)
    dense[target[mask], rank[mask]] = neighbour[mask]
    dense_counts[target[mask], rank[mask]] = counts[mask]
    return NeighbourStats(dense, dense_counts, **metadata)


@dataclass(frozen=True)
class PerSampleNeighbours:
    """Different statistics for different samples (MUCH mixes four generating LLMs, hence four tokenizers).

    ``stats`` maps a key (e.g. a model name) to :class:`NeighbourStats`; ``key_of`` maps each ``generation_id`` to
    its key.
    """

    stats: dict[Any, NeighbourStats]
    key_of: dict[str, Any]


def load_neighbours(source: str | Path, *, filename: str = NEIGHBOURS_FILE, revision: str | None = None
                    ) -> NeighbourStats:
    """Statistics from a ``.npz`` file, a folder holding ``filename``, or a hub dataset id (``org/name``).

    Raises ``FileNotFoundError`` for a local path that does not exist, ``ValueError`` for a file that is not
    neighbour statistics.
    """
    path = Path(source)
    if path.is_file():
        return NeighbourStats.from_file(path)
    if path.is_dir():
        if not (path / filename).is_file():
            raise FileNotFoundError(f"{path} holds no {filename}")
        return NeighbourStats.from_file(path / filename)
    if str(source).endswith(".npz") or str(source).startswith((".", "/")) or str(source).count("/") != 1:
        raise FileNotFoundError(f"neighbour statistics {source}: no such file or folder (a hub id is 'org/name')")
    from huggingface_hub import hf_hub_download

    return NeighbourStats.from_file(hf_hub_download(str(source), filename, repo_type="dataset", revision=revision))
