"""The private board and the label sources as HTML and JSON (additions to the pages of :mod:`much_leaderboard._table`).

* :func:`render_private_board` -- the two-board table (``<table id="much-private-board">``): public ROC-AUC and rank,
  private ROC-AUC (rounded) and rank, the shift, Kendall's tau between the two rankings;
* :func:`private_columns` -- the same two private numbers appended to the main table (``extra_columns``);
* :func:`render_private_section` -- a submission page's private lines;
* :func:`render_label_sources` -- ROC-AUC and rank of every row under each label source, and tau between sources;
* :func:`boards_json` -- ``GET /api/boards``.

Everything here reads the private board's stored, rounded values only (never the private labels). Submitted text is
escaped with :func:`html.escape`.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["render_private_board", "private_columns", "render_private_section", "render_label_sources",
           "boards_json"]


def _label(row: Mapping[str, Any]) -> str:
    method = row["form"].get("method", "")
    return method if row["kind"] == "baseline" else f"{method} / {row['signal']}"


def _entry(row: Mapping[str, Any]) -> str:
    kind = "baseline (built-in)" if row["kind"] == "baseline" else "submission"
    return (f'<a class="entry" href="?submission={row["submission"]}">{html.escape(_label(row))}</a>'
            f'<br><span class="kind">{kind}</span>')


def _shift(value: int | None) -> str:
    if value is None:
        return "—"
    return "=" if value == 0 else f"▲{value}" if value > 0 else f"▼{-value}"


def _private(row: Mapping[str, Any], decimals: int) -> str:
    if row["private"] is not None:
        return f"{row['private']:.{decimals}f}"
    return "—" if not row.get("note") else f'—<br><span class="kind">{html.escape(row["note"][:200])}</span>'


def _tau(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def render_private_board(table: Mapping[str, Any]) -> str:
    """The two-board table (rows ranked on the private split first, then the others)."""
    decimals = table["decimals"]
    head = ["private rank", "method", "public ROC-AUC", "public rank", f"private ROC-AUC ({decimals} decimals)",
            "shift"]
    parts = [f'<p id="much-private-summary">Private split: {table["n_samples"]:,} samples, {table["n_claims"]:,} '
             f"claims, labels held by this server only. Each row's private ROC-AUC is computed over every claim of "
             f"the split and shown rounded to {decimals} decimals; ranks use the shown values (ties share a rank), "
             "among the rows with both values; shift = public rank − private rank (▲ climbs on the private split). "
             f"At most {table['daily_limit']} submission(s) with private values per submitter in 24 hours, "
             f"{table['board_daily_limit']} from all submitters together. "
             f"Kendall's τ between the two rankings: {_tau(table['tau'])} over {table['n_ranked']} rows.</p>",
             '<table id="much-private-board" class="much-table"><thead><tr>',
             *(f"<th>{html.escape(h)}</th>" for h in head), "</tr></thead><tbody>"]
    for row in table["rows"]:
        cells = [str(row.get("private_rank") or "—"), _entry(row),
                 "n/a" if row["public"] is None else f"{row['public']:.3f}", str(row.get("public_rank") or "—"),
                 _private(row, decimals), _shift(row.get("shift"))]
        parts.append(f'<tr data-key="{html.escape(row["key"], quote=True)}">'
                     + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    parts.append("</tbody></table>")
    return "".join(parts)


def private_columns(table: Mapping[str, Any]) -> list[tuple[str, Callable[[dict[str, Any]], str]]]:
    """``extra_columns`` of the main table: the private ROC-AUC (rounded) and the rank shift of each row."""
    by_key = {row["key"]: row for row in table["rows"]}
    decimals = table["decimals"]

    def value(row: dict[str, Any]) -> str:
        found = by_key.get(row["key"])
        return "—" if found is None or found["private"] is None else f"{found['private']:.{decimals}f}"

    def shift(row: dict[str, Any]) -> str:
        found = by_key.get(row["key"])
        return _shift(None if found is None else found.get("shift"))

    return [(f"private ROC-AUC ({decimals} dec.)", value), ("rank shift (public → private)", shift)]


def render_private_section(table: Mapping[str, Any], submission: str) -> str:
    """A submission page's private split lines ('' when the board has none or the entry is unknown)."""
    rows = [row for row in table["rows"] if row["submission"] == submission]
    if not rows:
        return ""
    decimals = table["decimals"]
    items = "".join(f"<li>{html.escape(row['signal'])}: private ROC-AUC {_private(row, decimals)}, private rank "
                    f"{row.get('private_rank') or '—'}, public rank {row.get('public_rank') or '—'}, shift "
                    f"{_shift(row.get('shift'))}</li>" for row in rows)
    return (f'<div id="much-private-section"><h3>Private split</h3><p>ROC-AUC over all {table["n_claims"]:,} claims '
            f"of the private split, rounded to {decimals} decimals (no interval, breakdown or curve: the labels stay "
            f"on the server).</p><ul>{items}</ul></div>")


