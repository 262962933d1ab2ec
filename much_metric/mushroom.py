"""Span-level scores of Mu-SHROOM (SemEval-2025 Task 3): character IoU and Spearman correlation.

Both sides are records in the Mu-SHROOM JSONL format, matched by ``id``:

* ``model_output_text`` (reference side only): its length ``text_len`` sets the character range;
* ``hard_labels``: ``[[start, end], ...]`` half-open character spans marked hallucinated;
* ``soft_labels``: ``[{"start": s, "end": e, "prob": p}, ...]``, the probability that each character is
  hallucinated (0 where no span covers it).

Conventions of the official participant-kit scorer (``scorer.py``), reproduced exactly:

* a record without ``hard_labels`` gets them from its ``soft_labels``: spans with ``prob > 0.5``, sorted by
  ``(start, end)``, a span starting exactly where the previous kept one ended is merged into it (overlapping spans
  are kept apart; they cover the same characters anyway);
* a record without ``soft_labels`` gets them from its ``hard_labels`` at ``prob = 1``;
* IoU: over the sets of character indices covered by the hard labels; 1.0 when both sets are empty;
* correlation: both soft-label lists are painted, in list order (a later span overwrites an earlier one), onto
  vectors of ``text_len`` zeros; if either vector is constant (values rounded to 8 decimals), the score is 1.0 when
  both are constant and 0.0 otherwise; else Spearman's rho (average ranks for ties, as ``scipy.stats.spearmanr``);
* the reported scores are the plain means over items.

:func:`score_spans` computes both (``score`` until round 4: ``much_metric.score`` is the claim-level metric; the old
name still works, with a ``FutureWarning``).

Where the official scorer fails with an ``AssertionError``/``IndexError`` or silently wraps a negative index, this
module raises a :class:`MushroomFormatError` (a ``ValueError``) naming the record's ``id`` and the field.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from much_metric._deprecation import renamed

__all__ = [
    "MushroomFormatError", "read_mushroom_jsonl", "hard_from_soft", "soft_from_hard", "item_iou", "item_cor",
    "score_spans", "baseline_predictions", "spearman", "token_char_ranges", "claim_char_ranges", "spans_prediction",
    "span_mask", "record_spans", "read_records", "output_text",
]

#: Official threshold turning soft labels into hard labels (strictly greater).
HARD_THRESHOLD = 0.5
#: Decimals used by the official scorer to decide whether a vector is constant.
CONSTANT_DECIMALS = 8


class MushroomFormatError(ValueError):
    """A Mu-SHROOM record is malformed (missing field, span out of range, unmatched id...)."""


def read_mushroom_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """Records of a Mu-SHROOM JSONL file (one JSON object a line; blank lines skipped)."""
    from much_dataset.jsonl import read_jsonl as read_lines

    return [record for _, record in read_lines(path, error=MushroomFormatError, what="not a JSON object")]


def read_records(sources: Iterable[str | Path]) -> Iterator[dict[str, Any]]:
    """Mu-SHROOM records from JSONL files or folders (a folder: its ``*.jsonl`` files, sorted), in a stable order.

    Raises ``FileNotFoundError`` for a source that is neither a file nor a folder with a ``*.jsonl`` file.
    """
    for source in sources:
        path = Path(source)
        files = sorted(path.glob("*.jsonl")) if path.is_dir() else [path]
        if not files or not all(f.is_file() for f in files):
            raise FileNotFoundError(f"no Mu-SHROOM JSONL file at {path}")
        for file in files:
            yield from read_mushroom_jsonl(file)


def output_text(record: Mapping[str, Any]) -> str:
    """A record's ``model_output_text`` cut at the first ``<|im_end|>`` (some models' outputs, occiglot-de-en's,
    carry the chat template's end marker inside the text)."""
    return record["model_output_text"].split("<|im_end|>")[0]


def _where(record: Mapping[str, Any], source: str) -> str:
    return f"{source} record id={record.get('id')!r}"


def _check_span(start: Any, end: Any, text_len: int | None, where: str, field: str) -> tuple[int, int]:
    if isinstance(start, bool) or isinstance(end, bool) or not all(
            isinstance(v, int | np.integer) or (isinstance(v, float) and v.is_integer()) for v in (start, end)):
        raise MushroomFormatError(f"{where}: {field} has a non-integer bound [{start!r}, {end!r}]")
    start, end = int(start), int(end)
    if start < 0 or end < start:
        raise MushroomFormatError(f"{where}: {field} span [{start}, {end}] is not 0 <= start <= end")
    if text_len is not None and end > text_len:
        raise MushroomFormatError(f"{where}: {field} span [{start}, {end}] ends past the text (length {text_len})")
    return start, end


