"""The reference resource: each row's Wikipedia article and RAG chunks, as ``python -m builder wiki`` and ``context``
store them, for the reference-based detectors (the multilingual detection seed's "reference-based" setting).

A builder folder holds ``wiki.jsonl`` (one row per ``wiki_url``: ``status``, ``sections`` of ``{heading, level,
text}``, ``markdown``) and, after ``context``, ``context.jsonl`` (one row per ``generation_id``: the top ``chunks``
of the article by embedding similarity with the answer). :func:`open_reference` reads them for the rows of a split
(by each row's ``wiki_url`` and ``generation_id``) into a :class:`ReferenceSet`:

* ``article`` -- the sentences of the article's sections (:func:`much_metric.baselines.samples.split_sentences`),
  headings left out; a page recorded ``missing`` or ``disambiguation`` has no sentences (its claims then find no
  support: every NLI score 0, counted in :meth:`ReferenceSet.describe`);
* ``chunks`` -- the sentences of the row's context chunks (none when ``context.jsonl`` has no row for it).

A row whose ``wiki_url`` has no ``wiki.jsonl`` row, or a ``chunks`` signal for a row without a ``context.jsonl`` row,
is an error naming the row, the field and the file (run the builder step first). Fetching a real article needs the
internet (the MediaWiki API); the tests serve a local MediaWiki stand-in.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from much_dataset.schema import GENERATION_ID, WIKI_URL
from much_metric.baselines.samples import split_sentences

__all__ = ["PARTS", "ReferenceSet", "open_reference"]

#: What a reference-based signal compares a claim with.
PARTS = ("article", "chunks")
WIKI_FILE = "wiki.jsonl"
CONTEXT_FILE = "context.jsonl"


@dataclass(frozen=True)
class ReferenceSet:
    """Per ``generation_id``: the article's sentences and the chunks' sentences (None: not available)."""

    article: Mapping[str, tuple[str, ...] | None]
    chunks: Mapping[str, tuple[str, ...] | None]
    source: str = "in memory"
    fingerprint: str = ""

    def units(self, generation_id: str, part: str) -> tuple[str, ...]:
        """The reference sentences of one row for ``part`` ("article" or "chunks")."""
        if part not in PARTS:
            raise ValueError(f"reference part must be one of {PARTS}, got {part!r}")
        table = self.article if part == "article" else self.chunks
        if generation_id not in table:
            raise ValueError(f"{GENERATION_ID}={generation_id!r}: no reference for this row ({self.source})")
        units = table[generation_id]
        if units is None:
            made_by, file = ("context", CONTEXT_FILE) if part == "chunks" else ("wiki", WIKI_FILE)
            raise ValueError(f"{GENERATION_ID}={generation_id!r}: no {file} row for it in {self.source} (run `python "
                             f"-m builder {made_by} --out {self.source}` first)")
        return units

    def record(self) -> dict[str, Any]:
        """What signal metadata stores about this reference: its folder and a digest of its sentences."""
        return {"source": self.source, "fingerprint": self.fingerprint}

    def describe(self) -> str:
        """One line for ``much run``'s notes."""
        empty = sum(1 for units in self.article.values() if units is not None and not units)
        chunks = sum(1 for units in self.chunks.values() if units is not None)
        return (f"reference {self.source}: articles for {sum(v is not None for v in self.article.values()):,} rows "
                f"({empty:,} without text: missing or disambiguation pages), chunks for {chunks:,}")


def _read(path: Path, key: str) -> dict[str, dict[str, Any]]:
    from much_dataset.jsonl import read_jsonl

    if not path.is_file():
        return {}
    rows: dict[str, dict[str, Any]] = {}
    for number, row in read_jsonl(path):
        if not isinstance(row, dict) or key not in row:
            raise ValueError(f"{path}: line {number} has no field {key!r}")
        rows[str(row[key])] = row  # the builder's store appends: the last row of a key wins
    return rows


def _article_sentences(row: Mapping[str, Any], path: Path) -> tuple[str, ...]:
    sections = row.get("sections")
    if sections is None:
        return tuple(split_sentences(str(row.get("markdown") or "")))
    if not isinstance(sections, list):
        raise ValueError(f"{path}: {WIKI_URL}={row.get(WIKI_URL)!r}: field 'sections' is not a list")
    return tuple(sentence for section in sections for sentence in split_sentences(str(section.get("text") or "")))


def open_reference(value: Any, dataset: Any) -> ReferenceSet:
    """The reference of the rows of ``dataset`` (``generation_id`` and ``wiki_url`` columns) from a builder folder.

    ``value``: a :class:`ReferenceSet` (returned as is) or the folder holding ``wiki.jsonl`` (and ``context.jsonl``).
    """
    if isinstance(value, ReferenceSet):
        return value
    if value is None:
        raise ValueError("no reference: pass reference= (much run --reference FOLDER, the --out of `python -m builder "
                         "wiki` and `context`)")
    folder = Path(value)
    wiki_path, context_path = folder / WIKI_FILE, folder / CONTEXT_FILE
    if not wiki_path.is_file():
        raise ValueError(f"--reference {folder}: no {WIKI_FILE} (run `python -m builder wiki --out {folder}`)")
    if dataset is None or not hasattr(dataset, "column_names") or WIKI_URL not in dataset.column_names:
        raise ValueError(f"the reference needs the split's {GENERATION_ID} and {WIKI_URL} columns")
    pages, contexts = _read(wiki_path, WIKI_URL), _read(context_path, GENERATION_ID)
    article: dict[str, tuple[str, ...] | None] = {}
    chunks: dict[str, tuple[str, ...] | None] = {}
    digest = hashlib.sha256()
    for gid, url in zip(dataset[GENERATION_ID], dataset[WIKI_URL], strict=True):
        page = pages.get(url)
        if page is None:
            article[gid] = None
        else:
            article[gid] = () if page.get("status") in ("missing", "disambiguation") else \
                _article_sentences(page, wiki_path)
        context = contexts.get(gid)
        chunks[gid] = None if context is None else tuple(
            sentence for chunk in context.get("chunks") or [] for sentence in split_sentences(str(chunk)))
        digest.update(repr((gid, article[gid], chunks[gid])).encode("utf-8"))
    return ReferenceSet(article, chunks, str(folder), digest.hexdigest()[:16])
