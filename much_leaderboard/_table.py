"""The leaderboard's pages as HTML: the main table (filters, sort) and one page per submission.

Everything a submitter typed (method name, authors, link, hardware notes) is passed through :func:`html.escape`
before it reaches a page; links are only rendered for ``http(s)`` URLs. The table is built from the stored rows and
the cached ranking only (no scoring at render time): 200 rows render in milliseconds.

Subsets (the filters): ``all``, ``lang=<code>`` (the claims of one language), ``model=<name>`` (one generating
model) and ``selection=manual`` / ``auto`` (when the data has human labels); each row then shows
its metrics on that subset, with the subset's bootstrap intervals. Rows can also be filtered by what the method needs
(``needs``: any of the form's labels) and by whether it needs the model's internals (``internals``: the archive's
``submission.json`` declares attention weights and/or hidden states, see :func:`much_metric.signals.read_archive`).
"""

from __future__ import annotations

import base64
import html
import io
import json
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from much_leaderboard._admission import describe_detector

__all__ = ["subsets", "table_rows", "row_flags", "flag_legend", "render_table", "render_submission", "published_html",
           "metric_choices", "cost_text", "INTERNALS_FILTERS", "INTERNALS_LABELS"]


_PROBABILITIES, _TRAINED = "probabilities only", "training on the auto split"
#: The form's label of each kind of internals an archive may declare (``submission.json``).
INTERNALS_LABELS = {"attention": "attention weights", "hidden_states": "hidden states"}
#: The internals filter: every row, rows whose method needs the model's internals, rows whose method does not.
INTERNALS_FILTERS = {"any": None, "needs internals": True, "no internals": False}


