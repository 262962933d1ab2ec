"""Label sources: how much a ranking of detectors depends on who labelled the claims
(docs/leaderboard.md#label-sources).

A *label source* is one labelling of (some of) the evaluation data's claims:

* ``labels`` -- the data's ``labels`` column (MUCH: the LLM judges'; the embedded sample: Mu-SHROOM's majority
  ``hard_labels``);
* ``human-agreed`` -- where both human annotators labelled a sample identically (MUCH's manual test rows), when the
  data has any;
* every label file next to a published folder, ``<folder>/label_sources/<name>.json``
  (:mod:`much_dataset.label_files`; the sample ships ``soft.json``, Mu-SHROOM's soft labels under the reference's
  rule, :mod:`builder.label_sources`).

Each board row is re-scored under each source from its stored claim scores (no resubmission; the claims are the
same, only their labels change): ROC-AUC on the claims the source labels, the rank of the row under that source, and
Kendall's tau-b between the rankings of every two sources. These sources are published labels: nothing private is
involved (the private split's labels never reach this table).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from much_dataset import schema
from much_leaderboard._ranks import competition_ranks, kendall_tau

__all__ = ["LabelSource", "LabelSources", "roc_auc"]


def roc_auc(claim_scores: np.ndarray, hallucinated: np.ndarray) -> float | None:
    """Area under the ROC curve (trapezoid, ties at their expected value); None with a single class."""
    from much_metric.scoring import roc_curve

    hallucinated = np.asarray(hallucinated, dtype=bool)
    if hallucinated.all() or not hallucinated.any():
        return None
    fpr, tpr = roc_curve(np.asarray(claim_scores, dtype=np.float64), hallucinated)
    return float(np.trapezoid(tpr, fpr))


@dataclass(frozen=True)
class LabelSource:
    """One labelling: ``hallucinated`` per evaluated claim of the data (EOS claims dropped, rows in data order),
    ``labelled`` per data row (whether this source labels it)."""

    name: str
    description: str
    hallucinated: np.ndarray = field(repr=False)
    labelled: np.ndarray = field(repr=False)

    @property
    def n_rows(self) -> int:
        return int(self.labelled.sum())


def _source(name: str, description: str, per_row: Sequence[Sequence[int] | None], n_eval: np.ndarray
            ) -> LabelSource:
    flat = np.zeros(int(n_eval.sum()), dtype=bool)
    labelled = np.array([labels is not None for labels in per_row], dtype=bool)
    starts = np.concatenate(([0], np.cumsum(n_eval)[:-1]))
    for row, labels in enumerate(per_row):
        if labels is not None:
            flat[starts[row]: starts[row] + n_eval[row]] = np.asarray(labels[:-1]) == schema.HALLUCINATED
    return LabelSource(name=name, description=description, hallucinated=flat, labelled=labelled)


def _folder_of(source: str) -> Path | None:
    from much_dataset.loader import SAMPLE, SAMPLE_DIR

    if source == SAMPLE:
        return SAMPLE_DIR
    path = Path(source)
    return path if path.is_dir() else None


class LabelSources:
    """The label sources of one board's evaluation data (``data``: a :class:`much_leaderboard.EvaluationData`)."""

    def __init__(self, data: Any) -> None:
        from much_dataset.label_files import read_label_file

        columns = data.dataset.select_columns([schema.GENERATION_ID, schema.TOKEN_CHUNKS, *(
            name for name in schema.LABEL_COLUMNS if name in data.dataset.column_names)]).to_dict()
        ids = [str(g) for g in columns[schema.GENERATION_ID]]
        n_chunks = np.array([len(c) for c in columns[schema.TOKEN_CHUNKS]], dtype=np.int64)
        self.n_eval = n_chunks - 1
        self.starts = np.concatenate(([0], np.cumsum(self.n_eval)[:-1]))
        main = "Mu-SHROOM's majority hard_labels (the sample's labels)" if data.source == "sample" else \
            "the data's labels column"
        self.sources = [_source(schema.LABELS, main, columns[schema.LABELS], self.n_eval)]
        if schema.HUMAN_LABELS_0 in columns:
            agreed = [list(a) if _human(a) and _human(b) and list(a) == list(b) else None
                      for a, b in zip(columns[schema.HUMAN_LABELS_0], columns[schema.HUMAN_LABELS_1], strict=True)]
            if any(a is not None for a in agreed):
                self.sources.append(_source("human-agreed", "both human annotators, where they agree", agreed,
                                            self.n_eval))
        folder = _folder_of(data.source)
        for path in sorted((folder / "label_sources").glob("*.json")) if folder is not None else ():
            found = read_label_file(path, require_checksum=False)
            per_row = [found.rows.get(gid, {}).get(schema.LABELS) for gid in ids]
            for gid, labels, n in zip(ids, per_row, n_chunks.tolist(), strict=True):
                if labels is not None and len(labels) != n:
                    raise ValueError(f"label source {path}: generation_id={gid!r} has {len(labels)} labels for {n} "
                                     "claims of the evaluation data")
            if any(labels is not None for labels in per_row):
                self.sources.append(_source(found.name, found.description, per_row, self.n_eval))
        self._cache: tuple[int, dict[str, Any]] | None = None
        self._lock = threading.Lock()

    def table(self, rows: Sequence[dict[str, Any]], scores_of: Callable[[str, str], dict[str, np.ndarray]],
              version: int) -> dict[str, Any]:
        """Every row's ROC-AUC and rank under each source, and Kendall's tau between the sources' rankings
        (cached until ``version`` changes). ``scores_of(submission, signal)``: the row's stored claim arrays."""
        with self._lock:
            if self._cache is not None and self._cache[0] == version:
                return self._cache[1]
        out = []
        for row in rows:
            arrays = scores_of(row["submission"], row["signal"])
            out.append({"key": f"{row['submission']}/{row['signal']}", "submission": row["submission"],
                        "signal": row["signal"], "kind": row["kind"], "form": row["form"],
                        "roc_auc": {s.name: self._auc(s, arrays) for s in self.sources}})
        ranks: dict[str, dict[str, int]] = {}
        for source in self.sources:
            scored = [r for r in out if r["roc_auc"][source.name] is not None]
            ranks[source.name] = dict(zip([r["key"] for r in scored],
                                          competition_ranks([r["roc_auc"][source.name] for r in scored]),
                                          strict=True))
        tau = {}
        for i, a in enumerate(self.sources):
            for b in self.sources[i + 1:]:
                both = [r for r in out if r["roc_auc"][a.name] is not None and r["roc_auc"][b.name] is not None]
                tau[(a.name, b.name)] = (kendall_tau([r["roc_auc"][a.name] for r in both],
                                                     [r["roc_auc"][b.name] for r in both])
                                         if len(both) > 1 else None, len(both))
        for r in out:
            r["rank"] = {name: ranks[name].get(r["key"]) for name in ranks}
        result = {"sources": [{"name": s.name, "description": s.description, "n_rows": s.n_rows,
                               "n_claims": int(self.n_eval[s.labelled].sum())} for s in self.sources],
                  "rows": out, "tau": tau}
        with self._lock:
            self._cache = (version, result)
        return result

    def _auc(self, source: LabelSource, arrays: dict[str, np.ndarray]) -> float | None:
        rows = np.asarray(arrays["claim_rows"], dtype=np.int64)
        if not len(rows):
            return None
        first = np.r_[0, np.flatnonzero(np.diff(rows)) + 1]
        within = np.arange(len(rows)) - np.repeat(first, np.diff(np.r_[first, len(rows)]))
        keep = source.labelled[rows]
        labels = source.hallucinated[self.starts[rows[keep]] + within[keep]]
        if source.name == schema.LABELS and not np.array_equal(labels, np.asarray(arrays["hallucinated"], bool)):
            raise RuntimeError("label sources: the stored claims do not line up with the data's labels")
        return roc_auc(np.asarray(arrays["claim_scores"])[keep], labels)


def _human(value: Any) -> bool:
    return value is not None and list(value) != list(schema.NO_HUMAN_LABEL)
