"""Shared helpers of the much_dataset tests: JSONL writing, single-defect corruptions, a naive reference validator.

The rows come from :mod:`much_dataset.synthetic` (clearly synthetic, NOT MUCH data).
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Callable
from pathlib import Path

from much_dataset import schema

S = schema


def write_rows(folder: Path, rows_by_split: dict[str, list[dict]]) -> Path:
    """Write ``<folder>/rows/<split>.jsonl`` the way the export step does; returns ``folder``."""
    rows_dir = folder / "rows"
    rows_dir.mkdir(parents=True, exist_ok=True)
    for split, rows in rows_by_split.items():
        with (rows_dir / f"{split}.jsonl").open("w", encoding="utf-8") as handle:
            for row in rows:
                handle.write(json.dumps(row) + "\n")
    return folder


# --- single-defect corruptions: (name, expected field, function mutating one row in place) -----------------------


def _swap_first_two_distinct(row: dict) -> None:
    for values in row[S.LOGITS_VALUES]:
        if values[0] != values[1]:
            values[0], values[1] = values[1], values[0]
            return
    raise AssertionError("no row with two distinct top probabilities")


def _non_member_token(row: dict) -> None:
    row[S.OUTPUT_TOKENS][0] = max(max(ids) for ids in row[S.LOGITS_TOKEN_IDS]) + 1


def _swap_chunks(row: dict) -> None:
    chunks = row[S.TOKEN_CHUNKS]
    chunks[0], chunks[1] = chunks[1], chunks[0]


def _multi_chunk_human(row: dict) -> None:
    row[S.HUMAN_LABELS_0] = [S.CORRECT] * (len(row[S.TOKEN_CHUNKS]) + 1)


CORRUPTIONS: list[tuple[str, str, Callable[[dict], None]]] = [
    ("values one row short", S.LOGITS_VALUES, lambda r: r[S.LOGITS_VALUES].pop()),
    ("ids one row short", S.LOGITS_TOKEN_IDS, lambda r: r[S.LOGITS_TOKEN_IDS].pop()),
    ("stopword_mask one short", S.STOPWORD_MASK, lambda r: r[S.STOPWORD_MASK].pop()),
    ("23 probabilities", S.LOGITS_VALUES, lambda r: r[S.LOGITS_VALUES][1].pop()),
    ("23 candidate ids", S.LOGITS_TOKEN_IDS, lambda r: r[S.LOGITS_TOKEN_IDS][-1].pop()),
    ("NaN probability", S.LOGITS_VALUES, lambda r: r[S.LOGITS_VALUES][2].__setitem__(5, math.nan)),
    ("negative probability", S.LOGITS_VALUES, lambda r: r[S.LOGITS_VALUES][0].__setitem__(-1, -0.01)),
    ("probability above 1", S.LOGITS_VALUES, lambda r: r[S.LOGITS_VALUES][0].__setitem__(0, 1.5)),
    ("infinite probability", S.LOGITS_VALUES, lambda r: r[S.LOGITS_VALUES][0].__setitem__(0, math.inf)),
    ("unsorted probabilities", S.LOGITS_VALUES, _swap_first_two_distinct),
    # each value in [0, 1] and sorted, but 24 x 0.9 = 21.6: not a probability distribution's top 24
    ("top-24 sum 21.6", S.LOGITS_VALUES, lambda r: r[S.LOGITS_VALUES].__setitem__(1, [0.9] * schema.TOP_K)),
    ("top-24 sum just above the tolerance", S.LOGITS_VALUES,  # 1 + 2.2e-4 > 1 + 1e-4
     lambda r: r[S.LOGITS_VALUES].__setitem__(0, [0.5, 0.5] + [1e-5] * (schema.TOP_K - 2))),
    ("sampled token not a candidate", S.OUTPUT_TOKENS, _non_member_token),
    ("chunks out of order", S.TOKEN_CHUNKS, _swap_chunks),
    ("token missing from chunks", S.TOKEN_CHUNKS, lambda r: r[S.TOKEN_CHUNKS][0].pop()),
    ("chunk index out of range", S.TOKEN_CHUNKS, lambda r: r[S.TOKEN_CHUNKS][-1].append(len(r[S.OUTPUT_TOKENS]))),
    ("token in two chunks", S.TOKEN_CHUNKS, lambda r: r[S.TOKEN_CHUNKS][1].insert(0, r[S.TOKEN_CHUNKS][0][-1])),
    ("empty chunk", S.TOKEN_CHUNKS, lambda r: r[S.TOKEN_CHUNKS].insert(1, [])),
    ("no chunks", S.TOKEN_CHUNKS, lambda r: r.__setitem__(S.TOKEN_CHUNKS, [])),
    ("one label too many", S.LABELS, lambda r: r[S.LABELS].append(S.CORRECT)),
    ("label 0", S.LABELS, lambda r: r[S.LABELS].__setitem__(0, 0)),
    ("label 2", S.LABELS, lambda r: r[S.LABELS].__setitem__(-1, 2)),
    ("human labels wrong length", S.HUMAN_LABELS_0, _multi_chunk_human),
    ("human label 0 inside a list", S.HUMAN_LABELS_1,
     lambda r: r.__setitem__(S.HUMAN_LABELS_1, [0] + [S.CORRECT] * (len(r[S.TOKEN_CHUNKS]) - 1))),
    ("empty generation_id", S.GENERATION_ID, lambda r: r.__setitem__(S.GENERATION_ID, "")),
    ("unknown lang", S.LANG, lambda r: r.__setitem__(S.LANG, "it")),
    ("output_tokens null", S.OUTPUT_TOKENS, lambda r: r.__setitem__(S.OUTPUT_TOKENS, None)),
    ("labels null", S.LABELS, lambda r: r.__setitem__(S.LABELS, None)),
]


def corrupted(rows: list[dict], index: int, corruption: Callable[[dict], None]) -> list[dict]:
    """A deep copy of ``rows`` with ``corruption`` applied to row ``index``."""
    rows = copy.deepcopy(rows)
    corruption(rows[index])
    return rows


# --- an independent, deliberately naive per-row validator (differential reference) ---------------------------------


def naive_bad_rows(rows: list[dict], *, top_k: int = schema.TOP_K) -> set[int]:
    """Indices of rows breaking a rule, checked one Python value at a time (no numpy, no pyarrow)."""
    bad: set[int] = set()
    seen: set = set()
    for index, row in enumerate(rows):
        if _naive_row_is_bad(row, top_k) or not row[S.GENERATION_ID] or row[S.GENERATION_ID] in seen:
            bad.add(index)
        seen.add(row[S.GENERATION_ID])
    return bad


def _naive_row_is_bad(row: dict, top_k: int) -> bool:
    if row[S.LANG] not in S.LANGUAGES:
        return True
    lists = [S.OUTPUT_TOKENS, S.LOGITS_TOKEN_IDS, S.LOGITS_VALUES, S.TOKEN_CHUNKS, S.LABELS, S.HUMAN_LABELS_0,
             S.HUMAN_LABELS_1]
    if any(row[name] is None for name in lists):
        return True
    tokens = row[S.OUTPUT_TOKENS]
    n = len(tokens)
    if len(row[S.LOGITS_TOKEN_IDS]) != n or len(row[S.LOGITS_VALUES]) != n:
        return True
    if row.get(S.STOPWORD_MASK) is not None and len(row[S.STOPWORD_MASK]) != n:
        return True
    for token, ids, values in zip(tokens, row[S.LOGITS_TOKEN_IDS], row[S.LOGITS_VALUES], strict=True):
        if len(ids) != top_k or len(values) != top_k or token not in ids:
            return True
        if math.fsum(values) > 1.0 + 1e-4:  # the stored top-k of a distribution sums to at most 1
            return True
        for position, value in enumerate(values):
            if not (0.0 <= value <= 1.0):  # also False for NaN
                return True
            if position and value > values[position - 1]:
                return True
    chunks = row[S.TOKEN_CHUNKS]
    if not chunks or any(len(chunk) == 0 for chunk in chunks):
        return True
    if [index for chunk in chunks for index in chunk] != list(range(n)):
        return True
    if len(row[S.LABELS]) != len(chunks) or any(label not in (-1, 1) for label in row[S.LABELS]):
        return True
    for name in (S.HUMAN_LABELS_0, S.HUMAN_LABELS_1):
        labels = row[name]
        if labels == [0]:
            continue
        if len(labels) != len(chunks) or any(label not in (-1, 1) for label in labels):
            return True
    return False
