"""``much evaluate --rank``: methods ranked by one metric on the claims they all cover.

Every evaluated (signal, aggregator) pair is a method. They are compared on the samples every method covers (a
paired comparison needs the same claims), with the same seeded bootstrap replicates over samples: the interval of
each value, the probability that a method holds its rank (Mu-SHROOM appendix C) and two-sided paired-bootstrap
p-values for every pair come from :func:`much_metric.scoring.rank_claim_scores`. Besides: the gap between the method's
best and worst language (point values; its own column) and the method's runtime relative to LLM generation when
``timings`` gives its seconds.

Without enough resamples nothing random is reported: ``bootstrap=None`` ranks by the point values alone (no
interval, rank probability or p-value), and a :class:`~much_metric.scoring.Bootstrap` of fewer than
``MIN_RANK_RESAMPLES`` resamples cannot be built (the one resample rule, :data:`much_metric.scoring.RESAMPLES`).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from much_dataset.params import InvalidParameterError, unknown_name
from much_metric.report._delta import method_key
from much_metric.report._evaluation import EvaluationTable
from much_metric.scoring import METRICS, Bootstrap, MetricComparison, rank_claim_scores
from much_metric.scoring.engine import curve_metrics, sort_claims

__all__ = ["RankedMethod", "Ranking", "rank_methods"]


class _ReadsLikeADict:
    """``ranking["rows"]`` / ``row["value"]``: the dict :func:`rank_methods` returned before it returned a
    :class:`Ranking`, still readable (with a ``FutureWarning``) for code written against it."""

    def __getitem__(self, key: str) -> Any:
        if key not in self.__dataclass_fields__:  # type: ignore[attr-defined]
            raise KeyError(key)
        warnings.warn(f"{type(self).__name__}[{key!r}] is deprecated: rank_methods returns a {type(self).__name__}; "
                      f"read its attribute .{key}", FutureWarning, stacklevel=2)
        value = getattr(self, key)
        return [asdict(row) for row in value] if key == "rows" else value


@dataclass(frozen=True)
class RankedMethod(_ReadsLikeADict):
    """One method of a :class:`Ranking`, best first.

    Attributes
    ----------
    method : str
        ``"<signal name> (<aggregator>)"`` (the signal name alone for a claim-level signal).
    value : float
        The metric on the claims every method covers.
    interval : (float, float) or None
        Its paired-bootstrap percentile interval (None without bootstrap).
    rank : int
        1 = best (competition ranking: tied methods share the best rank).
    rank_probability : float or None
        Probability that the method holds its rank over the bootstrap replicates (None without bootstrap).
    per_lang : dict of str to float
        The metric per language; ``lang_gap`` = best minus worst, ``lang_best`` / ``lang_worst`` their names.
    seconds, relative_runtime : float or None
        The method's measured seconds and their share of LLM generation, when timings were given.
    versus_best : MetricComparison or None
        Its paired difference to the first row (same replicates: interval and two-sided p-value); None without
        bootstrap.
    """

    method: str
    value: float
    interval: tuple[float, float] | None
    rank: int
    rank_probability: float | None
    per_lang: dict[str, float]
    lang_gap: float
    lang_best: str | None
    lang_worst: str | None
    seconds: float | None
    relative_runtime: float | None
    versus_best: MetricComparison | None = None


@dataclass(frozen=True)
class Ranking(_ReadsLikeADict):
    """Methods ranked by one metric on the claims they all cover (:func:`rank_methods`).

    Attributes
    ----------
    metric : str
        The metric (a key of :data:`much_metric.scoring.METRICS`; higher is better).
    rows : tuple of RankedMethod
        Best first.
    p_values : ndarray of shape (n, n) or None
        Two-sided paired-bootstrap p-values of "no difference", in the order of ``rows`` (None without bootstrap).
    rank_probabilities : ndarray of shape (n, n) or None
        ``[m, r]``: the fraction of replicates in which method ``m`` has rank ``r`` (None without bootstrap).
    n_samples, n_claims : int
        The samples (and their claims) every method covers: what the ranking is computed on.
    n_resamples : int
        Bootstrap resamples (0: ranked by the point values alone).
    floors : dict of str to float
        The floors' values of the metric on the same claims.
    generation : dict or None
        The LLM generation time the relative runtimes are shares of: ``{"seconds", "source"}`` (a source starting
        with "estimate" is an estimate, not a measurement); None when no runtime is known.
    """

    metric: str
    rows: tuple[RankedMethod, ...]
    p_values: np.ndarray | None
    rank_probabilities: np.ndarray | None
    n_samples: int
    n_claims: int
    n_resamples: int
    floors: dict[str, float] = field(default_factory=dict)
    generation: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: every field, rows as dicts, arrays as nested lists."""
        out = {name: getattr(self, name) for name in self.__dataclass_fields__}
        out["rows"] = [asdict(row) for row in self.rows]
        for name in ("p_values", "rank_probabilities"):
            if out[name] is not None:
                out[name] = np.asarray(out[name]).tolist()
        return out