def _hard(spans: Any, text_len: int | None, where: str) -> list[tuple[int, int]]:
    if not isinstance(spans, Sequence) or isinstance(spans, str):
        raise MushroomFormatError(f"{where}: hard_labels must be a list of [start, end] pairs, got {spans!r}")
    out = []
    for span in spans:
        if not isinstance(span, Sequence) or isinstance(span, str) or len(span) != 2:
            raise MushroomFormatError(f"{where}: hard_labels entry {span!r} is not a [start, end] pair")
        out.append(_check_span(span[0], span[1], text_len, where, "hard_labels"))
    return out


def _soft(spans: Any, text_len: int | None, where: str) -> list[tuple[int, int, float]]:
    if not isinstance(spans, Sequence) or isinstance(spans, str):
        raise MushroomFormatError(f"{where}: soft_labels must be a list of {{start, end, prob}} objects")
    out = []
    for span in spans:
        if not isinstance(span, Mapping) or not {"start", "end", "prob"} <= span.keys():
            raise MushroomFormatError(f"{where}: soft_labels entry {span!r} lacks start, end or prob")
        start, end = _check_span(span["start"], span["end"], text_len, where, "soft_labels")
        prob = span["prob"]
        if isinstance(prob, bool) or not isinstance(prob, int | float | np.number) or not 0.0 <= prob <= 1.0:
            raise MushroomFormatError(f"{where}: soft_labels prob {prob!r} is not a number in [0, 1]")
        out.append((start, end, float(prob)))
    return out


def hard_from_soft(soft_labels: Iterable[Mapping[str, Any]], *, threshold: float = HARD_THRESHOLD) -> list[list[int]]:
    """Hard labels of the official scorer: spans with ``prob > threshold``, exactly adjacent ones merged."""
    kept = sorted((int(s["start"]), int(s["end"])) for s in soft_labels if s["prob"] > threshold)
    merged: list[list[int]] = []
    previous_end = None
    for start, end in kept:
        if merged and start == previous_end:
            merged[-1][1] = end
        else:
            merged.append([start, end])
        previous_end = end
    return merged


def soft_from_hard(hard_labels: Iterable[Sequence[int]]) -> list[dict[str, Any]]:
    """Soft labels at probability 1 for each hard span (official ``infer_soft_labels``)."""
    return [{"start": int(start), "end": int(end), "prob": 1.0} for start, end in hard_labels]


def record_spans(record: Mapping[str, Any], text_len: int, where: str) -> tuple[list, list]:
    """(hard spans ``[(start, end)]``, soft spans ``[(start, end, prob)]``) of a Mu-SHROOM record, checked
    against the text length; the missing kind is derived from the other as the official scorer does."""
    has_hard, has_soft = record.get("hard_labels") is not None, record.get("soft_labels") is not None
    if not has_hard and not has_soft:
        raise MushroomFormatError(f"{where}: neither hard_labels nor soft_labels")
    soft = _soft(record["soft_labels"], text_len, where) if has_soft else None
    hard = _hard(record["hard_labels"], text_len, where) if has_hard else None
    if hard is None:
        hard = [tuple(s) for s in hard_from_soft({"start": a, "end": b, "prob": p} for a, b, p in soft)]
    if soft is None:
        soft = [(a, b, 1.0) for a, b in hard]
    return hard, soft


def span_mask(n_chars: int, spans: Iterable[Sequence[int]], *, inclusive_end: bool = False) -> np.ndarray:
    """Boolean mask (n_chars,): the characters covered by ``spans`` (``[start, end)`` pairs, or ``[start, end]``
    with ``inclusive_end``; bounds below 0 count as 0)."""
    mask = np.zeros(n_chars, dtype=bool)
    extra = 1 if inclusive_end else 0
    for span in spans:
        mask[max(int(span[0]), 0): max(int(span[1]) + extra, 0)] = True
    return mask


def _paint(spans: Iterable[tuple[int, int, float]], text_len: int) -> np.ndarray:
    vector = np.zeros(text_len, dtype=np.float64)
    for start, end, prob in spans:  # list order: a later span overwrites an earlier one, as the official loop
        vector[start:end] = prob
    return vector


