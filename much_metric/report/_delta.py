"""The paired Δ column every table prints beside its marginal values, and the flags of rows a reader could over-read.

Marginal intervals that overlap say little about two methods scored on the same claims (their errors are
correlated): the Δ column gives each method's difference to one reference method on the claims every row covers,
with the percentile interval of that difference over the SAME bootstrap replicates and its two-sided p-value -- the
machinery of ``much evaluate --rank`` (:func:`much_metric.scoring.engine.bootstrap_distribution`,
:func:`much_metric.scoring.engine.differences_to_reference`), not a second bootstrap.

* **Reference** (``baseline=``, ``--baseline NAME``): a method of the table (its signal name, its display name or
  ``"<signal> (<aggregator>)"``); by default the best row by the metric, so the column reads "which rows are not
  separable from the best" (docs/decisions.md).
* **Flags** (:data:`FLAG_LEGEND`): ``floor`` -- the row is not above a floor on the same claims (the paired interval
  of its difference to a floor reaches 0, on the Δ metric or on average precision); ``ties`` -- a large share of its
  claims share one score (the trapezoid PR-AUC rewards ties; read AP and TPR at FPR <= 10 %); ``few`` -- the
  intervals are over fewer than :data:`MIN_INTERVAL_SAMPLES` samples.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from much_dataset.params import unknown_name
from much_metric.scoring import METRICS, Bootstrap, MetricComparison
from much_metric.scoring.engine import (
    bootstrap_distribution,
    curve_metrics,
    differences_to_reference,
    sort_claims,
)

__all__ = ["FLAG_LEGEND", "MIN_INTERVAL_SAMPLES", "TIE_SHARE", "DeltaColumn", "common_claims",
           "method_key", "paired_deltas", "resolve_method"]

#: Fewer samples than this: a bootstrap interval over them is flagged (``few``).
MIN_INTERVAL_SAMPLES = 30
#: A row whose largest group of equal claim scores holds at least this share of its claims is flagged (``ties``).
TIE_SHARE = 0.25
#: What each flag means, printed under the tables that show flags.
FLAG_LEGEND = {
    "floor": "≤ floor: X = not above that floor: on the Δ metric or on AP, the paired 95% interval of its "
             "difference to the floor on the same claims reaches 0 (without bootstrap: its value is not above it)",
    "ties": "ties N% = N% of its claims share one score; the trapezoid PR-AUC rewards ties, so read AP and TPR "
            "at FPR <= 10% instead",
    "few": f"n=N = its intervals are over N < {MIN_INTERVAL_SAMPLES} samples: too few to be read",
}


def method_key(result: Any) -> str:
    """A table row's method: ``"<signal name> (<aggregator>)"``, the signal name alone where nothing is aggregated
    (a claim-level signal, a floor). The key of :class:`DeltaColumn` and of :func:`much_metric.report.rank_methods`."""
    return result.signal_name if not result.aggregator else f"{result.signal_name} ({result.aggregator})"


def _group_key(method: str, group: str, value: Any) -> str:
    """A breakdown row's key in :attr:`DeltaColumn.flags`: its method's :func:`method_key` and its group
    (``"max_likelihood (product) lang=de"``)."""
    return f"{method} {group}={value}"


def common_claims(results: Sequence[Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[np.ndarray]]:
    """The claims every row of ``results`` covers: ``(rows, hallucinated, claim_sample, claim scores per row)``;
    ``rows`` the dataset rows, ``claim_sample`` each claim's index into ``rows`` (what the bootstrap resamples)."""
    common = set(results[0].claim_rows.tolist())
    for result in results[1:]:
        common &= set(result.claim_rows.tolist())
    if not common:
        raise ValueError("the methods share no sample: nothing to compare on the same claims")
    rows = np.array(sorted(common), dtype=np.int64)
    keep = np.isin(results[0].claim_rows, rows)
    hallucinated = results[0].hallucinated[keep]
    claim_sample = np.searchsorted(rows, results[0].claim_rows[keep])
    scores = [np.asarray(r.claim_scores, dtype=np.float64)[np.isin(r.claim_rows, rows)] for r in results]
    return rows, hallucinated, claim_sample, scores


def _largest_tie_share(claim_scores: np.ndarray) -> float:
    if claim_scores.size == 0:
        return 0.0
    _, counts = np.unique(claim_scores, return_counts=True)
    return float(counts.max() / claim_scores.size)


