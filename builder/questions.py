"""questions: collect the MUCH questions from Mu-SHROOM (docs/reference-behaviour.md#questions) into
``questions.jsonl``.

Reads Mu-SHROOM rows (the vendored ``data/mushroom/*.jsonl`` by default, any files/folders with ``--source``, or the
hub dataset ``Helsinki-NLP/mu-shroom`` with ``--hub``), keeps en/fr/es/de, and writes one record per unique question
ID (docs/reference-behaviour.md#question-id): ``question_id, lang, prompt, wiki_url``. Rerunning never duplicates a
question.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from builder.configs import question_id
from builder.store import JsonlStore
from much_dataset import schema
from much_metric.fileio import Output, check_outputs

__all__ = ["add_arguments", "run", "read_mushroom", "questions_from_rows", "DEFAULT_SOURCE"]

#: What the step reads and writes (``--out``-relative), for the output rules of :mod:`builder.cli`.
READS = ("source",)
WRITES = ("questions.jsonl", "questions.failures.jsonl")

DEFAULT_SOURCE = Path(__file__).resolve().parent.parent / "data" / "mushroom"
HUB_DATASET = "Helsinki-NLP/mu-shroom"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--source", action="append", default=None,
                        help="Mu-SHROOM JSONL file or folder of *.jsonl (repeatable; default: data/mushroom)")
    parser.add_argument("--hub", action="store_true",
                        help=f"read {HUB_DATASET} (config 'all', splits validation then test) instead of files")


def read_mushroom(sources: Iterable[str | Path]) -> Iterator[dict[str, Any]]:
    """Mu-SHROOM rows from JSONL files or folders (folders: their ``*.jsonl``, sorted), in a stable order."""
    from much_metric.mushroom import read_records

    yield from read_records(sources)


def _read_hub() -> Iterator[dict[str, Any]]:  # pragma: no cover - needs the network
    import datasets

    for split in ("validation", "test"):
        yield from datasets.load_dataset(HUB_DATASET, "all", split=split)


def questions_from_rows(rows: Iterable[dict[str, Any]]) -> tuple[list[dict[str, str]], int]:
    """Unique questions of the MUCH languages, first occurrence order, and the number of rejected rows.

    A row needs ``lang``, ``model_input`` and ``wikipedia_url``; a missing field raises ``ValueError`` naming the
    row ``id`` and the field.
    """
    seen: set[str] = set()
    questions, rejected = [], 0
    for row in rows:
        for field in ("lang", "model_input", "wikipedia_url"):
            if not isinstance(row.get(field), str):
                raise ValueError(f"Mu-SHROOM row {row.get('id', '?')!r}: field {field!r} is missing or not a string")
        lang = row["lang"].lower()
        if lang not in schema.LANGUAGES:
            rejected += 1
            continue
        qid = question_id(lang, row["model_input"], row["wikipedia_url"])
        if qid in seen:
            continue
        seen.add(qid)
        questions.append({"question_id": qid, schema.LANG: lang, schema.PROMPT: row["model_input"],
                          schema.WIKI_URL: row["wikipedia_url"]})
    return questions, rejected


def run(args: argparse.Namespace) -> int:
    check_outputs([Output("--out", Path(args.out) / "questions.jsonl")],
                  inputs=[("--source", source) for source in args.source or []])
    rows = _read_hub() if args.hub else read_mushroom(args.source or [DEFAULT_SOURCE])
    questions, rejected = questions_from_rows(rows)
    store = JsonlStore(Path(args.out) / "questions.jsonl", key="question_id")
    written = store.extend(questions)
    print(f"questions: {len(questions)} unique ({written} new, {len(store)} stored), {rejected} rows of other "
          "languages rejected")
    return 0
