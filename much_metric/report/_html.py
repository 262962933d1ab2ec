"""Self-contained HTML report of a MUCH evaluation: tables with bootstrap intervals, floors, ROC / PR / rejection
figures with bootstrap bands, and (when computed) the leaderboard, calibration and Mu-SHROOM span sections.

Figures are drawn with matplotlib's Agg canvas (imported lazily, no pyplot state) and embedded as base64 PNGs, so
the page is one file with no external resource; with ``figures=DIR`` each figure is also written to ``DIR`` as PNG
and SVG. Each PR panel draws every curve's own base rate (its share of hallucinated claims) as a dashed line of
the curve's colour: a per-language curve reads against its language's floor, not the pooled one. Bands: 95%
percentile bands over bootstrap resamples of the samples (TPR at fixed FPR, precision at fixed recall).
"""

from __future__ import annotations

import functools
import html
import math
import os
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from much_metric.report._cost import cost_section
from much_metric.report._delta import method_key
from much_metric.report._evaluation import EvaluationTable, SignalResult
from much_metric.report._figures import FigureSaver, curves_figure, reliability_figure
from much_metric.report._rank import Ranking
from much_metric.scoring import METRIC_TABLE, METRICS, ScoreResult
from much_metric.scoring.engine import shown_ranks

__all__ = ["page", "render_degradation_report", "render_report", "write_degradation_report", "write_report",
           "format_metric"]

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 1em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.8em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.4em; text-align: right; white-space: nowrap; }
th { white-space: normal; overflow-wrap: break-word; max-width: 6em; hyphens: auto; vertical-align: bottom; }
td .ci { color: #666; font-size: 0.85em; }
th { background: #f2f2f2; } td.name { text-align: left; font-family: monospace; }
tr.floor td { color: #666; background: #fafafa; font-style: italic; }
tr.published td { color: #555; background: #f6f8ff; }
figure { display: inline-block; margin: 0.5em; } figcaption { font-size: 0.85em; color: #555; max-width: 60em; }
.note { color: #555; font-size: 0.9em; max-width: 70em; }
dl.glossary dt { font-family: monospace; font-weight: bold; } dl.glossary dd { margin: 0 0 0.4em 1.5em; }
.scroll { overflow-x: auto; }
"""
_SHORT = {metric.key: metric.label for metric in METRIC_TABLE}


def format_metric(metrics: ScoreResult | Mapping[str, Any], key: str) -> str:
    """``0.712 [0.690, 0.735]`` (value and bootstrap interval when available) of a :class:`much_metric.ScoreResult`
    or of its ``to_dict()`` form (e.g. a stored JSON row); a missing interval bound is written "—"."""
    if isinstance(metrics, Mapping):
        value, intervals = metrics.get(key, float("nan")), metrics.get("intervals") or {}
    else:
        value, intervals = getattr(metrics, key, float("nan")), metrics.intervals or {}
    text = "nan" if value is None or math.isnan(value) else f"{value:.3f}"
    interval = intervals.get(key)
    if interval is not None:
        low, high = interval
        text += " —" if low is None or math.isnan(low) else f" [{low:.3f}, {high:.3f}]"
    return text


def _img(png: str, caption: str) -> str:
    return (f'<figure><img alt="{html.escape(caption)}" src="data:image/png;base64,{png}">'
            f"<figcaption>{html.escape(caption)}</figcaption></figure>")


def _value_cell(text: str) -> str:
    """A metric cell: the value, and its interval on a second line (keeps the main tables within ~1400 px)."""
    value, separator, interval = text.partition(" [")
    if not separator:
        return html.escape(text)
    return f"{html.escape(value)}<br><span class='ci'>[{html.escape(interval)}</span>"


def _table(rows: Sequence[tuple[str, str | None, ScoreResult, float | None, str]], first: str,
           paired: tuple[str, Sequence[Sequence[str]]] | None = None) -> str:
    """``paired``: the Δ column's header and, per row, its Δ cell and flags cell (:class:`DeltaColumn`)."""
    head = "".join(f"<th>{html.escape(_SHORT[k])}</th>" for k in METRICS)
    paired_head = "" if paired is None else f"<th>{html.escape(paired[0])}</th><th>flags</th>"
    out = [f"<div class='scroll'><table><tr><th>{first}</th><th style='max-width: none'>aggregator</th>{head}"
           "<th>samples</th><th>claims</th>"
           f"<th>halluc.</th><th>cover.</th>{paired_head}</tr>"]
    for position, (name, aggregator, metrics, coverage, kind) in enumerate(rows):
        cells = "".join(f"<td>{_value_cell(format_metric(metrics, k))}</td>" for k in METRICS)
        shown = aggregator or "—"  # None: nothing aggregated (claim-level signal, floor)
        extra = "" if paired is None else "".join(f"<td>{_value_cell(text)}</td>" for text in paired[1][position])
        out.append(
            f'<tr class="{kind}"><td class="name">{html.escape(name)}</td><td>{html.escape(shown)}</td>{cells}'
            f"<td>{metrics.n_samples}</td><td>{metrics.n_claims}</td><td>{metrics.n_hallucinated}</td>"
            f"<td>{'' if coverage is None else f'{coverage:.1%}'}</td>{extra}</tr>"
        )
    out.append("</table></div>")
    return "\n".join(out)


#: Under the results table: why the constant floor's PR-AUC is high and what the length floor shows.
FLOOR_FOOTNOTE = ("Floors: the constant floor's PR-AUC is (1 + prevalence) / 2, because the reference's trapezoid "
                  "PR-AUC joins (recall 0, precision 1) to (recall 1, prevalence): it can beat every method, so "
                  "read PR-AUC against it (AP has no such bonus). The length floor scores a claim by its number of "
                  "non-stopword tokens: under the product aggregator longer claims score higher even with random "
                  "token scores.")


def _glossary() -> str:
    items = [(m.label, m.description) for m in METRIC_TABLE]
    items += [
        ("[x, y]", "95% percentile bootstrap interval, resampling samples (all claims of a sample move together)"),
        ("coverage", "share of the samples with ground truth for which the signal file has values"),
        ("floor: random", "seeded uniform random claim scores on the same claims: what no signal at all gets"),
        ("floor: constant", "one score for every claim: ROC-AUC 0.5, AP = prevalence, PR-AUC = (1 + prevalence)/2 "
                            "(the reference's trapezoid PR-AUC joins recall 0, precision 1 to recall 1, prevalence)"),
        ("floor: length", "the claim's number of non-stopword tokens: under the product aggregator longer claims score "
                          "higher even with random token scores, so a per-token random signal lands near it"),
        ("P(rank)", "share of bootstrap resamples in which the method holds the rank it has on the full data"),
        ("p-value", "two-sided paired-bootstrap p-value of 'no difference' between two methods"),
        ("lang gap", "best minus worst per-language value of the ranking metric"),
        ("ECE", "expected calibration error of P(hallucinated), 20 equal-width bins, on samples not fitted on"),
        ("Brier", "mean squared error of P(hallucinated); '(prevalence)' = predicting the fitting set's rate"),
        ("IoU / rho", "Mu-SHROOM character-level intersection over union / Spearman correlation of soft labels"),
    ]
    body = "".join(f"<dt>{html.escape(k)}</dt><dd>{html.escape(v)}</dd>" for k, v in items)
    return f"<h2>Glossary</h2><dl class='glossary'>{body}</dl>"


def _random_cells(low: float, high: float, rank_probability: float | None) -> str:
    if rank_probability is None:
        return "<td>—</td><td>—</td>"
    return f"<td>[{low:.3f}, {high:.3f}]</td><td>{rank_probability:.2f}</td>"


def _leaderboard_html(board: Ranking, display_method: Callable[[str], str]) -> str:
    resampled = bool(board.n_resamples)
    what = (f"{board.n_resamples} paired bootstrap resamples" if resampled else
            "no bootstrap: ranked by the point values, without interval, P(rank) or p-value")
    generation = board.generation
    runtime_note = ""
    if generation:  # the share's denominator, and whether it is an estimate rather than a measurement
        estimated = str(generation["source"]).startswith("estimate")
        runtime_note = (f" Runtime shares are relative to an LLM generation time of {generation['seconds']:,.0f} s"
                        f"{', an estimate, not a measurement' if estimated else ''} "
                        f"({html.escape(str(generation['source']))}).")
    out = [f"<h2>Leaderboard by {html.escape(_SHORT.get(board.metric, board.metric))}</h2>",
           f"<p class='note'>On the {board.n_samples} samples ({board.n_claims} claims) every method covers; "
           f"{what}.{runtime_note}</p>",
           "<table><tr><th>rank</th><th>method</th><th>value</th><th>95% interval</th><th>P(rank)</th>"
           "<th>lang gap (best−worst)</th><th>runtime (relative to generation)</th></tr>"]
    shown = shown_ranks([row.value for row in board.rows]) if board.rows else []  # tied as printed
    for row, rank in zip(board.rows, shown, strict=True):
        low, high = row.interval or (math.nan, math.nan)
        gap = "n/a" if math.isnan(row.lang_gap) else \
            f"{row.lang_gap:.3f} ({row.lang_best}−{row.lang_worst})"
        runtime = "n/a" if row.seconds is None else \
            f"{row.seconds:.3g}s ({100 * row.relative_runtime:.2g}%)" if row.relative_runtime else \
            f"{row.seconds:.3g}s"
        out.append(f"<tr><td>{rank}</td><td class='name'>{html.escape(display_method(row.method))}</td>"
                   f"<td>{row.value:.3f}</td>{_random_cells(low, high, row.rank_probability)}"
                   f"<td>{html.escape(gap)}</td><td>{runtime}</td></tr>")
    for name, value in board.floors.items():
        out.append(f"<tr class='floor'><td></td><td class='name'>{html.escape(name)}</td><td>{value:.3f}</td>"
                   "<td></td><td></td><td></td><td></td></tr>")
    out.append("</table>")
    names = [row.method for row in board.rows]
    if len(names) > 1 and resampled:
        p = np.asarray(board.p_values)
        head = "".join(f"<th>{k + 1}</th>" for k in range(len(names)))
        out.append(f"<p class='note'>Pairwise paired-bootstrap p-values</p><table><tr><th></th>{head}</tr>")
        for k, name in enumerate(names):
            cells = "".join("<td>—</td>" if i == k else f"<td>{p[k, i]:.3f}</td>" for i in range(len(names)))
            out.append(f"<tr><td class='name'>{k + 1}. {html.escape(display_method(name))}</td>{cells}</tr>")
        out.append("</table>")
    return "\n".join(out)


def _calibration_html(calibration: Sequence[Any], figures: FigureSaver, display: Callable[[str], str] = str) -> str:
    out = ["<h2>Calibration</h2>", "<table><tr><th>method</th><th>aggregator</th><th>fit claims</th>"
           "<th>measured claims</th><th>ECE</th><th>95% interval</th><th>Brier</th><th>Brier (prevalence)</th></tr>"]
    for r in calibration:
        interval = "" if r.ece_interval is None else f"[{r.ece_interval[0]:.3f}, {r.ece_interval[1]:.3f}]"
        out.append(f"<tr><td class='name'>{html.escape(display(r.signal_name))}</td>"
                   f"<td>{html.escape(r.aggregator or '—')}</td>"
                   f"<td>{r.n_fit_claims}</td><td>{r.n_eval_claims}</td><td>{r.ece:.3f}</td><td>{interval}</td>"
                   f"<td>{r.brier:.3f}</td><td>{r.brier_prevalence:.3f}</td></tr>")
    out.append("</table>")
    out.append(_img(figures.save(reliability_figure(calibration, display), "reliability"),
                    "Reliability diagram of the isotonic-calibrated probabilities on the measured samples"))
    return "\n".join(out)


def _spans_html(spans: dict[str, Any], display: Callable[[str], str] = str) -> str:
    from much_metric.report._spans import spans_flags

    flags = spans_flags(spans)
    langs = sorted({lang for m in [*spans["methods"].values(), *spans["baselines"].values()]
                    for lang in m["per_language"]})
    head = "".join(f"<th>IoU {lang}</th><th>ρ {lang}</th>" for lang in langs)
    out = ["<h2>Mu-SHROOM spans</h2>",
           f"<p class='note'>{spans['n_items']} items scored; threshold and probability map fitted on "
           f"{spans['n_fit_items']} other items.</p>",
           f"<table><tr><th>method</th><th>threshold</th><th>IoU</th><th>ρ</th>{head}<th>flags</th></tr>"]
    rows = [*((k, _method_label(k, display), v) for k, v in spans["methods"].items()),
            *((k, f"[{k}]", v) for k, v in spans["baselines"].items())]
    for key, name, m in rows:
        per = m["per_language"]
        cells = "".join(f"<td>{per[lang]['iou']:.3f}</td><td>{per[lang]['cor']:.3f}</td>" if lang in per
                        else "<td></td><td></td>" for lang in langs)
        threshold = f"{m['threshold']:.4g}" if "threshold" in m else ""
        kind = "floor" if name.startswith("[") or name.startswith("floor") else ""
        out.append(f"<tr class='{kind}'><td class='name'>{html.escape(name)}</td><td>{threshold}</td>"
                   f"<td>{m['iou']:.3f}</td><td>{m['cor']:.3f}</td>{cells}"
                   f"<td>{html.escape(flags.get(key, ''))}</td></tr>")
    out.append("</table>")
    return "\n".join(out)


def _stopword_setting(table: EvaluationTable) -> str:
    """The stopword setting under the one name the terminal and the options use, ``stopword_handling`` (null:
    stopword tokens score 0; exclude: removed from claims), and whether the data had the mask it applies."""
    handling = next((r.score.stopword_handling for r in table.results if r.score is not None
                     and r.score.stopword_handling), None)
    if not table.has_stopword_mask:
        return f"stopword_handling={handling or 'null'} without effect: the data has no stopword_mask column"
    return {"null": "stopword_handling=null (stopword tokens score 0, the reference)",
            "exclude": "stopword_handling=exclude (stopword tokens removed from claims)"}.get(
        handling, f"stopword_handling={handling}")


def _method_label(method: str, display: Callable[[str], str]) -> str:
    """``display`` of a ranked method written ``"<signal name> (<aggregator>)"`` (the aggregator kept)."""
    name, separator, rest = str(method).partition(" (")
    return display(name) + separator + rest


def render_report(table: EvaluationTable, *, title: str = "MUCH evaluation", source: str = "",
                  leaderboard: Ranking | None = None, calibration: Sequence[Any] | None = None,
                  spans: dict[str, Any] | None = None, figures: str | os.PathLike | None = None,
                  display: Callable[[str], str] = str) -> str:
    """The HTML page (a string) for an :class:`~much_metric.report._evaluation.EvaluationTable`; optional
    sections for a leaderboard, calibration results and span scores; ``figures``: folder for PNG/SVG copies;
    ``display``: the table label of a signal name (the command passes
    :func:`much_metric.baselines.display_name`; the signals stage sits below the registry and does not import it)."""
    display_method = functools.partial(_method_label, display=display)
    saver = FigureSaver(figures)
    results: list[SignalResult] = table.results
    signals = list(dict.fromkeys(r.signal_name for r in results))
    aggregators = list(dict.fromkeys(r.aggregator for r in results))
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
             f"<style>{_STYLE}</style></head><body><h1>{html.escape(title)}</h1>"]
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    parts.append(
        f"<p class='note'>Data: {html.escape(source)} ({table.n_dataset_samples} samples with ground truth "
        f"<code>{html.escape(table.labels)}</code>). Generated {stamp}. "
        "Positive class = hallucinated claim (label -1); scores are uncertainties (higher = more likely "
        "hallucinated); the EOS claim is dropped. Intervals and bands: 95% percentile bootstrap over samples. "
        f"{html.escape(_stopword_setting(table))}. "
        "Floor rows (grey) are reference scores on the same claims, not methods.</p>"
    )
    notes = [f"{v} {html.escape(k)}" for k, v in table.missing.items() if v]
    if table.excluded:
        parts.append(f"<p class='note'>{table.excluded} samples without ground truth "
                     f"<code>{html.escape(table.labels)}</code> are left out.</p>")
    if notes:
        parts.append(f"<p class='note'>Samples without values, left out: {', '.join(notes)}.</p>")
    pairing = table.pairing.describe(display) if table.pairing is not None else None
    if pairing:  # which samples every row is scored on (the paired rule), or that the rows are unpaired
        parts.append(f"<p class='note'>{html.escape(pairing)}</p>")
    parts.append("<h2>Results</h2>")
    rows = [(display(r.signal_name), "claim-level" if r.level == "claim" else r.aggregator, r.score, r.coverage, "")
            for r in results]
    rows += [(r.signal_name, r.aggregator, r.score, r.coverage, "floor") for r in table.floors]
    deltas = table.deltas
    if deltas is not None:  # which differences are real: the paired column, and the rows not to over-read
        parts.append(f"<p class='note'>{html.escape(deltas.describe(display))}</p>")
        cells = [(deltas.cell(method_key(r)), deltas.flag_cell(method_key(r))) for r in [*results, *table.floors]]
        parts.append(_table(rows, "method", (deltas.header(), cells)))
    else:
        parts.append(_table(rows, "method"))
    if table.floors:
        parts.append(f"<p class='note'>{html.escape(FLOOR_FOOTNOTE)}</p>")
    if deltas is not None and deltas.legend():
        parts.append(f"<p class='note'>Flags: {html.escape(deltas.legend())}</p>")
    parts.append(cost_section(table, saver, display))  # "" when no signal records its cost
    if leaderboard is not None:
        parts.append(_leaderboard_html(leaderboard, display_method))
    parts.append("<h2>Methods compared</h2>")
    floor_curves = [(r.signal_name, r.claim_scores, r.hallucinated, r.claim_rows) for r in table.floors[:1]]
    for aggregator in aggregators:
        curves = [(display(r.signal_name), r.claim_scores, r.hallucinated, r.claim_rows)
                  for r in results if r.aggregator == aggregator] + floor_curves
        label = aggregator or "claim-level"  # None: claim-level signals, nothing aggregated
        parts.append(_img(saver.save(curves_figure(curves, f"aggregator: {label}"),
                                     f"methods_{aggregator or 'claim_level'}"),
                          f"All methods, aggregator {label}; shaded: 95% bootstrap bands"))
    if len(aggregators) > 1:
        parts.append("<h2>Aggregators compared</h2>")
        for signal in [s for s in signals if any(r.signal_name == s and r.level == "token" for r in results)]:
            curves = [(r.aggregator or "—", r.claim_scores, r.hallucinated, r.claim_rows)
                      for r in results if r.signal_name == signal]
            label = display(signal)
            parts.append(_img(saver.save(curves_figure(curves, f"method: {label}"), f"aggregators_{signal}"),
                              f"{label}, all aggregators"))
    breakdowns = list(dict.fromkeys(name for r in results for name in r.claim_groups))
    for name in breakdowns:
        parts.append(f"<h2>By {html.escape(name)}</h2>")
        rows = []
        for r in [*results, *table.floors]:
            for value, group in (r.score.by or {}).get(name, {}).items():
                flag = "" if table.deltas is None else table.deltas.flag_cell(method_key(r), name, value)
                rows.append((f"{display(r.signal_name)} / {name}={value}" + (f" [{flag}]" if flag else ""),
                             r.aggregator, group, None, "floor" if r.level == "floor" else ""))
        parts.append(_table(rows, "method / group"))
        for r in results:
            if r.aggregator != aggregators[0]:
                continue
            groups = r.claim_groups[name]
            curves = [(f"{name}={value}", r.claim_scores[groups == value], r.hallucinated[groups == value],
                       r.claim_rows[groups == value] if len(r.claim_rows) else None)
                      for value in sorted(set(groups.tolist()), key=str)]
            caption = f"{display(r.signal_name)} ({r.aggregator or '—'}) by {name}"
            parts.append(_img(saver.save(curves_figure(curves, caption), f"{r.signal_name}_by_{name}"),
                              caption + "; dashed: each group's own base rate"))
    if calibration:
        parts.append(_calibration_html(calibration, saver, display))
    if spans:
        parts.append(_spans_html(spans, display))
    parts.append(_glossary())
    parts.append("</body></html>")
    return "\n".join(parts)


def page(title: str, parts: Sequence[str]) -> str:
    """A self-contained HTML page of the report's style: ``title`` and the ``parts`` (HTML fragments) in order."""
    return "\n".join([f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
                      f"<style>{_STYLE}</style></head><body><h1>{html.escape(title)}</h1>", *parts,
                      "</body></html>"])


def write_report(path: str | os.PathLike, table: EvaluationTable, **kwargs: Any) -> None:
    """Write :func:`render_report`'s page to ``path`` atomically (figures to ``kwargs['figures']`` if given)."""
    from much_metric.fileio import atomic_write_bytes

    atomic_write_bytes(Path(path), render_report(table, **kwargs).encode("utf-8"))


def render_degradation_report(result: Mapping[str, Any], *, title: str = "MUCH input views", source: str = "",
                              figures: str | os.PathLike | None = None) -> str:
    """A self-contained page of the degradation table (``much run --top-k-grid --report``)."""
    from much_metric.report._cost import degradation_section

    intro = (f"<p class='note'>Data: {html.escape(source)} ({result['n_samples']} samples), aggregator "
             f"{html.escape(result['aggregator'])}, {result['n_resamples']} paired bootstrap resamples.</p>")
    notes = "".join(f"<p class='note'>{html.escape(note)}</p>" for note in result.get("notes", []))
    return page(title, [intro, notes, degradation_section(result, FigureSaver(figures))])


def write_degradation_report(path: str | os.PathLike, result: Mapping[str, Any], **kwargs: Any) -> None:
    """Write :func:`render_degradation_report`'s page to ``path`` atomically."""
    from much_metric.fileio import atomic_write_bytes

    atomic_write_bytes(Path(path), render_degradation_report(result, **kwargs).encode("utf-8"))
