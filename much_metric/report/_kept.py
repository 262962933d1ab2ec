"""The report's "claims kept at alpha" section: a table and the retention-vs-alpha figure
(``much evaluate --claims-kept --report``; :func:`much_metric.conformal.claims_kept`)."""

from __future__ import annotations

import html
import os
from typing import Any

from much_metric.report._figures import FigureSaver

__all__ = ["claims_kept_figure", "claims_kept_section"]


def claims_kept_figure(kept: Any) -> Any:
    """Fraction of the test claims kept (solid) and of the correct claims kept (dashed) against alpha, one colour
    per detector, shaded: the central 95 % of the splits."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 4.6))
    ax = fig.subplots()
    alphas = list(kept.alphas)
    for k, name in enumerate(kept.kept):
        color = f"C{k % 10}"
        rows = [kept.summary(name, alpha) for alpha in alphas]
        ax.plot(alphas, [r["kept"] for r in rows], marker="o", color=color, label=name, linewidth=1.4)
        ax.fill_between(alphas, [r["kept_interval"][0] for r in rows], [r["kept_interval"][1] for r in rows],
                        color=color, alpha=0.15, linewidth=0)
        ax.plot(alphas, [r["correct_kept"] for r in rows], linestyle="--", color=color, linewidth=1.0)
    ax.set(xlabel="alpha (error level of the guarantee)", ylabel="fraction of test claims kept",
           title=f"Claims kept by a {kept.guarantee}-level conformal filter (dashed: of the correct claims)",
           ylim=(0, 1.01))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    return fig


def claims_kept_section(kept: Any, figures: str | os.PathLike | None = None) -> str:
    """The HTML section: per detector and alpha, the mean fraction kept with the splits' central 95 % range, and the
    figure (also saved as PNG and SVG in the folder ``figures`` when given)."""
    head = "".join(f"<th>kept at &alpha;={alpha:g}</th><th>correct kept</th>" for alpha in kept.alphas)
    out = ["<h2>Claims kept at &alpha;</h2>",
           f"<p class='note'>{kept.guarantee}-level conformal filter calibrated on a seeded half of the answers and "
           f"applied to the other half; mean over {kept.n_splits} splits, in brackets the central 95 % of the "
           "splits. Every detector sees the same splits (paired).</p>",
           f"<table><tr><th>method</th>{head}</tr>"]
    for name in kept.kept:
        cells = ""
        for alpha in kept.alphas:
            s = kept.summary(name, alpha)
            low, high = s["kept_interval"]
            cells += f"<td>{s['kept']:.3f} [{low:.3f}, {high:.3f}]</td><td>{s['correct_kept']:.3f}</td>"
        out.append(f"<tr><td class='name'>{html.escape(name)}</td>{cells}</tr>")
    out.append("</table>")
    png = FigureSaver(figures).save(claims_kept_figure(kept), "claims_kept")
    out.append(f"<figure><img src='data:image/png;base64,{png}' alt='claims kept against alpha'>"
               "<figcaption>Claims kept against alpha (shaded: central 95 % of the splits)</figcaption></figure>")
    return "\n".join(out)
