"""The tables ``much evaluate`` prints: the metrics of every signal (and floors), the leaderboard with its intervals
and p-values and the paper's reference rows, calibration and Mu-SHROOM span scores. Pure formatting of results
computed in :mod:`much_metric.cli.evaluate`."""

from __future__ import annotations

import argparse
from typing import Any

from much_metric.cli._text import text_table

__all__ = ["format_calibration", "format_rank", "format_spans", "format_table", "metric_columns", "published_rows",
           "runtime_text", "versus_best"]


def metric_columns() -> list[Any]:
    from much_metric.scoring import METRIC_TABLE

    return list(METRIC_TABLE)


def format_table(table: Any, trained_as: dict[str, str] | None = None, rank: str | None = None,
                 deltas: Any = None) -> str:
    """``trained_as``: signal name -> what its row adds to the display name (a learned signal's detector, protocol and
    the rows it was scored on, from its file's metadata); ``rank``: a metric key (``--rank``) the methods are sorted
    by, best first (nan last; the floors stay below them); None keeps the order of the signal files.
    An unpaired table (``--no-paired``) names each row's sample count: the rows are on different samples.
    The cost per claim each signal's file records (``table.costs``) follows the counts; ``deltas`` (a
    :class:`much_metric.report.DeltaColumn`) adds each row's paired difference to the reference method and its
    flags."""
    from much_metric.baselines.registry import display_name
    from much_metric.cli._views import cost_cell
    from much_metric.report import format_metric, method_key

    trained_as = trained_as or {}

    metrics = metric_columns()
    header = ["method", "aggregator", *(m.label for m in metrics), "claims", "halluc.", "coverage", "cost/claim",
              *([deltas.header(), "flags"] if deltas is not None else [])]
    rows = []
    results = list(table.results)
    if rank is not None:
        import math

        def key(result: Any) -> float:
            value = float(getattr(result.score, rank, math.nan))
            return -value if math.isfinite(value) else math.inf

        results.sort(key=key)  # stable: ties keep the files' order
    unpaired = table.pairing is not None and not table.pairing.paired
    for result in [*results, *table.floors]:
        name = f"[{result.signal_name}]" if result.level == "floor" else display_name(result.signal_name)
        if result.signal_name in trained_as:
            name = f"{name} ({trained_as[result.signal_name]})"
        if unpaired:
            name = f"{name} [{len(result.samples)} samples]"
        score = result.score
        cost = "" if result.level == "floor" else cost_cell(table.costs.get(result.signal_name))
        shown = "claim-level" if result.level == "claim" else result.aggregator or "—"  # claim-level: no aggregator
        key = method_key(result)
        paired = [] if deltas is None else [deltas.cell(key), deltas.flag_cell(key)]
        rows.append([name, shown, *(format_metric(score, m.key) for m in metrics),
                     str(score.n_claims), str(score.n_hallucinated), f"{result.coverage:.1%}", cost, *paired])
        for group, groups in (score.by or {}).items():
            for value, group_score in groups.items():
                rows.append([f"  {group}={value}", "", *(format_metric(group_score, m.key) for m in metrics),
                             str(group_score.n_claims), str(group_score.n_hallucinated), "", "",
                             *([] if deltas is None else ["", deltas.flag_cell(key, group, value)])])
    return text_table(rows, header, keep=2)


def runtime_text(seconds: float, relative: float | None) -> str:
    """``0.017s (0.00031%)``: the measured seconds and their share of LLM generation."""
    if relative:
        from much_metric.baselines.runtime import format_runtime

        return format_runtime(seconds, seconds / relative)
    return f"{seconds:.3g}s"


def format_rank(board: Any, published: list[list[str]]) -> str:
    """The ranking (a :class:`much_metric.report.Ranking`) as the terminal table, then its p-values."""
    import math

    from much_metric.baselines.registry import display_method
    from much_metric.scoring import MIN_RANK_RESAMPLES
    from much_metric.scoring.engine import shown_ranks

    resampled = bool(board.n_resamples)
    header = ["rank", "method", board.metric, *(["95% interval", "P(rank)", "Δ vs 1. [95%] p"] if resampled else []),
              "lang gap (best-worst)", "runtime (rel.)"]
    rows = []
    # ranks as the values are shown (3 decimals): two rows printed 0.623 share a rank
    shown = shown_ranks([row.value for row in board.rows]) if board.rows else []
    for row, rank in zip(board.rows, shown, strict=True):
        gap = "n/a" if math.isnan(row.lang_gap) else \
            f"{row.lang_gap:.3f} ({row.lang_best}-{row.lang_worst})"
        runtime = "n/a" if row.seconds is None else runtime_text(row.seconds, row.relative_runtime)
        random_columns = []
        if resampled:
            low, high = row.interval
            random_columns = [f"[{low:.3f}, {high:.3f}]", f"{row.rank_probability:.2f}", versus_best(row)]
        rows.append([str(rank), display_method(row.method), f"{row.value:.3f}", *random_columns, gap,
                     runtime])
    for name, value in board.floors.items():
        rows.append(["", f"[{name}]", f"{value:.3f}", *([""] * (len(header) - 3))])
    rows.extend([*row[:5], "", *row[5:]] if resampled else [*row[:3], *row[5:]] for row in published)
    names = [display_method(row.method) for row in board.rows]
    what = (f"{board.n_resamples} paired bootstrap resamples" if resampled else
            f"no bootstrap (--bootstrap 0): ranked by the point values; no interval, P(rank) or p-value, which need "
            f"at least {MIN_RANK_RESAMPLES} resamples (--bootstrap {MIN_RANK_RESAMPLES})")
    lines = [f"leaderboard by {board.metric} on the {board.n_samples} samples ({board.n_claims} claims) "
             f"every method covers; {what}", text_table(rows, header)]
    if len(names) > 1 and resampled:
        p = board.p_values
        short = [str(k + 1) for k in range(len(names))]
        matrix = [[f"{k + 1}. {name}", *("—" if i == k else f"{p[k][i]:.3f}" for i in range(len(names)))]
                  for k, name in enumerate(names)]
        lines += ["pairwise paired-bootstrap p-values (two-sided, no difference):", text_table(matrix, ["", *short])]
    return "\n".join(lines)


