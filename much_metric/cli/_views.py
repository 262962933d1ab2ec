"""What ``much run --top-k`` and ``much run --top-k-grid`` print besides table 3: the degradation table (each method on
each input view, its ΔROC-AUC and ΔPRR against itself on the 24 stored candidates, with paired bootstrap intervals)
and the cost-per-claim cells every table shares. Pure formatting of :class:`much_metric.benchmark.DegradationResult`
and :class:`much_metric.signals.SignalCost`."""

from __future__ import annotations

import math
from typing import Any

from much_metric.cli._text import footnote, text_table

__all__ = ["DEGRADATION_NOTE", "cost_cell", "format_degradation", "parse_grid"]

#: The legend under the degradation table.
DEGRADATION_NOTE = (
    "Each cell: the method on the top-K view minus itself on the 24 stored candidates, on the same claims, with its "
    "paired bootstrap interval. A view = the K most probable candidates and the sampled token's own probability, as "
    "an API's top_logprobs K with the chosen token's logprob (K = 0: the sampled token alone, Mu-SHROOM). "
    "'=' : the method reads at most K candidates, so the view gives exactly its numbers. '*' : it reads more; the "
    "candidates the view lacks count as probability 0 (zero-filled; docs/methods.md#input-views). 'needs top-1': "
    "nothing to fill at K = 0.")


def parse_grid(text: str) -> tuple[int, ...]:
    """``"0,1,5,20,24"`` -> ``(0, 1, 5, 20, 24)``; ValueError naming the flag for anything else."""
    try:
        values = tuple(int(part) for part in str(text).split(",") if part.strip())
    except ValueError:
        values = ()
    if not values:
        raise ValueError(f"--top-k-grid must be comma-separated integers in [0, 24], got {text!r}")
    return values


def cost_cell(cost: Any) -> str:
    """``"1.6 µs"`` -- wall seconds per claim of a :class:`~much_metric.signals.SignalCost` (``"—"``: not recorded;
    ``" +12 fwd"`` when the method ran forward passes of a model)."""
    from much_metric.signals import format_seconds

    if cost is None:
        return "—"
    text = format_seconds(cost.seconds_per_claim)
    extra = [f"{cost.forward_passes} fwd" if cost.forward_passes else "", f"{cost.samples} samples" if cost.samples
             else "", f"{cost.model_calls} calls" if cost.model_calls else ""]
    return " ".join([text, *(f"+{e}" for e in extra if e)])


def _delta(cell: Any, metric: str) -> str:
    if cell.how == "not run":
        return cell.need
    delta = cell.deltas.get(metric, math.nan)
    mark = "=" if cell.how == "exact" else "*"
    if math.isnan(delta):
        return f"nan{mark}"
    interval = cell.intervals.get(metric)
    text = f"{delta:+.3f}"
    if interval is not None and not math.isnan(interval[0]):
        text += f" [{interval[0]:+.3f}, {interval[1]:+.3f}]"
    return text + mark


def format_degradation(result: Any) -> str:
    """Two tables (ΔROC-AUC, ΔPRR), one row per method, one column per view, and the legend."""
    from much_metric.signals import format_seconds

    labels = {"roc_auc": "ROC-AUC", "prr": "PRR"}
    interval = (f"{result.n_resamples} paired bootstrap resamples of the samples, {result.confidence_level:.0%} "
                "intervals" if result.n_resamples else "no bootstrap")
    parts = [f"Degradation on input views ({result.aggregator} aggregator; {interval})"]
    for metric in result.metrics:
        header = ["method", "reads", *(f"Δ{labels.get(metric, metric)} top-{k}" for k in result.top_ks if k < 24),
                  f"{labels.get(metric, metric)} (24)", "cost/claim (24)"]
        rows = []
        for row in result.rows:
            reference = row.cell(24)
            views = [_delta(cell, metric) for cell in row.cells if cell.top_k < 24]
            rows.append([row.method, f"top-{row.top_k}", *views, f"{reference.values.get(metric, math.nan):.3f}",
                         format_seconds(reference.seconds_per_claim)])
        parts += ["", text_table(rows, header)]
    parts += ["", footnote(DEGRADATION_NOTE)]
    parts += [f"note: {note}" for note in result.notes]
    return "\n".join(parts)