@dataclass(frozen=True)
class DeltaColumn:
    """Each method's paired difference to a reference method by one metric, and each row's flags.

    Attributes
    ----------
    metric : str
        A key of :data:`much_metric.scoring.METRICS`.
    baseline : str
        The reference method (:func:`method_key`); ``chosen`` says how: ``"named"`` (``baseline=``) or ``"best"``.
    n_samples, n_claims, n_resamples : int
        The samples (and claims) every row covers, which the differences are over; resamples (0: point values).
    rows : dict of str to MetricComparison
        Method -> its comparison to the reference (``a`` the method, ``b`` the reference).
    flags : dict of str to dict
        Row (methods and floors, by :func:`method_key`) -> ``{flag: detail}`` (:data:`FLAG_LEGEND`).
    """

    metric: str
    baseline: str
    chosen: str
    n_samples: int
    n_claims: int
    n_resamples: int
    rows: dict[str, MetricComparison] = field(default_factory=dict)
    flags: dict[str, dict[str, str]] = field(default_factory=dict)
    #: Intervals over fewer samples are flagged ``few`` (:data:`MIN_INTERVAL_SAMPLES`; for the tables printed
    #: elsewhere, the leaderboard's).
    MIN_INTERVAL_SAMPLES: ClassVar[int] = MIN_INTERVAL_SAMPLES

    def cell(self, method: str) -> str:
        """``+0.012 [0.004, 0.020] p=0.003``; ``ref.`` for the reference; ``""`` for a row without a comparison."""
        if method == self.baseline:
            return "ref."
        comparison = self.rows.get(method)
        if comparison is None or not np.isfinite(comparison.difference):
            return "" if comparison is None else "n/a"
        text = f"{comparison.difference:+.3f}"
        low, high = comparison.interval
        if self.n_resamples and np.isfinite(low):
            text += f" [{low:+.3f}, {high:+.3f}] p={comparison.p_value:.3f}"
        return text

    def flag_cell(self, method: str, group: str | None = None, value: Any = None) -> str:
        """The row's flags in a few words (``"≤ floor: length; ties 62%"``), ``""`` for none; with ``group`` and
        ``value``, those of the method's breakdown row for that group (``--by lang``: ``group="lang", value="de"``)."""
        key = method if group is None else _group_key(method, group, value)
        return "; ".join(self.flags.get(key, {}).values())

    def header(self) -> str:
        from much_metric.scoring import METRIC_TABLE

        label = {m.key: m.label for m in METRIC_TABLE}.get(self.metric, self.metric)
        return f"Δ {label} vs ref."

    def describe(self, display: Callable[[str], str] = str) -> str:
        """One line: what the column is, against which method, chosen how, over which samples."""
        from much_metric.scoring import METRIC_TABLE

        label = {m.key: m.label for m in METRIC_TABLE}.get(self.metric, self.metric)
        how = ("named by --baseline" if self.chosen == "named" else
               f"the best row by {label} (default; --baseline NAME names another)")
        what = (f"95% interval of the difference over {self.n_resamples} paired bootstrap resamples and its "
                "two-sided p-value" if self.n_resamples else "point differences (no bootstrap: no interval or p)")
        return (f"Δ {label} = each row minus ref. = {_label(self.baseline, display)}, {how}; on the "
                f"{self.n_samples:,} samples ({self.n_claims:,} claims) every row covers; {what}.")

    def legend(self) -> str:
        """The flags' legend, for the flags this table shows ("" when it shows none)."""
        return self.legend_of(flag for flags in self.flags.values() for flag in flags)

    @staticmethod
    def legend_of(shown: Iterable[str]) -> str:
        """The legend of the flags ``shown`` (keys of :data:`FLAG_LEGEND`), in its order (``""`` for none): for a
        table that shows flags of several columns (the leaderboard's)."""
        shown = set(shown)
        return " ".join(f"{text}." for flag, text in FLAG_LEGEND.items() if flag in shown)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (``--json``)."""
        return {"metric": self.metric, "baseline": self.baseline, "chosen": self.chosen,
                "n_samples": self.n_samples, "n_claims": self.n_claims, "n_resamples": self.n_resamples,
                "rows": {k: v.to_dict() for k, v in self.rows.items()}, "flags": self.flags}


def _label(method: str, display: Callable[[str], str] = str) -> str:
    """``display`` applied to the signal part of a :func:`method_key` (the aggregator kept)."""
    name, separator, rest = str(method).partition(" (")
    return display(name) + separator + rest


def resolve_method(baseline: str, keys: Sequence[str], display: Callable[[str], str] = str) -> str:
    """The method key ``baseline`` names: a key, a signal name, a display name (case-insensitive), or a name
    ``display`` labels as a row's method (``ktc``, as ``--signals`` asked it, for the row stored as
    ``ktc_RYxmoyp1awYParfCjjxgnQ``: both are ``KTC-4-0.3``)."""
    aliases: dict[str, str] = {}
    for key in keys:
        name = key.partition(" (")[0]
        for alias in (key, _label(key, display), name, display(name)):
            aliases.setdefault(alias.lower(), key)
    found = aliases.get(baseline.strip().lower()) or aliases.get(display(baseline.strip()).lower())
    if found is None:
        raise unknown_name("--baseline method", baseline, [_label(k, display) for k in keys],
                           aliases={alias: _label(key, display) for alias, key in aliases.items()})
    return found


def _flags(results: Sequence[Any], floors: Sequence[Any], point: Mapping[str, np.ndarray],
           replicates: Mapping[str, np.ndarray] | None, confidence_level: float) -> dict[str, dict[str, str]]:
    """Per row: ``floor`` (not above a floor on each metric of ``point``, paired), ``ties`` (:data:`FLAG_LEGEND`);
    :func:`paired_deltas` adds ``few``."""
    metrics = tuple(point)
    n_methods = len(results)
    out: dict[str, dict[str, str]] = {}
    for position, result in enumerate([*results, *floors]):
        flags: dict[str, str] = {}
        if position < n_methods:
            below = []
            for metric in metrics:
                for f, floor in enumerate(floors):
                    column = n_methods + f
                    diff = differences_to_reference(point[metric][[position, column]],
                                                    None if replicates is None else
                                                    replicates[metric][:, [position, column]], 1,
                                                    confidence_level=confidence_level)[0]
                    low = diff["interval"][0] if replicates is not None else diff["difference"]
                    if np.isfinite(diff["difference"]) and not low > 0:
                        below.append(floor.signal_name.removeprefix("floor: "))
            if below:  # short: the cell sits in a 120-column table; the legend says on which metrics
                flags["floor"] = "≤ floor: " + ", ".join(dict.fromkeys(below))
        share = _largest_tie_share(np.asarray(result.claim_scores))
        if result.level != "floor" and share >= TIE_SHARE:
            flags["ties"] = f"ties {share:.0%}"
        out[method_key(result)] = flags
    return out


def _group_flags(results: Sequence[Any]) -> dict[str, dict[str, str]]:
    """``few`` for the breakdown rows (``--by``) whose intervals are over fewer than :data:`MIN_INTERVAL_SAMPLES`
    samples: a group's intervals are over its own samples only, whatever the table's size."""
    return {_group_key(method_key(result), group, value): {"few": f"n={score.n_samples}"}
            for result in results if result.score is not None for group, groups in (result.score.by or {}).items()
            for value, score in groups.items() if score.intervals and score.n_samples < MIN_INTERVAL_SAMPLES}


def paired_deltas(table: Any, *, metric: str = "roc_auc", baseline: str | None = None,
                  bootstrap: Bootstrap | None = Bootstrap(),
                  display: Callable[[str], str] = str) -> DeltaColumn | None:
    """The :class:`DeltaColumn` of an :class:`~much_metric.report.EvaluationTable`: every method's paired difference
    to ``baseline`` (None: the best row by ``metric``) on the claims every row covers, and the rows' flags.

    ``display`` names the methods in messages and lets ``baseline`` be a display name. None for a table without a
    method. An unknown ``baseline`` raises :class:`much_dataset.params.UnknownNameError` with the closest names.
    """
    if metric not in METRICS:
        raise unknown_name("metric", metric, METRICS)
    results, floors = list(table.results), list(table.floors)
    if not results:
        return None
    keys = [method_key(r) for r in results]
    named = baseline is not None
    reference_key = resolve_method(baseline, keys, display) if named else None
    rows, hallucinated, claim_sample, scores = common_claims([*results, *floors])
    flag_metrics = tuple(dict.fromkeys((metric, "average_precision")))
    point = {m: np.array([curve_metrics(sort_claims(s, hallucinated))[m][0] for s in scores]) for m in flag_metrics}
    replicates = None
    if bootstrap is not None:
        distributions = bootstrap_distribution(scores, hallucinated, claim_sample, len(rows),
                                               n_resamples=bootstrap.n_resamples,
                                               random_state=bootstrap.random_state, metrics=flag_metrics)
        replicates = {m: np.stack([d[m] for d in distributions], axis=1) for m in flag_metrics}
    values = point[metric][:len(results)]
    if reference_key is None:
        finite = np.where(np.isfinite(values), values, -np.inf)
        reference_key = keys[int(np.argmax(finite))]  # the first of the best: file order breaks ties
    reference = keys.index(reference_key)
    confidence = bootstrap.confidence_level if bootstrap is not None else 0.95
    differences = differences_to_reference(values, None if replicates is None else
                                           replicates[metric][:, :len(results)], reference,
                                           confidence_level=confidence)
    flags = _flags(results, floors, point, replicates, confidence)
    if replicates is not None and len(rows) < MIN_INTERVAL_SAMPLES:
        for row_flags in flags.values():
            row_flags["few"] = f"n={len(rows)}"
    flags.update(_group_flags([*results, *floors]))
    return DeltaColumn(
        metric=metric, baseline=reference_key, chosen="named" if named else "best", n_samples=len(rows),
        n_claims=int(len(hallucinated)), n_resamples=bootstrap.n_resamples if bootstrap is not None else 0,
        rows={key: MetricComparison(**d) for key, d in zip(keys, differences, strict=True)},
        flags={key: row_flags for key, row_flags in flags.items() if row_flags})