def _point_board(scores: dict[str, np.ndarray], hallucinated: np.ndarray, metric: str) -> dict[str, Any]:
    """The leaderboard's ranking by point values alone (competition ranks, nan last), nothing random."""
    names = list(scores)
    point = np.array([curve_metrics(sort_claims(scores[n], hallucinated))[metric][0] for n in names])
    key = np.where(np.isnan(point), -np.inf, point)
    competition = np.sum(key[None, :] > key[:, None], axis=1)  # methods strictly better
    order = np.argsort(competition, kind="stable")
    rows = [{"method": names[i], "value": float(point[i]), "interval": None, "rank": int(competition[i]),
             "rank_probability": None} for i in order]
    return {"rows": rows, "rank_probabilities": None, "p_values": None}


def rank_methods(table: EvaluationTable, metric: str, *, bootstrap: Bootstrap | None = Bootstrap(),
                 timings: Mapping[str, Any] | None = None, generation_seconds: float | None = None) -> Ranking:
    """Leaderboard of the table's methods by ``metric`` (higher is better), with paired bootstrap resamples of the
    common samples (``bootstrap``: count, interval level, seed).

    ``bootstrap=None`` ranks by the point values alone (``interval``, ``rank_probability``, ``p_values`` and
    ``rank_probabilities`` are then None); otherwise ``bootstrap.n_resamples`` is at least
    :data:`MIN_RANK_RESAMPLES`.

    Returns
    -------
    Ranking
        :class:`RankedMethod` rows best first (value, interval, rank (1 = best), rank probability, per-language
        values and gap, seconds and relative runtime), the pairwise p-values in the rows' order, the samples and
        claims compared, and the floors' values on the same claims.
    """
    if metric not in METRICS:
        raise unknown_name("--rank metric", metric, METRICS)
    if bootstrap is not None and not isinstance(bootstrap, Bootstrap):  # a Bootstrap's count obeys RESAMPLES
        raise InvalidParameterError(f"rank_methods: bootstrap must be a much_metric.scoring.Bootstrap or None, got "
                                    f"{bootstrap!r}")
    results = table.results
    if not results:
        raise ValueError("no method to rank")
    common = set(results[0].claim_rows.tolist())
    for result in results[1:]:
        common &= set(result.claim_rows.tolist())
    if not common:
        raise ValueError("the methods share no sample: nothing to rank on the same claims")
    rows = np.array(sorted(common), dtype=np.int64)
    sample_of_row = {row: k for k, row in enumerate(rows.tolist())}
    names, scores = [], {}
    keep = np.isin(results[0].claim_rows, rows)
    hallucinated = results[0].hallucinated[keep]
    claim_rows = results[0].claim_rows[keep]
    for result in results:
        name = method_key(result)
        names.append(name)
        scores[name] = result.claim_scores[np.isin(result.claim_rows, rows)]
    if bootstrap is not None:
        board = rank_claim_scores(scores, hallucinated, np.array([sample_of_row[r] for r in claim_rows.tolist()]),
                                  len(rows), metric=metric, bootstrap=bootstrap)
    else:
        board = _point_board(scores, hallucinated, metric)
    langs = np.asarray(table.langs, dtype=object)[claim_rows] if table.langs else np.full(len(claim_rows), "?")
    lang_values = sorted(set(langs.tolist()))
    by_name = {method_key(r): r for r in results}
    out_rows = []
    for row in board["rows"]:
        s = scores[row["method"]]
        per_lang = {}
        for lang in lang_values:
            mask = langs == lang
            per_lang[lang] = float(curve_metrics(sort_claims(s[mask], hallucinated[mask]))[metric][0])
        finite = {k: v for k, v in per_lang.items() if np.isfinite(v)}
        best = max(finite, key=finite.get) if finite else None
        worst = min(finite, key=finite.get) if finite else None
        signal = by_name[row["method"]].signal_name
        seconds = None
        if timings and signal in timings and isinstance(timings[signal], Mapping):
            value = timings[signal].get("seconds")
            seconds = float(value) if value is not None and np.isfinite(float(value)) else None
        relative = seconds / generation_seconds if seconds is not None and generation_seconds else None
        out_rows.append(RankedMethod(
            method=row["method"], value=float(row["value"]),
            interval=None if row["interval"] is None else (float(row["interval"][0]), float(row["interval"][1])),
            rank=int(row["rank"]) + 1,
            rank_probability=None if row["rank_probability"] is None else float(row["rank_probability"]),
            per_lang=per_lang, lang_gap=finite[best] - finite[worst] if finite else float("nan"), lang_best=best,
            lang_worst=worst, seconds=seconds, relative_runtime=relative,
            versus_best=MetricComparison(**row["versus_best"]) if row.get("versus_best") else None))
    floors = {}
    for floor in table.floors:
        mask = np.isin(floor.claim_rows, rows)
        floors[floor.signal_name] = float(curve_metrics(sort_claims(floor.claim_scores[mask],
                                                                    floor.hallucinated[mask]))[metric][0])
    return Ranking(metric=metric, rows=tuple(out_rows), p_values=board["p_values"],
                   rank_probabilities=board["rank_probabilities"], n_samples=len(rows), n_claims=int(len(hallucinated)),
                   n_resamples=bootstrap.n_resamples if bootstrap else 0, floors=floors)
