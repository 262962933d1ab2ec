"""The pairwise comparison tab as HTML: the matrix of paired differences and the cost figure (inline SVG).

Both read the cached matrix (:func:`much_leaderboard._pairwise.pairwise_board`) and the stored rows (names and costs);
nothing is computed here but the drawing. The figure is SVG written on the server (no script, no network): each
shown row's cost per claim on a log x axis, its ROC-AUC with its 95 % interval on y, the rows not separable from the
best in one colour and marker; its labels sit in a column right of the plot, spaced so that none overlaps another,
each joined to its point by a line. Rows without a cost are listed under it.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from typing import Any

from much_leaderboard._pairwise import LEVEL, TOP_ROWS

__all__ = ["PAIRWISE_CSS", "render_pairwise", "cost_figure"]

PAIRWISE_CSS = """
<style>
#much-pairwise-wrap {overflow-x: auto; max-width: 100%}
#much-pairwise {border-collapse: collapse; font-size: 11px; line-height: 1.25}
#much-pairwise th, #much-pairwise td {border: 1px solid #ccc; padding: 2px 3px; vertical-align: top}
#much-pairwise td {text-align: right; white-space: nowrap}
#much-pairwise th.row {text-align: left; font-weight: 600; max-width: 16em; overflow-wrap: anywhere;
  white-space: normal}
