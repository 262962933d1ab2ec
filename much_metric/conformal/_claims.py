"""Labelled claims as flat arrays (:class:`ClaimSet`), built from the metric's own claim scores.

The claim scores come from the metric's aggregation (:func:`much_metric.aggregate_claims`: aggregator, stopword rule,
EOS claim dropped) or from the evaluation loop (:class:`much_metric.report.SignalResult`, any signal: token,
claim-level, learned, peer), so a conformal threshold is calibrated on exactly the numbers the metric ranks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from much_dataset.params import InvalidParameterError
from much_dataset.schema import GENERATION_ID, LABELS, STOPWORD_MASK, TOKEN_CHUNKS

__all__ = ["ClaimSet", "claims_from_claim_scores", "claims_from_result", "claims_from_token_scores"]


@dataclass(frozen=True)
class ClaimSet:
    """Claims as flat arrays of shape ``(n_claims,)``: ``claim_scores`` (uncertainties), ``hallucinated`` (label -1;
    None for unlabelled claims to filter), ``answer`` (the ``generation_id`` of each claim's answer) and ``groups``
    (column name -> each claim's value: ``lang``, ``generation_config``, ``article`` ...)."""

    claim_scores: np.ndarray
    answer: np.ndarray
    hallucinated: np.ndarray | None = None
    groups: Mapping[str, np.ndarray] = field(default_factory=dict)

    def __post_init__(self) -> None:
        n = len(self.claim_scores)
        arrays = {"answer": self.answer, **({"hallucinated": self.hallucinated} if self.hallucinated is not None
                                            else {}), **{f"groups[{k!r}]": v for k, v in self.groups.items()}}
        for name, values in arrays.items():
            if len(values) != n:
                raise InvalidParameterError(f"ClaimSet: {name} has {len(values)} values for {n} claim scores")
        bad = np.flatnonzero(~np.isfinite(np.asarray(self.claim_scores, dtype=np.float64)))
        if bad.size:
            raise InvalidParameterError(f"ClaimSet: generation_id {self.answer[bad[0]]!r}: claim score "
                                        f"{self.claim_scores[bad[0]]!r} is not finite ({bad.size} such claims)")

    def __len__(self) -> int:
        return len(self.claim_scores)

    def subset(self, mask: np.ndarray) -> ClaimSet:
        """The claims where ``mask`` is True."""
        return ClaimSet(claim_scores=self.claim_scores[mask], answer=self.answer[mask],
                        hallucinated=None if self.hallucinated is None else self.hallucinated[mask],
                        groups={k: v[mask] for k, v in self.groups.items()})

    def group_values(self, by: str | None) -> np.ndarray:
        """Each claim's value of column ``by`` as str (all ``""`` when ``by`` is None)."""
        if by is None:
            return np.full(len(self), "", dtype=object)
        if by not in self.groups:
            raise InvalidParameterError(f"conformal: by={by!r} is not a column of these claims (columns: "
                                        f"{sorted(self.groups) or 'none'}; pass groups={{{by!r}: ...}})")
        return np.asarray([str(v) for v in self.groups[by]], dtype=object)


def _per_answer(values: Sequence[Any], n_claims: np.ndarray) -> np.ndarray:
    return np.repeat(np.asarray(list(values), dtype=object), n_claims)


def _column(data: Any, name: str, *, required: bool = True) -> list[Any] | None:
    names = getattr(data, "column_names", None) or list(data)
    if name not in names:
        if required:
            raise InvalidParameterError(f"conformal: the data lack the column {name!r} (a MUCH split or export has it)")
        return None
    return list(data[name])


def claims_from_token_scores(token_scores: Any, data: Any, *, aggregation: Any = "product",
                             groups: Sequence[str] = ()) -> ClaimSet:
    """Token uncertainties -> claims, through :func:`much_metric.aggregate_claims` (the metric's aggregator, stopword
    rule and EOS-claim drop). ``data``: the answers' MUCH rows (a ``datasets.Dataset`` or a mapping of columns):
    ``generation_id``, ``token_chunks``, ``stopword_mask`` (optional), ``labels`` (optional: absent for answers to
    filter); ``token_scores``: per answer, one score per output token; ``groups``: columns to carry (``"lang"``)."""
    from much_metric.scoring import aggregate_claims

    ids = _column(data, GENERATION_ID)
    per_answer = aggregate_claims(token_scores, _column(data, TOKEN_CHUNKS), _column(data, STOPWORD_MASK,
                                  required=False), aggregation=aggregation, generation_ids=ids)
    return _assemble(per_answer, _column(data, LABELS, required=False), ids,
                     {name: _column(data, name) for name in groups})


def claims_from_claim_scores(claim_scores: Any, data: Any, *, groups: Sequence[str] = (),
                             drop_last_chunk: bool = True) -> ClaimSet:
    """Scores that are already one per claim (claim-level methods, ``@claim`` signals): per answer, one value per
    chunk of its ``token_chunks`` (EOS claim included, dropped as the metric drops it when ``drop_last_chunk``).
    ``data`` as in :func:`claims_from_token_scores`."""
    ids = _column(data, GENERATION_ID)
    chunks = _column(data, TOKEN_CHUNKS)
    per_answer = []
    for i, values in enumerate(claim_scores):
        values = np.asarray(values, dtype=np.float64)
        if len(values) != len(chunks[i]):
            raise InvalidParameterError(f"generation_id {ids[i]!r}: claim_scores has {len(values)} values but "
                                        f"token_chunks has {len(chunks[i])} chunks (one score per chunk, EOS claim "
                                        "included)")
        per_answer.append(values[:-1] if drop_last_chunk and len(values) else values)
    return _assemble(per_answer, _column(data, LABELS, required=False), ids,
                     {name: _column(data, name) for name in groups})


def _assemble(per_answer: list[np.ndarray], labels: Any, generation_ids: Sequence[str],
              groups: Mapping[str, Sequence[Any]] | None) -> ClaimSet:
    if len(per_answer) != len(generation_ids):
        raise InvalidParameterError(f"conformal: {len(per_answer)} answers but {len(generation_ids)} generation_ids")
    n_claims = np.array([len(v) for v in per_answer], dtype=np.int64)
    hallucinated = None
    if labels is not None:
        hallucinated = np.concatenate([np.asarray(row, dtype=np.int64)[: len(v)] == -1
                                       for row, v in zip(labels, per_answer, strict=True)] or [np.zeros(0, bool)])
    scores = np.concatenate(per_answer) if per_answer else np.zeros(0)
    columns = {name: _per_answer(values, n_claims) for name, values in (groups or {}).items()}
    return ClaimSet(claim_scores=scores, answer=_per_answer(generation_ids, n_claims),
                    hallucinated=hallucinated, groups=columns)


def claims_from_result(result: Any, generation_ids: Sequence[str], *,
                       articles: Sequence[str] | None = None) -> ClaimSet:
    """The claims of one row of an :class:`much_metric.report.EvaluationTable` (``much evaluate``'s loop: any
    signal, aggregated as the table's row says). ``generation_ids``: the table's, per dataset row; ``articles``:
    per dataset row, the Wikipedia article (``much_metric.learned.splits.article_title``) for splits by article."""
    ids = np.asarray(list(generation_ids), dtype=object)
    groups = {name: np.asarray(values, dtype=object) for name, values in result.claim_groups.items()}
    if articles is not None:
        groups["article"] = np.asarray(list(articles), dtype=object)[result.claim_rows]
    return ClaimSet(claim_scores=np.asarray(result.claim_scores, dtype=np.float64), answer=ids[result.claim_rows],
                    hallucinated=np.asarray(result.hallucinated, dtype=bool), groups=groups)