def item_iou(reference_mask: np.ndarray, predicted_mask: np.ndarray) -> float:
    """IoU of two boolean character masks; 1.0 when both are empty."""
    union = np.count_nonzero(reference_mask | predicted_mask)
    if union == 0:
        return 1.0
    return np.count_nonzero(reference_mask & predicted_mask) / union


def _average_ranks(values: np.ndarray) -> np.ndarray:
    _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    first = np.cumsum(counts) - counts  # 0-based rank of each distinct value's first occurrence
    return (first + (counts + 1) / 2.0)[inverse]


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rho with average ranks for ties (``scipy.stats.spearmanr(x, y).correlation``); nan if constant."""
    rx, ry = _average_ranks(np.asarray(x, np.float64)), _average_ranks(np.asarray(y, np.float64))
    rx, ry = rx - rx.mean(), ry - ry.mean()
    denominator = math.sqrt(float(np.dot(rx, rx)) * float(np.dot(ry, ry)))
    return float(np.dot(rx, ry) / denominator) if denominator > 0 else float("nan")


def _distinct_rounded(vector: np.ndarray) -> int:
    # Python's round() on the few distinct values, exactly as the official set comprehension.
    return len({round(float(v), CONSTANT_DECIMALS) for v in np.unique(vector)})


def item_cor(reference_vector: np.ndarray, predicted_vector: np.ndarray) -> float:
    """Official correlation of two per-character soft-label vectors (constant-series rule, then Spearman)."""
    n_ref, n_pred = _distinct_rounded(reference_vector), _distinct_rounded(predicted_vector)
    if n_ref == 1 or n_pred == 1:
        return float(n_ref == n_pred)
    return spearman(reference_vector, predicted_vector)


def _language(record: Mapping[str, Any]) -> str:
    lang = record.get("lang")
    if isinstance(lang, str) and lang:
        return lang.lower()
    parts = str(record.get("id", "")).split("-")
    return parts[1].lower() if len(parts) >= 3 else "unknown"


def _index(records: Iterable[Mapping[str, Any]], source: str) -> dict[str, Mapping[str, Any]]:
    index: dict[str, Mapping[str, Any]] = {}
    for position, record in enumerate(records):
        if not isinstance(record, Mapping) or "id" not in record:
            raise MushroomFormatError(f"{source} record {position}: not an object with an 'id'")
        if record["id"] in index:
            raise MushroomFormatError(f"{source} record {position}: duplicate id {record['id']!r}")
        index[record["id"]] = record
    return index


def score_spans(references: Iterable[Mapping[str, Any]], predictions: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Mu-SHROOM IoU and correlation of ``predictions`` against ``references``.

    Parameters
    ----------
    references : iterable of dict
        Gold records: ``id``, ``model_output_text`` and ``hard_labels`` and/or ``soft_labels`` (optional ``lang``;
        otherwise the language is read from ids like ``tst-en-1``).
    predictions : iterable of dict
        One record per reference ``id`` (no more, no fewer), with ``hard_labels`` and/or ``soft_labels``.

    Returns
    -------
    dict
        ``iou``, ``cor`` (means over items), ``n_items``; ``per_language``: ``{lang: {"iou", "cor", "n_items"}}``;
        ``items``: ``{"id": list, "lang": list, "iou": ndarray, "cor": ndarray}`` in reference order.
    """
    refs = _index(references, "reference")
    preds = _index(predictions, "prediction")
    missing = [i for i in refs if i not in preds]
    extra = [i for i in preds if i not in refs]
    if missing or extra:
        raise MushroomFormatError(
            f"predictions and references must have the same ids: {len(missing)} reference ids without a prediction "
            f"(first: {missing[:3]}), {len(extra)} prediction ids without a reference (first: {extra[:3]})")
    if not refs:
        raise MushroomFormatError("no reference records")
    ids, langs, ious, cors = [], [], [], []
    for item_id, ref in refs.items():
        where = _where(ref, "reference")
        text = ref.get("model_output_text")
        if not isinstance(text, str):
            raise MushroomFormatError(f"{where}: missing model_output_text")
        if not text:
            raise MushroomFormatError(f"{where}: empty model_output_text (correlation undefined)")
        text_len = len(text)
        ref_hard, ref_soft = record_spans(ref, text_len, where)
        pred_hard, pred_soft = record_spans(preds[item_id], text_len, _where(preds[item_id], "prediction"))
        ids.append(item_id)
        langs.append(_language(ref))
        ious.append(item_iou(span_mask(text_len, ref_hard), span_mask(text_len, pred_hard)))
        cors.append(item_cor(_paint(ref_soft, text_len), _paint(pred_soft, text_len)))
    iou, cor, lang_array = np.asarray(ious), np.asarray(cors), np.asarray(langs)
    per_language = {
        lang: {"iou": float(iou[lang_array == lang].mean()), "cor": float(cor[lang_array == lang].mean()),
               "n_items": int(np.count_nonzero(lang_array == lang))}
        for lang in sorted(set(langs))
    }
    return {"iou": float(iou.mean()), "cor": float(cor.mean()), "n_items": len(ids), "per_language": per_language,
            "items": {"id": ids, "lang": langs, "iou": iou, "cor": cor}}


