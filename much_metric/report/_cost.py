"""The report's cost and input-view sections: ROC-AUC against cost per claim with the Pareto front marked (from the
costs a signal file records, :mod:`much_metric.signals._cost`), and the degradation figure and table (each method
on input views of K candidates against itself on the 24 stored; the plain-JSON form of
:class:`much_metric.benchmark.DegradationResult`, which this layer reads without importing the benchmark)."""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from much_metric.signals import DeclaredCost, SignalCost, format_seconds

__all__ = ["cost_section", "degradation_figure", "degradation_section", "pareto_figure", "pareto_front"]


def pareto_front(costs: Sequence[float], values: Sequence[float]) -> np.ndarray:
    """Boolean mask of the points no other point beats: none is at most as costly and at least as good, and better
    in one of the two (lower cost, higher value). Points with a nan are never on the front.

    >>> from much_metric.report import pareto_front
    >>> pareto_front([1.0, 2.0, 3.0, 2.5], [0.6, 0.7, 0.65, 0.8]).tolist()
    [True, True, False, True]
    """
    cost, value = np.asarray(costs, dtype=np.float64), np.asarray(values, dtype=np.float64)
    finite = np.isfinite(cost) & np.isfinite(value)
    front = np.zeros(len(cost), dtype=bool)
    for i in np.flatnonzero(finite):
        others = finite & (np.arange(len(cost)) != i)
        beaten = others & (cost <= cost[i]) & (value >= value[i]) & ((cost < cost[i]) | (value > value[i]))
        front[i] = not beaten.any()
    return front


def _points(table: Any, display: Callable[[str], str]) -> list[dict[str, Any]]:
    """One point per signal with a cost (first aggregator): label, seconds per claim, ROC-AUC and its interval,
    declared or not, and ``group``: True when the table's paired Δ ROC-AUC column (``table.deltas``) cannot separate
    it from the reference (the best row by default: its paired interval of the difference holds 0), None when the
    table has no such column."""
    from much_metric.report._delta import method_key

    aggregators = list(dict.fromkeys(r.aggregator for r in table.results))
    deltas = getattr(table, "deltas", None)
    paired = deltas is not None and deltas.metric == "roc_auc" and deltas.n_resamples > 0
    points = []
    for result in table.results:
        cost = table.costs.get(result.signal_name)
        if cost is None or result.aggregator != aggregators[0] or result.score is None:
            continue
        key = method_key(result)
        comparison = deltas.rows.get(key) if paired else None
        group = None if not paired else key == deltas.baseline or (
            comparison is not None and comparison.interval[0] <= 0 <= comparison.interval[1])
        points.append({"label": display(result.signal_name), "seconds": cost.seconds_per_claim,
                       "roc_auc": result.score.roc_auc, "interval": (result.score.intervals or {}).get("roc_auc"),
                       "declared": isinstance(cost, DeclaredCost), "cost": cost, "group": group})
    return points


