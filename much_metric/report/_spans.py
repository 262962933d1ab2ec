"""``much evaluate --spans``: claim scores as Mu-SHROOM span predictions, scored with the shared task's IoU and rho.

The embedded sample's outputs are Mu-SHROOM test outputs (``builder import-mushroom``), re-tokenised by the
sample's observer model: a sample row matches the Mu-SHROOM record with the same language and question whose
``model_output_text`` (cut at ``<|im_end|>``, as the import does) starts the row's ``output`` (the import appended
the observer's EOS text). Character offsets come from decoding the token prefixes with the sample's tokenizer
(``token_ends[i] = len(decode(ids[:i + 1]))``, the import's own rule), so claims map to exact character ranges.

Per method, the matched items are split into a seeded calibration half and an evaluation half. On the calibration
half: the hard-label threshold that maximises the mean IoU (candidates: the claim scores' quantiles, and "mark
nothing"), and the score -> probability map for the soft labels (the empirical CDF of the calibration claim
scores: monotone, so rho is that of the raw scores up to ties). Reported on the evaluation half, per language,
next to the task's mark-all and mark-none baselines on the same items.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from much_metric import mushroom
from much_metric.report._delta import method_key
from much_metric.report._evaluation import EvaluationTable

__all__ = ["DEFAULT_MUSHROOM", "MARK_ALL_TOLERANCE", "MUSHROOM_HINT", "match_mushroom", "mushroom_source",
           "evaluate_spans", "spans_flags"]

#: The Mu-SHROOM test split shipped with the repository.
DEFAULT_MUSHROOM = Path(__file__).resolve().parents[2] / "data" / "mushroom"
_N_THRESHOLDS = 64
#: How to get the Mu-SHROOM files when the default (a repository folder, not installed by pip) is absent.
MUSHROOM_HINT = ("; the Mu-SHROOM test files are not installed by pip: pass --mushroom FOLDER, a folder with the "
                 "Mu-SHROOM test files mushroom.<lang>-tst.v1.extra.jsonl (data/mushroom in a clone of this "
                 "toolkit's repository, or the test split of the hub dataset Helsinki-NLP/mu-shroom)")


def _records(source: str | Path) -> list[dict[str, Any]]:
    path = Path(source)
    if not (path.is_dir() and any(path.glob("*.jsonl"))) and not path.is_file():
        raise FileNotFoundError(f"no Mu-SHROOM JSONL file at {path}{MUSHROOM_HINT if path == DEFAULT_MUSHROOM else ''}")
    return list(mushroom.read_records([path]))


def mushroom_source(mushroom: str | Path | None = None) -> Path:
    """The Mu-SHROOM JSONL file or folder to score spans against (None: :data:`DEFAULT_MUSHROOM`), checked to hold
    one -- before any long work: the default folder exists only in a clone of the repository
    (``FileNotFoundError`` saying where to get the files)."""
    path = Path(mushroom).expanduser() if mushroom else DEFAULT_MUSHROOM
    if not (path.is_file() or any(path.glob("*.jsonl"))):
        raise FileNotFoundError(f"--spans: no Mu-SHROOM JSONL file at {path}{MUSHROOM_HINT if not mushroom else ''}")
    return path


def match_mushroom(columns: Mapping[str, list], records: Sequence[Mapping[str, Any]]) -> dict[int, dict[str, Any]]:
    """Dataset row index -> its Mu-SHROOM record (rows without a match are absent)."""
    by_question: dict[tuple[str, str], list] = {}
    for record in records:
        by_question.setdefault((str(record.get("lang", "")).lower(), record.get("model_input", "")), []).append(record)
    matched = {}
    for row, (lang, prompt, output) in enumerate(zip(columns["lang"], columns["prompt"], columns["output"],
                                                     strict=True)):
        for record in by_question.get((str(lang).lower(), prompt), []):
            if output.startswith(mushroom.output_text(record)):
                matched[row] = record
                break
    return matched


def _token_ranges(tokenizer: Any, ids: Sequence[int]) -> np.ndarray:
    ends = [len(tokenizer.decode(list(ids[: i + 1]), skip_special_tokens=False)) for i in range(len(ids))]
    return mushroom.token_char_ranges(ends)


def _best_threshold(candidates: np.ndarray, items: list[tuple[dict, np.ndarray, np.ndarray]]) -> float:
    best, best_iou = np.inf, -1.0
    for threshold in candidates:
        ious = []
        for record, ranges, scores in items:
            text_len = len(record["model_output_text"])
            predicted = np.zeros(text_len, bool)
            for (a, b), s in zip(np.clip(ranges, 0, text_len), scores, strict=True):
                if s > threshold:
                    predicted[a:b] = True
            reference = mushroom.span_mask(text_len, mushroom.record_spans(record, text_len, "reference")[0])
            ious.append(mushroom.item_iou(reference, predicted))
        if np.mean(ious) > best_iou:
            best, best_iou = float(threshold), float(np.mean(ious))
    return best


def evaluate_spans(table: EvaluationTable, columns: Mapping[str, list], tokenizer: Any, *,
                   mushroom_source: str | Path = DEFAULT_MUSHROOM, fit_fraction: float = 0.5,
                   random_state: int | None = 0, progress: bool = True) -> dict[str, Any]:
    """Span-level scores of every method of ``table`` (see the module docstring); ``progress``: a bar per method
    on a terminal.

    ``columns``: the evaluated dataset's columns (``dataset_columns`` plus ``prompt`` and ``output``).
    Returns ``{"n_items", "n_fit_items", "methods": {name: {"threshold", "iou", "cor", "per_language"}},
    "baselines": {"mark_all": ..., "mark_none": ...}}`` (scores on the evaluation half); a method is named by
    :func:`much_metric.report.method_key` (``"<signal> (<aggregator>)"``).
    """
    records = _records(mushroom_source)
    matched = match_mushroom(columns, records)
    if not matched:
        raise ValueError("no evaluated sample matches a Mu-SHROOM record (--spans needs the embedded sample or "
                         "another import of Mu-SHROOM outputs)")
    rows = np.array(sorted(matched), dtype=np.int64)
    rng = np.random.default_rng(random_state)
    fit_rows = set(rng.choice(rows, int(round(fit_fraction * len(rows))), replace=False).tolist())
    eval_rows = [r for r in rows.tolist() if r not in fit_rows]
    references = [matched[r] for r in eval_rows]
    token_ranges = {r: _token_ranges(tokenizer, columns["output_tokens"][r]) for r in rows.tolist()}
    out: dict[str, Any] = {"n_items": len(eval_rows), "n_fit_items": len(fit_rows), "methods": {}}
    for name in ("mark_all", "mark_none"):
        out.setdefault("baselines", {})[name] = _summary(
            mushroom.score_spans(references, mushroom.baseline_predictions(references, name)))
    from tqdm.auto import tqdm

    rows_scored = [*table.results, *table.floors]
    for result in tqdm(rows_scored, desc="spans", unit="method", disable=None if progress else True):
        by_row: dict[int, list[int]] = {}
        for position, row in enumerate(result.claim_rows.tolist()):
            by_row.setdefault(row, []).append(position)
        items = {}
        for row in rows.tolist():
            if row not in by_row:
                continue
            chunks = columns["token_chunks"][row][: len(by_row[row])]  # kept claims: all but the EOS chunk
            ranges = mushroom.claim_char_ranges(token_ranges[row], chunks)
            items[row] = (matched[row], ranges, result.claim_scores[by_row[row]])
        fit_items = [items[r] for r in items if r in fit_rows]
        if not fit_items or not any(r in items for r in eval_rows):
            continue
        fit_scores = np.sort(np.concatenate([i[2] for i in fit_items]))
        candidates = np.append(np.unique(np.quantile(fit_scores, np.linspace(0, 1, _N_THRESHOLDS))), np.inf)
        threshold = _best_threshold(candidates, fit_items)
        predictions, refs = [], []
        for row in eval_rows:
            if row not in items:
                continue
            record, ranges, scores = items[row]
            probabilities = np.searchsorted(fit_scores, scores, side="right") / len(fit_scores)
            predictions.append(mushroom.spans_prediction(record["id"], ranges, probabilities,
                                                         len(record["model_output_text"]), hard=scores > threshold))
            refs.append(record)
        out["methods"][method_key(result)] = {"threshold": threshold,
                                              **_summary(mushroom.score_spans(refs, predictions))}
    return out


#: A method whose span IoU is within this of the mark-everything baseline's is flagged: it marks (almost) all.
MARK_ALL_TOLERANCE = 0.005


def spans_flags(spans: Mapping[str, Any]) -> dict[str, str]:
    """Per method of :func:`evaluate_spans`' result, a flag when its IoU is the mark-everything baseline's (within
    :data:`MARK_ALL_TOLERANCE`): its threshold marks (almost) every claim, so its spans say nothing."""
    mark_all = spans.get("baselines", {}).get("mark_all")
    if mark_all is None:
        return {}
    return {name: f"at the mark-all baseline (IoU {m['iou']:.3f} vs {mark_all['iou']:.3f})"
            for name, m in spans["methods"].items() if abs(m["iou"] - mark_all["iou"]) <= MARK_ALL_TOLERANCE}


def _summary(scores: Mapping[str, Any]) -> dict[str, Any]:
    return {"iou": scores["iou"], "cor": scores["cor"], "n_items": scores["n_items"],
            "per_language": scores["per_language"]}