def baseline_predictions(references: Iterable[Mapping[str, Any]], kind: str) -> list[dict[str, Any]]:
    """The shared task's trivial baselines: ``"mark_all"`` (every character, prob 1) or ``"mark_none"``."""
    if kind not in ("mark_all", "mark_none"):
        raise ValueError(f"kind must be 'mark_all' or 'mark_none', got {kind!r}")
    out = []
    for ref in references:
        n = len(ref["model_output_text"])
        hard = [[0, n]] if kind == "mark_all" and n else []
        out.append({"id": ref["id"], "hard_labels": hard, "soft_labels": soft_from_hard(hard)})
    return out


# --- Bridge: token / claim scores of a MUCH sample -> Mu-SHROOM span predictions --------------------------------


def token_char_ranges(token_ends: Sequence[int]) -> np.ndarray:
    """``(n_tokens, 2)`` character ranges ``[start, end)`` of the tokens from their cumulative end offsets
    (``token_ends[i]`` = length of the decoded text of tokens ``0..i``)."""
    ends = np.asarray(token_ends, dtype=np.int64)
    if ends.ndim != 1 or np.any(np.diff(ends) < 0) or (ends.size and ends[0] < 0):
        raise ValueError("token_ends must be non-decreasing non-negative offsets")
    return np.stack([np.concatenate([[0], ends[:-1]]), ends], axis=1)


def claim_char_ranges(token_ranges: np.ndarray, chunks: Sequence[Sequence[int]]) -> np.ndarray:
    """``(n_claims, 2)`` character ranges of claims given as runs of token indices."""
    first = np.array([chunk[0] for chunk in chunks], dtype=np.int64)
    last = np.array([chunk[-1] for chunk in chunks], dtype=np.int64)
    return np.stack([token_ranges[first, 0], token_ranges[last, 1]], axis=1)


def spans_prediction(item_id: str, ranges: np.ndarray, probabilities: Sequence[float], text_len: int, *,
                     hard: Sequence[bool] | None = None) -> dict[str, Any]:
    """A Mu-SHROOM prediction record from scored character ranges (tokens or claims).

    ``probabilities`` (in [0, 1]) become ``soft_labels`` over the ranges (clipped to the text; empty ranges
    dropped); ``hard`` (one bool per range; default ``probability > 0.5``) marks the ranges of ``hard_labels``,
    with touching or overlapping marked ranges merged.
    """
    p = np.asarray(probabilities, dtype=np.float64)
    ranges = np.clip(np.asarray(ranges, dtype=np.int64).reshape(-1, 2), 0, text_len)
    if p.shape != (len(ranges),):
        raise ValueError(f"item {item_id!r}: {p.size} probabilities for {len(ranges)} ranges")
    if np.any((p < 0) | (p > 1)) or not np.all(np.isfinite(p)):
        raise ValueError(f"item {item_id!r}: probabilities must lie in [0, 1]")
    marked = p > HARD_THRESHOLD if hard is None else np.asarray(hard, dtype=bool)
    soft = [{"start": int(a), "end": int(b), "prob": float(q)} for (a, b), q in zip(ranges, p, strict=True) if b > a]
    merged: list[list[int]] = []
    for (a, b), keep in zip(ranges.tolist(), marked.tolist(), strict=True):
        if not keep or b <= a:
            continue
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return {"id": item_id, "hard_labels": merged, "soft_labels": soft}


__getattr__ = renamed(__name__, {"score": "score_spans", "read_jsonl": "read_mushroom_jsonl"})