def pareto_figure(points: Sequence[Mapping[str, Any]]) -> Any:
    """ROC-AUC against wall seconds per claim (log scale), with each point's 95% interval (``interval``); the Pareto
    front joined and ringed; declared costs hollow; the points whose ``group`` is True (not separable from the
    reference by the paired test) inside one shaded band."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9, 5.5))
    ax = fig.subplots()
    seconds = np.array([p["seconds"] for p in points], dtype=np.float64)
    roc = np.array([p["roc_auc"] for p in points], dtype=np.float64)
    front = pareto_front(seconds, roc)
    grouped = [k for k, p in enumerate(points) if p.get("group") and np.isfinite(roc[k]) and np.isfinite(seconds[k])]
    if len(grouped) > 1:  # the methods no paired test separates from the reference: one band, not a ranking
        ax.axhspan(roc[grouped].min(), roc[grouped].max(), color="#f2c14e", alpha=0.25, zorder=1,
                   label="not separable from the reference (paired 95% interval of Δ ROC-AUC holds 0)")
    for k, point in enumerate(points):
        color = f"C{k % 10}"
        if not (np.isfinite(seconds[k]) and np.isfinite(roc[k])):
            continue
        interval = point.get("interval")
        if interval is not None and all(np.isfinite(interval)):
            ax.errorbar([seconds[k]], [roc[k]], yerr=[[roc[k] - interval[0]], [interval[1] - roc[k]]], fmt="none",
                        ecolor=color, elinewidth=0.9, capsize=3, zorder=2)
        ax.scatter([seconds[k]], [roc[k]], s=60 if front[k] else 30, zorder=3,
                   facecolors="none" if point["declared"] else color, edgecolors="black" if front[k] else color,
                   linewidths=1.6 if front[k] else 1.0)
        ax.annotate(point["label"] + (" (declared)" if point["declared"] else ""), (seconds[k], roc[k]),
                    textcoords="offset points", xytext=(5, 4), fontsize=7, color=color)
    order = np.flatnonzero(front)[np.argsort(seconds[front])]
    if order.size:
        ax.step(seconds[order], roc[order], where="post", color="black", linewidth=1.0, linestyle="--",
                label="Pareto front (no method cheaper and better)", zorder=2)
    if order.size or len(grouped) > 1:
        ax.legend(fontsize=8, loc="lower right")
    ax.set_xscale("log")
    shown = np.isfinite(seconds) & np.isfinite(roc)
    if shown.any():  # every point inside, labels included (autoscaling leaves the extreme ones on the frame)
        bounds = [b for p in points for b in (p.get("interval") or ()) if np.isfinite(b)]
        low, high = min([roc[shown].min(), *bounds]), max([roc[shown].max(), *bounds])
        pad = max(0.01, 0.1 * (high - low))
        ax.set_ylim(low - pad, high + pad)
        ax.set_xlim(seconds[shown].min() / 2, seconds[shown].max() * 4)
    ax.set(xlabel="wall seconds per claim (log scale; measured unless marked declared)", ylabel="ROC-AUC",
           title="What a method costs and what it gets: ROC-AUC against cost per claim")
    ax.grid(alpha=0.3, which="both")
    fig.tight_layout()
    return fig


def _machine(cost: Any) -> str:
    if isinstance(cost, DeclaredCost):
        return cost.machine or "not declared"
    machines = [f"{m.get('processor') or m.get('machine', '?')}, {m.get('threads', {}).get('cpus_available', '?')} "
                f"CPUs" for m in cost.machines]
    return "; ".join(dict.fromkeys(machines)) or "not recorded"


def cost_section(table: Any, figures: Any, display: Callable[[str], str]) -> str:
    """The "Cost per claim" section: the figure and a table of what each signal's file records ("" without
    costs)."""
    points = _points(table, display)
    if not points:
        return ""
    front = pareto_front([p["seconds"] for p in points], [p["roc_auc"] for p in points])
    png = figures.save(pareto_figure(points), "cost_pareto")
    caption = ("ROC-AUC (bars: 95% bootstrap interval) against wall seconds per claim; dashed and ringed: the Pareto "
               "front; shaded: the methods the paired Δ ROC-AUC column cannot separate from its reference. Measured "
               "costs come from the signal files (much run --out records them); hollow points are costs a submitter "
               "declared.")
    rows = []
    for point, best in zip(points, front, strict=True):
        cost = point["cost"]
        if isinstance(cost, SignalCost):
            extra = (f"{format_seconds(cost.cpu_seconds / cost.n_claims) if cost.n_claims else '—'}",
                     f"{cost.forward_passes:,} / {cost.samples:,} / {cost.model_calls:,}",
                     "stored 24" if cost.top_k is None else f"top-{cost.top_k}", "measured")
        else:
            extra = ("—", html.escape(cost.note or "—"), "—", "declared")
        rows.append(f"<tr><td class='name'>{html.escape(point['label'])}</td>"
                    f"<td>{format_seconds(point['seconds'])}</td><td>{extra[0]}</td><td>{extra[1]}</td>"
                    f"<td>{extra[2]}</td><td>{html.escape(_machine(cost))}</td><td>{extra[3]}</td>"
                    f"<td>{point['roc_auc']:.3f}</td><td>{'yes' if best else ''}</td>"
                    + ("" if point["group"] is None else f"<td>{'yes' if point['group'] else ''}</td>") + "</tr>")
    return ("<h2>Cost per claim</h2>"
            f"<figure><img alt='{html.escape(caption)}' src='data:image/png;base64,{png}'>"
            f"<figcaption>{html.escape(caption)}</figcaption></figure>"
            "<table><tr><th>method</th><th>wall / claim</th><th>CPU / claim</th><th>forward passes / samples / "
            "model calls</th><th>input view</th><th>machine</th><th>cost</th><th>ROC-AUC</th><th>Pareto</th>"
            + ("" if points[0]["group"] is None else "<th>not separable from ref.</th>") + "</tr>"
            + "".join(rows) + "</table>")


_LABELS = {"roc_auc": "ROC-AUC", "prr": "PRR"}


def degradation_figure(result: Mapping[str, Any]) -> Any:
    """ΔROC-AUC and ΔPRR against the view's K (one line per method, 95% paired bootstrap bars); filled markers:
    the method reads at most K candidates (exact); hollow: zero-filled."""
    from matplotlib import colormaps
    from matplotlib.figure import Figure

    metrics = list(result["metrics"])
    ks = list(result["top_ks"])
    fig = Figure(figsize=(13, 6.5))
    axes = fig.subplots(1, len(metrics), squeeze=False)[0]
    positions = {k: i for i, k in enumerate(ks)}
    markers = "osD^v<>ph*"
    palette = colormaps["tab20"]  # 20 distinct colours: the probability methods and a few detectors
    for ax, metric in zip(axes, metrics, strict=True):
        for n, row in enumerate(result["rows"]):
            color, marker = palette(n % 20), markers[(n // 20) % len(markers)]
            shift = (n - (len(result["rows"]) - 1) / 2) * 0.012  # bars of one K side by side, not on top
            cells = [c for c in row["cells"] if c["how"] != "not run" and c["deltas"].get(metric) is not None]
            x = np.array([positions[c["top_k"]] + shift for c in cells])
            y = np.array([c["deltas"][metric] for c in cells], dtype=np.float64)
            bounds = np.array([c["intervals"].get(metric) or [np.nan, np.nan] for c in cells], dtype=np.float64)
            bounds = bounds.reshape(-1, 2) if bounds.size else np.zeros((0, 2))
            if not len(x):
                continue
            ax.plot(x, y, color=color, linewidth=1.0, alpha=0.8, label=row["method"])
            errors = np.abs(np.stack([y - bounds[:, 0], bounds[:, 1] - y])) if len(y) else None
            ax.errorbar(x, y, yerr=np.nan_to_num(errors), fmt="none", ecolor=color, elinewidth=0.8, capsize=2)
            exact = np.array([c["how"] == "exact" for c in cells])
            ax.scatter(x[exact], y[exact], color=color, marker=marker, s=22, zorder=3)
            ax.scatter(x[~exact], y[~exact], facecolors="white", edgecolors=color, marker=marker, s=22, zorder=3)
        ax.axhline(0.0, color="#999", linewidth=0.8)
        ax.set_xticks(range(len(ks)), [f"top-{k}" for k in ks])
        ax.set(xlabel="input view (candidates per token the API returns)",
               ylabel=f"Δ{_LABELS.get(metric, metric)} vs the 24 stored", title=f"Δ{_LABELS.get(metric, metric)}")
        ax.grid(alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    rows = math.ceil(len(labels) / 3)
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=7, frameon=False)
    fig.suptitle("What each method loses on less input (filled: reads at most K, exact; hollow: zero-filled; "
                 "bars: 95% paired bootstrap)", fontsize=10)
    fig.tight_layout(rect=(0, min(0.45, 0.035 * rows + 0.02), 1, 1))
    return fig


def degradation_section(result: Mapping[str, Any], figures: Any) -> str:
    """The "Input views" section: the figure and one table per metric."""
    png = figures.save(degradation_figure(result), "degradation")
    caption = ("Each method on the top-K view minus itself on the 24 stored candidates, same claims; a view = the K "
               "most probable candidates and the sampled token's own probability (top_logprobs K).")
    parts = ["<h2>Input views: degradation against the 24 stored candidates</h2>",
             f"<figure><img alt='{html.escape(caption)}' src='data:image/png;base64,{png}'>"
             f"<figcaption>{html.escape(caption)}</figcaption></figure>"]
    ks = [k for k in result["top_ks"] if k < 24]
    for metric in result["metrics"]:
        label = _LABELS.get(metric, metric)
        head = "".join(f"<th>Δ{label} top-{k}</th>" for k in ks)
        parts.append(f"<table><tr><th>method</th><th>reads</th>{head}<th>{label} (24)</th><th>cost / claim</th></tr>")
        for row in result["rows"]:
            cells = []
            by_k = {c["top_k"]: c for c in row["cells"]}
            for k in ks:
                cell = by_k[k]
                if cell["how"] == "not run":
                    cells.append(f"<td>{html.escape(cell['need'])}</td>")
                    continue
                delta, interval = cell["deltas"].get(metric), cell["intervals"].get(metric)
                text = "nan" if delta is None else f"{delta:+.3f}"
                if interval and None not in interval:
                    text += f"<br><span class='ci'>[{interval[0]:+.3f}, {interval[1]:+.3f}]</span>"
                cells.append(f"<td>{text}{'' if cell['how'] == 'exact' else ' *'}</td>")
            reference = by_k[24]
            value = reference["values"].get(metric)
            parts.append(f"<tr><td class='name'>{html.escape(row['method'])}</td><td>top-{row['top_k']}</td>"
                         + "".join(cells) + f"<td>{'nan' if value is None else f'{value:.3f}'}</td>"
                         f"<td>{format_seconds(reference['seconds_per_claim'])}</td></tr>")
        parts.append("</table>")
    parts.append("<p class='note'>* zero-filled: the method reads more candidates than the view holds; those the "
                 "view lacks count as probability 0 (docs/methods.md#input-views). Without a mark: the method reads "
                 "at most K candidates and the view gives exactly its numbers.</p>")
    return "\n".join(parts)