#much-pairwise td.better {background: #cfe8cf} #much-pairwise td.worse {background: #f6d2cc}
#much-pairwise td.tied {background: #f4f4f4; color: #555} #much-pairwise td.self {background: #fff}
#much-pairwise .ci {color: #555; font-size: 10px}
.much-legend span.key {display: inline-block; padding: 0 6px; border: 1px solid #ccc; margin-right: 4px}
svg#much-cost-figure {max-width: 100%; height: auto; font-family: sans-serif}
</style>
"""

_CELL_CLASS = {True: "better", False: "worse"}
_BEST, _OTHER = "#1b7837", "#8c8c8c"


def _label(row: dict[str, Any] | None, key: str) -> str:
    if row is None:
        return key
    method = row["form"].get("method", "")
    return method if row["kind"] == "baseline" else f"{method} / {row['signal']}"


def _cell(cell: dict[str, Any] | None, bootstrapped: bool) -> tuple[str, str]:
    """(class, inner HTML) of one matrix cell."""
    if cell is None:
        return "self", "—"
    difference = cell.get("difference")
    if difference is None:
        return "tied", "n/a"
    text = f"{difference:+.3f}"
    if not bootstrapped or cell.get("p_value") is None:
        return "tied", text
    low, high = cell["interval"]
    kind = _CELL_CLASS[difference > 0] if cell["separable"] else "tied"
    mark = {"better": "▲ ", "worse": "▼ ", "tied": "≈ "}[kind]
    return kind, (f"{mark}{text}<br><span class=\"ci\">[{low:+.3f}, {high:+.3f}]<br>p={cell['p_value']:.3f} "
                  f"Holm {cell['p_holm']:.3f}</span>")


def _matrix(payload: dict[str, Any], labels: list[str]) -> str:
    bootstrapped = bool(payload["n_resamples"])
    head = "".join(f'<th title="{html.escape(label, quote=True)}">#{k + 1}</th>' for k, label in enumerate(labels))
    parts = [f'<table id="much-pairwise"><thead><tr><th>row i \\ column j</th>{head}</tr></thead><tbody>']
    for i, label in enumerate(labels):
        cells = []
        for j in range(len(labels)):
            kind, inner = _cell(payload["cells"][i][j], bootstrapped)
            cells.append(f'<td class="{kind}" data-i="{i}" data-j="{j}">{inner}</td>')
        parts.append(f'<tr><th class="row">#{i + 1} {html.escape(label)}</th>{"".join(cells)}</tr>')
    parts.append("</tbody></table>")
    return "".join(parts)


def _log_ticks(low: float, high: float) -> list[float]:
    return [10.0 ** e for e in range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1)
            if low <= 10.0 ** e <= high]


def _spread(wanted: Sequence[float], gap: float, top: float, bottom: float) -> list[float]:
    """Label positions near ``wanted`` (screen y), in the same order, at least ``gap`` apart, within [top, bottom]."""
    order = sorted(range(len(wanted)), key=lambda k: wanted[k])
    placed = [0.0] * len(wanted)
    previous = top - gap
    for k in order:
        previous = max(wanted[k], previous + gap)
        placed[k] = previous
    limit = bottom  # pushed past the bottom: a second pass from the bottom up, keeping the gaps
    for k in order[::-1]:
        placed[k] = min(placed[k], limit)
        limit = placed[k] - gap
    return placed


def cost_figure(points: list[dict[str, Any]], *, width: int = 760, height: int = 380) -> str:
    """The cost figure as an ``<svg>`` element. ``points``: ``{"label", "cost", "value", "interval", "best",
    "declared"}`` per row with a cost (seconds per claim > 0)."""
    from much_metric.signals import format_seconds

    left, right, top, bottom = 58, 430, 26, height - 44
    costs = [p["cost"] for p in points]
    # whole decades: at least two labelled ticks whatever the spread of the costs
    low_x, high_x = 10.0 ** math.floor(math.log10(min(costs) / 2)), 10.0 ** math.ceil(math.log10(max(costs) * 2))
    ys = [v for p in points for v in (p["value"], *(p["interval"] or ())) if v is not None]
    low_y, high_y = min(ys) - 0.01, max(ys) + 0.01

    def x_of(cost: float) -> float:
        return left + (right - left) * (math.log10(cost) - math.log10(low_x)) / (math.log10(high_x) -
                                                                                 math.log10(low_x))

    def y_of(value: float) -> float:
        return bottom - (bottom - top) * (value - low_y) / (high_y - low_y)

    out = [f'<svg id="much-cost-figure" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
           f'width="{width}" height="{height}" role="img" aria-label="ROC-AUC against cost per claim">',
           f'<rect x="{left}" y="{top}" width="{right - left}" height="{bottom - top}" fill="none" stroke="#999"/>']
    for tick in _log_ticks(low_x, high_x):
        x = x_of(tick)
        out.append(f'<line x1="{x:.1f}" y1="{bottom}" x2="{x:.1f}" y2="{bottom + 4}" stroke="#999"/>'
                   f'<text class="tick" x="{x:.1f}" y="{bottom + 15}" font-size="10" text-anchor="middle">'
                   f"{html.escape(format_seconds(tick))}</text>")
    step = max(0.01, round((high_y - low_y) / 5, 2))
    tick = math.ceil(low_y / step) * step
    while tick <= high_y:
        y = y_of(tick)
        out.append(f'<line x1="{left - 4}" y1="{y:.1f}" x2="{left}" y2="{y:.1f}" stroke="#999"/>'
                   f'<text class="tick" x="{left - 6}" y="{y + 3:.1f}" font-size="10" text-anchor="end">'
                   f"{tick:.2f}</text>")
        tick += step
    out.append(f'<text x="{(left + right) / 2}" y="{height - 8}" font-size="11" text-anchor="middle">cost per claim '
               "(seconds, log scale)</text>"
               f'<text x="12" y="{(top + bottom) / 2}" font-size="11" text-anchor="middle" '
               f'transform="rotate(-90 12 {(top + bottom) / 2})">ROC-AUC (95% interval)</text>')
    wanted = [y_of(p["value"]) for p in points]
    placed = _spread(wanted, 14.0, top + 6, bottom)
    for p, y_label in zip(points, placed, strict=True):
        x, y = x_of(p["cost"]), y_of(p["value"])
        colour = _BEST if p["best"] else _OTHER
        fill = "#fff" if p["declared"] else colour
        title = html.escape(f"{p['label']}: ROC-AUC {p['value']:.3f}, {format_seconds(p['cost'])}/claim "
                            f"({'declared' if p['declared'] else 'measured'})")
        if p["interval"] and None not in p["interval"]:
            out.append(f'<line x1="{x:.1f}" y1="{y_of(p["interval"][0]):.1f}" x2="{x:.1f}" '
                       f'y2="{y_of(p["interval"][1]):.1f}" stroke="{colour}" stroke-width="1.5"/>')
        marker = (f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4.5"' if p["best"] else
                  f'<rect x="{x - 4:.1f}" y="{y - 4:.1f}" width="8" height="8"')
        out.append(f'<g class="point {"best" if p["best"] else "other"}">{marker} fill="{fill}" stroke="{colour}" '
                   f'stroke-width="1.5"><title>{title}</title></{"circle" if p["best"] else "rect"}></g>')
        text = p["label"] if len(p["label"]) <= 48 else p["label"][:47] + "…"
        out.append(f'<line x1="{x + 5:.1f}" y1="{y:.1f}" x2="{right + 8}" y2="{y_label:.1f}" stroke="#ccc"/>'
                   f'<text class="label" x="{right + 12}" y="{y_label + 4:.1f}" font-size="11" fill="{colour}">'
                   f"<title>{title}</title>{html.escape(text)}</text>")
    out.append(f'<g class="legend" font-size="11"><circle cx="{left + 6}" cy="12" r="4.5" fill="{_BEST}"/>'
               f'<text x="{left + 14}" y="16">not separable from the best (Holm, level {LEVEL})</text>'
               f'<rect x="{left + 250}" y="8" width="8" height="8" fill="{_OTHER}"/>'
               f'<text x="{left + 262}" y="16">separable: below the best</text>'
               f'<text x="{left + 420}" y="16">hollow = declared cost</text></g></svg>')
    return "".join(out)


def render_pairwise(payload: dict[str, Any] | None, rows: Sequence[dict[str, Any]]) -> str:
    """The tab's HTML: what it shows and by which rule, the matrix, the cost figure, the rows without a cost."""
    if payload is None:
        return PAIRWISE_CSS + '<p id="much-pairwise-pending">The pairwise comparison of the current board is being ' \
                              "computed; press refresh in a moment.</p>"
    if not payload["keys"]:
        return PAIRWISE_CSS + '<p id="much-pairwise-pending">No row to compare yet.</p>'
    by_key = {f"{r['submission']}/{r['signal']}": r for r in rows}
    labels = [_label(by_key.get(key), key) for key in payload["keys"]]
    shown = len(payload["keys"])
    bootstrapped = bool(payload["n_resamples"])
    rule = (f"Cell (i, j) = ROC-AUC of row i minus row j, paired: on the {payload['n_samples']:,} samples "
            f"({payload['n_claims']:,} claims) every board row covers, with the 95% percentile interval of the "
            f"difference and its two-sided p-value over the same {payload['n_resamples']:,} bootstrap resamples of "
            "the samples (the paired test of much_metric.compare). Colours: ▲ green = row i is better, ▼ red = row "
            f"i is worse, ≈ grey = not separable, where separable means a Holm-adjusted p-value below {LEVEL} "
            f"(Holm's step-down rule over the {shown * (shown - 1) // 2} pairs shown; the intervals are not "
            "adjusted, so an interval may exclude 0 in a grey cell)." if bootstrapped else
            "Cell (i, j) = ROC-AUC of row i minus row j on the claims every row covers. This board runs without "
            "bootstrap (--bootstrap 0): no interval or p-value, nothing is marked separable.")
    which = (f"Rows: the {shown} best of the board's {payload['n_rows']} rows by ROC-AUC on those claims (at most "
             f"{TOP_ROWS}; submissions and built-in baselines alike)" + (", the others are left out." if
                                                                         payload["n_rows"] > shown else "."))
    parts = [PAIRWISE_CSS, '<div id="much-pairwise-section">', "<h3>Pairwise comparison (ROC-AUC)</h3>",
             f'<p class="much-legend">{html.escape(rule)} {html.escape(which)}</p>',
             '<div id="much-pairwise-wrap">', _matrix(payload, labels), "</div>",
             "<h3>Cost and ROC-AUC</h3>"]
    points, missing = [], []
    for k, key in enumerate(payload["keys"]):
        cost = ((by_key.get(key) or {}).get("metrics", {}).get("cost") or {})
        seconds = cost.get("seconds_per_claim")
        if seconds is None or seconds <= 0 or payload["values"][k] is None:
            missing.append(labels[k])
            continue
        points.append({"label": f"#{k + 1} {labels[k]}", "cost": float(seconds), "value": payload["values"][k],
                       "interval": payload["intervals"][k], "best": bool(payload["best_group"][k]),
                       "declared": cost.get("source") != "measured"})
    parts.append('<p class="much-legend">Each shown row: its cost per claim (the cost column; measured by the server '
                 "for a built-in baseline, declared by the submitter otherwise) against its ROC-AUC on the same "
                 "claims as the matrix, with its 95% interval. Green circles: the rows not separable from the best "
                 "row (#1) by the rule above, #1 included; grey squares: the rows below it.</p>")
    parts.append(cost_figure(points) if points else '<p>No shown row has a cost.</p>')
    if missing:
        parts.append('<p id="much-no-cost">Without a cost (not declared), so not in the figure: '
                     + ", ".join(html.escape(label) for label in missing) + ".</p>")
    parts.append("</div>")
    return "".join(parts)