def _row_needs(row: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(needs as shown, internals declared by the archive) of a stored row."""
    metrics = row["metrics"]
    internals = [kind for kind in INTERNALS_LABELS if kind in (metrics.get("internals") or [])]
    needs = list(row["form"].get("needs", []))
    if internals:  # the archive's declaration: the labels of what it needs, never "probabilities only"
        needs = [n for n in needs if n != _PROBABILITIES]
        needs += [INTERNALS_LABELS[kind] for kind in internals if INTERNALS_LABELS[kind] not in needs]
    if metrics.get("detector") is not None:  # a learned detector: what it was trained on, whatever the form said
        needs = [n for n in needs if n not in (_PROBABILITIES, _TRAINED)] + [_TRAINED]
    return needs, internals


def metric_choices() -> list[tuple[str, str]]:
    """(label, key) of every metric of :data:`much_metric.scoring.METRIC_TABLE`."""
    from much_metric.scoring import METRIC_TABLE

    return [(m.label, m.key) for m in METRIC_TABLE]


def subsets(langs: Sequence[str], models: Sequence[str], selections: Sequence[str] = ()) -> list[str]:
    """The filter values: ``all``, ``lang=..``, ``model=..``, ``selection=..`` (manual / auto)."""
    return ["all", *(f"lang={lang}" for lang in langs), *(f"model={m}" for m in models),
            *(f"selection={s}" for s in selections)]


def _metrics_of(row: dict[str, Any], subset: str) -> dict[str, Any] | None:
    metrics = row["metrics"]
    if subset == "all":
        return metrics["overall"]
    group, _, value = subset.partition("=")
    return metrics.get("by", {}).get(group, {}).get(value)


def table_rows(rows: Sequence[dict[str, Any]], ranking: dict[str, Any], *, subset: str = "all",
               sort: str = "roc_auc", kinds: Sequence[str] = ("baseline", "submission"),
               needs: Sequence[str] = (), internals: bool | None = None) -> list[dict[str, Any]]:
    """The main table's rows, best ``sort`` value first (rows without a value on the subset are left out).

    ``needs``: keep rows needing any of these labels; ``internals``: True keeps the rows whose method needs the
    model's internals (hidden states or attention weights, as the form or the archive's ``submission.json`` says),
    False those that do not, None (default) every row.

    Each dict: ``key`` (``submission/signal``), ``submission``, ``signal``, ``kind``, ``method``, ``label`` (a
    submission's row is ``"<method> / <signal>"``: each signal is its own row), ``authors``, ``link``, ``needs``
    (a learned detector's row: "training on the auto split" instead of "probabilities only"), ``trained`` (its
    detector, protocol, fold and number of training rows; None for other rows), ``metrics`` (the subset's),
    ``internals`` (what the archive declared: ``attention``, ``hidden_states``), ``per_lang`` (ROC-AUC per
    language), ``p_rank``, ``rank`` (1 = best by ``sort``), ``relative_runtime``,
    ``seconds``, ``cost`` (per claim, measured by the server for a built-in baseline, declared for an upload; None:
    not declared), ``coverage``, ``submitted``, ``flags`` (:func:`row_flags`).
    """
    keys = [key for _, key in metric_choices()]
    if sort not in keys:
        raise ValueError(f"sort must be one of {keys}, got {sort!r}")
    out = []
    for row in rows:
        if row["kind"] not in kinds:
            continue
        form = row["form"]
        detector = row["metrics"].get("detector")
        row_needs, row_internals = _row_needs(row)
        if needs and not set(needs) & set(row_needs):
            continue
        if internals is not None and internals != bool(set(row_needs) & set(INTERNALS_LABELS.values())):
            continue
        metrics = _metrics_of(row, subset)
        if metrics is None:
            continue
        key = f"{row['submission']}/{row['signal']}"
        ranked = ranking.get(key, {})
        out.append({
            "key": key, "submission": row["submission"], "signal": row["signal"], "kind": row["kind"],
            "method": form.get("method", ""), "authors": form.get("authors", ""), "link": form.get("link", ""),
            "label": form.get("method", "") if row["kind"] == "baseline" else f"{form.get('method', '')} / "
                                                                               f"{row['signal']}",
            "needs": row_needs, "internals": row_internals, "metrics": metrics,
            "trained": None if detector is None else
            f"trained: {describe_detector(detector)} ({row['metrics'].get('training_rows') or 0:,} rows)",
            "per_lang": {lang: m.get("roc_auc") for lang, m in row["metrics"].get("by", {}).get("lang", {}).items()},
            "p_rank": ranked.get("rank_probability"), "lang_gap": ranked.get("lang_gap"),
            "versus_best": ranked.get("versus_best"),
            "relative_runtime": row["metrics"].get("relative_runtime"), "seconds": row["metrics"].get("seconds"),
            "cost": row["metrics"].get("cost"),
            "coverage": row["metrics"].get("coverage"), "submitted": row["submitted"],
            "flags": row_flags(ranked.get("flags"), metrics),
        })
    out.sort(key=lambda r: -np.inf if r["metrics"].get(sort) is None else r["metrics"][sort], reverse=True)
    previous, rank = None, 0
    for position, row in enumerate(out, start=1):
        value = row["metrics"].get(sort)
        shown = None if value is None else round(float(value), 3)  # ranks tie where the shown values tie
        if shown != previous or position == 1:
            rank, previous = position, shown
        row["rank"] = rank
    return out


def row_flags(ranked: dict[str, str] | None, metrics: dict[str, Any]) -> dict[str, str]:
    """A row's flags, as ``much run`` / ``much evaluate`` print them (legend:
    :meth:`much_metric.report.DeltaColumn.legend_of`): those of the ranking (:func:`much_leaderboard.rank_rows`: not
    above a floor, heavy ties, on the claims every row covers) and ``few`` when the shown metrics' intervals are over
    fewer than ``DeltaColumn.MIN_INTERVAL_SAMPLES`` (30) samples (a language or model filter: its own samples only)."""
    from much_metric.report import DeltaColumn

    flags = dict(ranked or {})
    n_samples = metrics.get("n_samples")
    if metrics.get("intervals") and n_samples is not None and n_samples < DeltaColumn.MIN_INTERVAL_SAMPLES:
        flags["few"] = f"n={n_samples}"
    return flags


def flag_legend(rows: Sequence[dict[str, Any]]) -> str:
    """The legend of the flags ``rows`` show (``""`` when none does), as much evaluate prints it."""
    from much_metric.report import DeltaColumn

    return DeltaColumn.legend_of(flag for row in rows for flag in row.get("flags") or {})


def _flags_html(flags: dict[str, str] | None) -> str:
    if not flags:
        return ""
    text = html.escape("; ".join(flags.values()))
    return f'<br><span class="flags" title="see the legend under the table">⚑ {text}</span>'


def _number(value: Any, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def _cell(metrics: dict[str, Any], key: str) -> str:
    value = metrics.get(key)
    interval = (metrics.get("intervals") or {}).get(key)
    text = _number(value)
    if interval and None not in interval:
        text += f'<br><span class="ci">[{interval[0]:.3f}, {interval[1]:.3f}]</span>'
    return text


def _versus_best(comparison: dict[str, Any] | None) -> str:
    """Under P(rank): the row's paired Δ to the best row, its interval and p (``""`` for the best row itself)."""
    if not comparison or comparison.get("p_value") is None:
        return ""
    low, high = comparison["interval"]
    return (f'<br><span class="ci" title="paired bootstrap difference to the best row, its 95% interval and '
            f'p-value">Δ #1 {comparison["difference"]:+.3f} p={comparison["p_value"]:.2f}<br>'
            f'[{low:+.3f}, {high:+.3f}]</span>')


def _link(text: str, url: str) -> str:
    if url.lower().startswith(("https://", "http://")):
        return (f'<a href="{html.escape(url, quote=True)}" rel="nofollow noopener" target="_blank">'
                f"{html.escape(text)}</a>")
    return html.escape(text)


def _runtime(row: dict[str, Any]) -> str:
    if row["seconds"] is None:
        return "n/a"
    relative = row["relative_runtime"]
    share = "" if relative is None else f" ({100 * relative:.3g}%)"
    return f"{row['seconds']:.3g}s{share}"


def cost_text(cost: dict[str, Any] | None) -> str:
    """``"1.6 µs/claim (measured)"``, ``"2 ms/claim (declared: 1 x A100)"``, ``"not declared"``."""
    from much_metric.signals import format_seconds

    if not cost or cost.get("seconds_per_claim") is None:
        return "not declared"
    where = cost.get("machine") or ""
    return (f"{format_seconds(cost['seconds_per_claim'])}/claim ({cost.get('source', 'declared')}"
            f"{': ' + where if where else ''})")


def _runtime_of(row: dict[str, Any]) -> str:
    return _runtime({"seconds": row["metrics"].get("seconds"), "relative_runtime": row["metrics"].get(
        "relative_runtime")})


def render_table(rows: Sequence[dict[str, Any]], *, langs: Sequence[str], sort: str = "roc_auc",
                 rank_metric: str = "roc_auc",
                 extra_columns: Sequence[tuple[str, Callable[[dict[str, Any]], str]]] = ()) -> str:
    """The main table as an HTML fragment (``<table id="much-leaderboard">``); every submitted text escaped.
    ``extra_columns``: ``(header, cell(row) -> HTML)`` appended after the table's own columns (the private
    board's, :mod:`much_leaderboard._private_pages`)."""
    metrics = metric_choices()
    rank_label = {key: label for label, key in metrics}.get(rank_metric, rank_metric)
    # 15 columns whatever the number of languages (plus the private board's two when a private split is attached):
    # the per-language ROC-AUCs and the gap share one cell, the runtime and the cost per claim another, the
    # coverage and the date sit under the method's name; the cost's machine name wraps (the table fits 1,280 to
    # 1,440 px windows, and scrolls inside its frame past that: tests/much_leaderboard/test_browser.py measures it).
    head = ["#", "method", "type", *(label + (" ▼" if key == sort else "") for label, key in metrics),
            f"P(rank) ({rank_label})", "ROC-AUC by language (gap)", "runtime (rel.) / cost per claim / claims kept",
            *(header for header, _ in extra_columns)]
    parts = ['<table id="much-leaderboard" class="much-table"><thead><tr>',
             # a header may wrap after "@" ("TPR@<wbr>FPR<=10%"), not inside a number ("R<=2 / 0%")
             *(f"<th>{html.escape(h).replace('@', '@<wbr>')}</th>" for h in head), "</tr></thead><tbody>"]
    for row in rows:
        label = "baseline (built-in)" if row["kind"] == "baseline" else "submission"
        needs = html.escape(", ".join(row["needs"]) or "—")
        if row.get("trained"):
            needs += f'<br><span class="kind">{html.escape(row["trained"])}</span>'
        coverage = "coverage n/a" if row["coverage"] is None else f"coverage {row['coverage']:.1%}"
        method = (f'<a class="entry" href="?submission={row["submission"]}" data-submission="{row["submission"]}">'
                  f'{html.escape(row.get("label", row["method"]))}</a>'
                  f'<br><span class="kind">{label} · {coverage} · submitted '
                  f'{time.strftime("%Y-%m-%d", time.gmtime(row["submitted"]))}</span>'
                  + _flags_html(row.get("flags")))
        p_rank = "…" if row["p_rank"] is None else f"{row['p_rank']:.2f}"
        p_rank += _versus_best(row.get("versus_best"))
        per_lang = "<br>".join(f"{html.escape(lang)} {_number(row['per_lang'].get(lang))}" for lang in langs)
        per_lang += f'<br><span class="ci">gap {_number(row["lang_gap"])}</span>'
        cells = [str(row["rank"]), method, needs, *(_cell(row["metrics"], key) for _, key in metrics),
                 p_rank, per_lang,
                 f'{html.escape(_runtime(row))}<br>'
                 f'<span class="ci cost">{html.escape(cost_text(row.get("cost")))}</span>'
                 + _kept_text(row["metrics"].get("claims_kept")),
                 *(cell(row) for _, cell in extra_columns)]
        parts.append(f'<tr data-key="{html.escape(row["key"], quote=True)}">'
                     + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    parts.append("</tbody></table>")
    if legend := flag_legend(rows):
        parts.append(f'<p class="flag-legend">⚑ {html.escape(legend)}</p>')
    if not rows:
        parts.append('<p class="empty">No row matches these filters.</p>')
    return "".join(parts)


def _kept_text(kept: dict[str, Any] | None) -> str:
    """The share of claims an answer-level conformal filter keeps at alpha 0.1 (docs/conformal.md), mean over the
    server's seeded splits of the public data; nothing for a row scored before it existed or on too few answers."""
    if not kept or "0.1" not in kept:
        return ""
    return f'<br><span class="ci" title="docs/conformal.md">kept at α=0.1: {kept["0.1"]["kept"]:.1%}</span>'


def published_html() -> str:
    """The paper's table 7 rows (orailix/MUCH, the reference notebook's evaluation set they match), labelled: not
    re-scored here."""
    from much_metric.report.published import PAPER_GENERATION_SECONDS, PAPER_TABLE7, PAPER_TABLE7_SET

    rows = "".join(
        f"<tr><td>{html.escape(label)}</td><td>{roc:.3f}</td><td>{pr:.3f}</td><td>{seconds:,.0f}s "
        f"({100 * seconds / PAPER_GENERATION_SECONDS:.3g}%)</td></tr>"
        for label, _, seconds, roc, pr, _ in PAPER_TABLE7)
    return ('<p>Published rows (the paper\'s table 7, <code>orailix/MUCH</code>, the reference notebook\'s '
            f'"{PAPER_TABLE7_SET}" evaluation set, product aggregator, '
            'the authors\' hardware): reference values, not re-scored on this server.</p>'
            '<table id="much-published" class="much-table"><thead><tr><th>method (paper)</th><th>ROC-AUC</th>'
            f"<th>PR-AUC</th><th>runtime (rel.)</th></tr></thead><tbody>{rows}</tbody></table>")


def _figure_png(arrays: dict[str, np.ndarray]) -> str:
    from matplotlib.figure import Figure  # no pyplot: no process-wide backend or figure registry

    from much_metric.scoring import pr_curve, rejection_curve, roc_curve

    scores, positive = arrays["claim_scores"], arrays["hallucinated"].astype(bool)
    figure = Figure(figsize=(12, 3.8))
    axes = figure.subplots(1, 3)
    fpr, tpr = roc_curve(scores, positive)
    axes[0].plot(fpr, tpr)
    axes[0].plot([0, 1], [0, 1], "--", color="grey")
    axes[0].set(title="ROC", xlabel="false positive rate", ylabel="true positive rate")
    precision, recall, _ = pr_curve(scores, positive)
    axes[1].plot(recall, precision)
    axes[1].axhline(positive.mean(), ls="--", color="grey")
    axes[1].set(title="precision-recall", xlabel="recall", ylabel="precision")
    curves = rejection_curve(scores, positive)
    for name, style in (("quality", "-"), ("oracle", ":"), ("random", "--")):
        axes[2].plot(curves["rejection"], curves[name], style, label=name)
    axes[2].set(title="rejection (PRR)", xlabel="fraction of claims rejected", ylabel="correct claims kept")
    axes[2].legend(loc="lower right")
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=90)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def render_submission(store: Any, submission: str) -> str:
    """A submission's page: form, hardware, every signal's metrics and its ROC / PR / rejection figures."""
    if not isinstance(submission, str) or len(submission) != 64 or not all(c in "0123456789abcdef" for c in submission):
        return '<p class="error">No such submission.</p>'
    entry = store.get(submission)
    if entry is None or entry["status"] != "accepted":
        return '<p class="error">No such submission.</p>'
    form = entry["form"]
    rows = [r for r in store.rows() if r["submission"] == submission]
    label = "built-in baseline" if entry["kind"] == "baseline" else "submission"
    needs = _row_needs(rows[0])[0] if rows else list(form.get("needs", []))
    parts = [f'<div id="much-submission" data-submission="{submission}">',
             f"<h2>{_link(form.get('method', ''), form.get('link', ''))}</h2>",
             f"<p>{label} · authors: {html.escape(form.get('authors') or '—')} · needs: "
             f"{html.escape(', '.join(needs) or '—')} · archive SHA-256 <code>{submission}</code></p>"]
    for row in rows:
        metrics = row["metrics"]["overall"]
        parts.append(f"<h3>{html.escape(row['signal'])}</h3><table class=\"much-table\"><tr>"
                     + "".join(f"<th>{html.escape(label)}</th>" for label, _ in metric_choices()) + "</tr><tr>"
                     + "".join(f"<td>{_cell(metrics, key)}</td>" for _, key in metric_choices()) + "</tr></table>")
        hardware = json.dumps(row["metrics"].get("hardware") or {}, ensure_ascii=False)[:500]
        cost = row["metrics"].get("cost") or {}
        parts.append(f"<p>{metrics.get('n_samples')} samples, {metrics.get('n_claims')} claims "
                     f"({metrics.get('n_hallucinated')} hallucinated); runtime {html.escape(_runtime_of(row))}; "
                     f"cost {html.escape(cost_text(cost) + (' -- ' + cost['note'] if cost.get('note') else ''))}; "
                     f"hardware: <code>{html.escape(hardware)}</code></p>")
        try:
            png = _figure_png(store.scores(submission, row["signal"]))
        except ImportError:
            parts.append("<p>(figures need matplotlib: the <code>report</code> extra)</p>")
        else:
            parts.append(f'<img class="figure" alt="ROC, PR and rejection curves of {html.escape(row["signal"])}" '
                         f'src="data:image/png;base64,{png}">')
    parts.append("</div>")
    return "".join(parts)