def render_label_sources(table: Mapping[str, Any]) -> str:
    """ROC-AUC (rank) of every row under each label source, and Kendall's tau between the sources' rankings."""
    sources = table["sources"]
    if len(sources) < 2:
        return '<p id="much-label-sources">This data has one label source: nothing to compare.</p>'
    head = "".join(f"<th>{html.escape(s['name'])}</th>" for s in sources)
    described = "".join(f"<li><b>{html.escape(s['name'])}</b>: {html.escape(s['description'])} ({s['n_rows']:,} "
                        f"samples, {s['n_claims']:,} claims)</li>" for s in sources)
    parts = [f'<div id="much-label-sources"><p>The same detectors ranked by ROC-AUC under each label source (cells: '
             f"ROC-AUC (rank)):</p><ul>{described}</ul>",
             f'<table id="much-label-source-table" class="much-table"><thead><tr><th>method</th>{head}</tr></thead>'
             "<tbody>"]
    for row in table["rows"]:
        cells = "".join(
            "<td>n/a</td>" if row["roc_auc"][s["name"]] is None else
            f"<td>{row['roc_auc'][s['name']]:.3f} ({row['rank'][s['name']]})</td>" for s in sources)
        parts.append(f'<tr data-key="{html.escape(row["key"], quote=True)}"><td>{_entry(row)}</td>{cells}</tr>')
    parts.append('</tbody></table><table id="much-label-source-tau" class="much-table"><thead><tr><th>Kendall τ</th>'
                 + head + "</tr></thead><tbody>")
    for a in sources:
        cells = []
        for b in sources:
            if a["name"] == b["name"]:
                cells.append("<td>1</td>")
                continue
            tau, n = table["tau"].get((a["name"], b["name"])) or table["tau"][(b["name"], a["name"])]
            cells.append(f"<td>{_tau(tau)} <span class=\"ci\">({n} rows)</span></td>")
        parts.append(f"<tr><th>{html.escape(a['name'])}</th>{''.join(cells)}</tr>")
    parts.append("</tbody></table></div>")
    return "".join(parts)


def boards_json(rows: list[dict[str, Any]], private: Mapping[str, Any] | None,
                sources: Mapping[str, Any] | None, pairwise: Mapping[str, Any] | None = None,
                ranking: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``GET /api/boards``: the public ranking (ROC-AUC) with each row's ``flags`` (``ranking``: the cached
    :func:`much_leaderboard.rank_rows`; public rows only: a flag over the private split would say more about its
    labels than the rounded private value does), the pairwise matrix of the public board as the tab shows it
    (:func:`much_leaderboard._pairwise.pairwise_board`; null while it is being computed), the private board (shown
    values only) and the label sources' table; submitted text as typed (JSON)."""
    public = sorted(({"key": f"{r['submission']}/{r['signal']}", "method": r["form"].get("method", ""),
                      "signal": r["signal"], "kind": r["kind"], "roc_auc": r["metrics"]["overall"].get("roc_auc"),
                      "flags": ((ranking or {}).get(f"{r['submission']}/{r['signal']}") or {}).get("flags") or {}}
                     for r in rows), key=lambda r: -(r["roc_auc"] if r["roc_auc"] is not None else -1.0))
    out: dict[str, Any] = {"public": public, "pairwise": None if pairwise is None else dict(pairwise)}
    if private is not None:
        out["private"] = {
            "n_samples": private["n_samples"], "n_claims": private["n_claims"], "decimals": private["decimals"],
            "daily_limit": private["daily_limit"], "board_daily_limit": private["board_daily_limit"],
            "tau": private["tau"],
            "rows": [{"key": r["key"], "method": r["form"].get("method", ""), "signal": r["signal"], "kind": r["kind"],
                      "public_roc_auc": r["public"], "private_roc_auc": r["private"], "note": r["note"],
                      "public_rank": r.get("public_rank"), "private_rank": r.get("private_rank"),
                      "shift": r.get("shift")} for r in private["rows"]]}
    if sources is not None:
        out["label_sources"] = {
            "sources": sources["sources"],
            "rows": [{"key": r["key"], "method": r["form"].get("method", ""), "signal": r["signal"],
                      "roc_auc": r["roc_auc"], "rank": r["rank"]} for r in sources["rows"]],
            "tau": [{"sources": list(pair), "tau": tau, "n_rows": n} for pair, (tau, n) in sources["tau"].items()]}
    return out