def versus_best(row: Any) -> str:
    """A ranked row's paired difference to the first row: ``-0.006 [-0.020, +0.005] p=0.498``; ``—`` for the
    first row itself."""
    comparison = row.versus_best
    if comparison is None or comparison.difference == 0 and comparison.interval == (0.0, 0.0):
        return "—"
    low, high = comparison.interval
    return f"{comparison.difference:+.3f} [{low:+.3f}, {high:+.3f}] p={comparison.p_value:.3f}"


def published_rows(args: argparse.Namespace, metric: str) -> list[list[str]]:
    from much_metric.report.published import (
        PAPER_GENERATION_SECONDS,
        PAPER_TABLE7,
        PAPER_TABLE7_SET,
        REFERENCE_NOTEBOOK,
        is_much,
    )

    if not is_much(args.source):
        return []
    rows = []
    column = {"roc_auc": 3, "pr_auc": 4}.get(metric)
    for label, _, seconds, roc, pr, in3 in PAPER_TABLE7:
        value = {3: roc, 4: pr}.get(column)
        rows.append(["", f"[paper table {'3/7' if in3 else '7'}, {PAPER_TABLE7_SET}] {label}",
                     "—" if value is None else f"{value:.3f}", "", "", "",
                     f"{seconds:,.0f}s ({100 * seconds / PAPER_GENERATION_SECONDS:.3g}%)"])
    for label, subset, roc, ppr in REFERENCE_NOTEBOOK:
        value = {"roc_auc": roc, "partial_pr_auc_recall_20": ppr}.get(metric)
        rows.append(["", f"[reference notebook, {subset}] {label}", "—" if value is None else f"{value:.4f}",
                     "", "", "", ""])
    return rows


def format_calibration(results: list[Any]) -> str:
    from much_metric.baselines.registry import display_name

    header = ["method", "aggregator", "fit claims", "measured claims", "ECE", "95% interval", "Brier",
              "Brier (prevalence)"]
    rows = []
    for r in results:
        interval = "" if r.ece_interval is None else f"[{r.ece_interval[0]:.3f}, {r.ece_interval[1]:.3f}]"
        rows.append([display_name(r.signal_name), r.aggregator or "—", str(r.n_fit_claims), str(r.n_eval_claims),
                     f"{r.ece:.3f}", interval, f"{r.brier:.3f}", f"{r.brier_prevalence:.3f}"])
    return text_table(rows, header, keep=2)


def format_spans(spans: dict[str, Any]) -> str:
    from much_metric.baselines.registry import display_method
    from much_metric.report import spans_flags

    langs = sorted({lang for m in [*spans["methods"].values(), *spans["baselines"].values()]
                    for lang in m["per_language"]})
    flags = spans_flags(spans)
    header = ["method", "threshold", "IoU", "rho", *(f"IoU {lang}" for lang in langs),
              *(f"rho {lang}" for lang in langs), *(["flags"] if flags else [])]
    rows = []
    for key, name, m in [*((k, display_method(k), v) for k, v in spans["methods"].items()),
                         *((k, f"[{k}]", v) for k, v in spans["baselines"].items())]:
        per = m["per_language"]
        rows.append([name, f"{m['threshold']:.4g}" if "threshold" in m else "", f"{m['iou']:.3f}", f"{m['cor']:.3f}",
                     *(f"{per[lang]['iou']:.3f}" if lang in per else "" for lang in langs),
                     *(f"{per[lang]['cor']:.3f}" if lang in per else "" for lang in langs),
                     *([flags.get(key, "")] if flags else [])])
    note = ("\nflags: a method at the mark-all baseline marks (almost) every claim at its fitted threshold: its "
            "spans say nothing beyond 'everything is suspect'") if flags else ""
    return (f"Mu-SHROOM span scores on {spans['n_items']} items (threshold and probability map fitted on "
            f"{spans['n_fit_items']} others)\n" + text_table(rows, header) + note)
