"""Self-contained HTML report of a MUCH evaluation: metric tables with bootstrap intervals and ROC / PR figures.

Figures are drawn with matplotlib's Agg backend (imported lazily) and embedded as base64 PNGs, so the page is one
file with no external resource. Curves: one figure per aggregator comparing the methods (signals), one per method
comparing aggregators, and one per method and breakdown (e.g. language) with one curve per group.
"""

from __future__ import annotations

import base64
import html
import io
import math
import os
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from much_metric.scoring import METRIC_TABLE, METRICS, pr_curve, roc_curve
from much_metric.signals._evaluation import EvaluationTable, SignalResult

__all__ = ["render_report", "write_report", "format_metric"]

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
th { background: #f2f2f2; } td.name { text-align: left; font-family: monospace; }
figure { display: inline-block; margin: 0.5em; } figcaption { font-size: 0.85em; color: #555; }
.note { color: #555; font-size: 0.9em; max-width: 60em; }
"""
_SHORT = {metric.key: metric.label for metric in METRIC_TABLE}


def format_metric(metrics: dict[str, Any], key: str) -> str:
    """``0.712 [0.690, 0.735]`` (value and bootstrap interval when available)."""
    value = metrics.get(key, float("nan"))
    text = "nan" if value is None or math.isnan(value) else f"{value:.3f}"
    interval = metrics.get("intervals", {}).get(key)
    if interval is not None:
        low, high = interval
        text += " —" if math.isnan(low) else f" [{low:.3f}, {high:.3f}]"
    return text


def _figure(curves: Sequence[tuple[str, np.ndarray, np.ndarray]], title: str) -> str:
    """ROC and PR panels for the given (label, claim_scores, hallucinated) curves; returns a base64 PNG."""
    # A bare Figure draws with the Agg canvas without touching pyplot's global backend or figure registry.
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 4.2))
    roc_ax, pr_ax = fig.subplots(1, 2)
    for label, scores, positive in curves:
        if positive.all() or not positive.any():
            continue  # a single class has no curve
        fpr, tpr = roc_curve(scores, positive)
        recall, precision = pr_curve(scores, positive)
        roc_ax.plot(fpr, tpr, label=label, linewidth=1.3)
        pr_ax.step(recall, precision, where="pre", label=label, linewidth=1.3)
    roc_ax.plot([0, 1], [0, 1], color="#999", linestyle=":", linewidth=1)
    if curves:
        base_rate = float(np.mean(np.concatenate([c[2] for c in curves])))
        pr_ax.axhline(base_rate, color="#999", linestyle=":", linewidth=1)
    roc_ax.set(xlabel="false positive rate", ylabel="true positive rate (hallucinations found)", title="ROC",
               xlim=(0, 1), ylim=(0, 1.01))
    pr_ax.set(xlabel="recall (hallucinated claims)", ylabel="precision", title="Precision-recall",
              xlim=(0, 1), ylim=(0, 1.01))
    for ax in (roc_ax, pr_ax):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="lower right" if ax is roc_ax else "upper right")
    fig.suptitle(title)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _img(png: str, caption: str) -> str:
    return (f'<figure><img alt="{html.escape(caption)}" src="data:image/png;base64,{png}">'
            f"<figcaption>{html.escape(caption)}</figcaption></figure>")


def _table(rows: Sequence[tuple[str, str, dict[str, Any]]], first: str) -> str:
    head = "".join(f"<th>{html.escape(_SHORT[k])}</th>" for k in METRICS)
    out = [f"<table><tr><th>{first}</th><th>aggregator</th>{head}<th>samples</th><th>claims</th>"
           "<th>hallucinated</th></tr>"]
    for name, aggregator, metrics in rows:
        cells = "".join(f"<td>{html.escape(format_metric(metrics, k))}</td>" for k in METRICS)
        out.append(
            f'<tr><td class="name">{html.escape(name)}</td><td>{html.escape(aggregator)}</td>{cells}'
            f"<td>{metrics['n_samples']}</td><td>{metrics['n_claims']}</td><td>{metrics['n_hallucinated']}</td></tr>"
        )
    out.append("</table>")
    return "\n".join(out)


def render_report(table: EvaluationTable, *, title: str = "MUCH evaluation", source: str = "") -> str:
    """The HTML page (a string) for an :class:`~much_metric.signals._evaluation.EvaluationTable`."""
    results: list[SignalResult] = table.results
    signals = list(dict.fromkeys(r.signal_name for r in results))
    aggregators = list(dict.fromkeys(r.aggregator for r in results))
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
             f"<style>{_STYLE}</style></head><body><h1>{html.escape(title)}</h1>"]
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    parts.append(
        f"<p class='note'>Data: {html.escape(source)} ({table.n_dataset_samples} samples). Generated {stamp}. "
        "Positive class = hallucinated claim (label -1); scores are uncertainties (higher = more likely "
        "hallucinated); the EOS claim is dropped. Intervals: 95% percentile bootstrap over samples. "
        f"Stopword mask: {'used' if table.has_stopword_mask else 'absent (no stopword handling)'}.</p>"
    )
    missing = {k: v for k, v in table.missing.items() if v}
    if missing:
        items = ", ".join(f"{html.escape(k)}: {v}" for k, v in missing.items())
        parts.append(f"<p class='note'>Samples without values, left out: {items}.</p>")
    parts.append("<h2>Results</h2>")
    parts.append(_table([(r.signal_name, r.aggregator, r.metrics) for r in results], "method"))
    parts.append("<h2>Methods compared</h2>")
    for aggregator in aggregators:
        curves = [(r.signal_name, r.claim_scores, r.hallucinated) for r in results if r.aggregator == aggregator]
        parts.append(_img(_figure(curves, f"aggregator: {aggregator}"), f"All methods, aggregator {aggregator}"))
    if len(aggregators) > 1:
        parts.append("<h2>Aggregators compared</h2>")
        for signal in signals:
            curves = [(r.aggregator, r.claim_scores, r.hallucinated) for r in results if r.signal_name == signal]
            parts.append(_img(_figure(curves, f"method: {signal}"), f"{signal}, all aggregators"))
    breakdowns = list(dict.fromkeys(name for r in results for name in r.claim_groups))
    for name in breakdowns:
        parts.append(f"<h2>By {html.escape(name)}</h2>")
        rows = []
        for r in results:
            for value, metrics in r.metrics.get("by", {}).get(name, {}).items():
                rows.append((f"{r.signal_name} / {name}={value}", r.aggregator, metrics))
        parts.append(_table(rows, "method / group"))
        for r in results:
            if r.aggregator != aggregators[0]:
                continue
            groups = r.claim_groups[name]
            curves = [(f"{name}={value}", r.claim_scores[groups == value], r.hallucinated[groups == value])
                      for value in sorted(set(groups.tolist()), key=str)]
            caption = f"{r.signal_name} ({r.aggregator}) by {name}"
            parts.append(_img(_figure(curves, caption), caption))
    parts.append("</body></html>")
    return "\n".join(parts)


def write_report(path: str | os.PathLike, table: EvaluationTable, **kwargs: Any) -> None:
    """Write :func:`render_report`'s page to ``path`` atomically."""
    from much_metric.fileio import atomic_write_bytes

    atomic_write_bytes(Path(path), render_report(table, **kwargs).encode("utf-8"))
