"""The figures of the HTML report (:mod:`much_metric.report._html`): ROC / PR / rejection curves with 95%
bootstrap bands over the samples, the reliability diagram, and :class:`FigureSaver`, which renders a figure to a
base64 PNG for the page and, with a folder, to PNG + SVG files. matplotlib's Agg canvas, imported lazily (no pyplot
state)."""

from __future__ import annotations

import base64
import io
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from much_metric.scoring import pr_curve, rejection_curve, roc_curve

__all__ = ["SPARSE_BIN_CLAIMS", "FigureSaver", "curves_figure", "reliability_figure"]

#: Reliability-diagram bins with fewer claims are drawn grey and hollow, and not joined by the line.
SPARSE_BIN_CLAIMS = 10
_GRID = np.linspace(0.0, 1.0, 101)
_BAND_RESAMPLES = 200


def _bands(scores: np.ndarray, positive: np.ndarray, rows: np.ndarray | None, seed: int = 0):
    """95% bootstrap bands over samples: TPR at ``_GRID`` FPRs and precision at ``_GRID`` recalls."""
    if rows is None or len(rows) != len(scores) or len(scores) < 10:
        return None
    _, sample = np.unique(rows, return_inverse=True)
    n_samples = int(sample.max()) + 1
    order = np.argsort(-scores, kind="mergesort")
    s, y, sample = scores[order], positive[order], sample[order]
    ends = np.append(np.flatnonzero(np.diff(s)), len(s) - 1)
    rng = np.random.default_rng(seed)
    tprs, precisions = [], []
    for _ in range(_BAND_RESAMPLES):
        weight = np.bincount(rng.integers(0, n_samples, n_samples), minlength=n_samples)[sample].astype(float)
        tp = np.concatenate([[0.0], np.cumsum(weight * y)[ends]])
        fp = np.concatenate([[0.0], np.cumsum(weight * ~y)[ends]])
        if tp[-1] == 0 or fp[-1] == 0:
            continue
        tprs.append(np.interp(_GRID, fp / fp[-1], tp / tp[-1]))
        predicted = tp + fp
        precision = np.where(predicted > 0, tp / np.maximum(predicted, 1), 1.0)
        recall = tp / tp[-1]
        # step-wise precision at each recall level: the precision of the first threshold reaching it
        index = np.minimum(np.searchsorted(recall, _GRID, side="left"), len(recall) - 1)
        precisions.append(precision[index])
    if len(tprs) < 20:
        return None
    return (np.percentile(tprs, [2.5, 97.5], axis=0), np.percentile(precisions, [2.5, 97.5], axis=0))


class FigureSaver:
    """Renders figures to base64 PNG for the page, and to PNG + SVG files when a folder is given."""

    def __init__(self, folder: str | os.PathLike | None):
        self.folder = Path(folder) if folder else None
        if self.folder:
            self.folder.mkdir(parents=True, exist_ok=True)
        self.names: set[str] = set()

    def save(self, fig: Any, name: str) -> str:
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=90)
        if self.folder:
            stem = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_") or "figure"
            while stem in self.names:
                stem += "_"
            self.names.add(stem)
            fig.savefig(self.folder / f"{stem}.png", format="png", dpi=150)
            fig.savefig(self.folder / f"{stem}.svg", format="svg")
        return base64.b64encode(buffer.getvalue()).decode("ascii")


def curves_figure(curves: Sequence[tuple], title: str) -> Any:
    """ROC, PR and rejection panels for (label, claim_scores, hallucinated, claim_rows) curves."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(14, 4.4))
    roc_ax, pr_ax, rej_ax = fig.subplots(1, 3)
    for k, (label, scores, positive, rows) in enumerate(curves):
        if positive.all() or not positive.any():
            continue  # a single class has no curve
        color = f"C{k % 10}"
        fpr, tpr = roc_curve(scores, positive)
        precision, recall, _ = pr_curve(scores, positive)
        roc_ax.plot(fpr, tpr, label=label, linewidth=1.3, color=color)
        pr_ax.step(recall[::-1], precision[::-1], where="pre", label=label, linewidth=1.3, color=color)
        pr_ax.axhline(float(positive.mean()), color=color, linestyle="--", linewidth=0.8, alpha=0.7)
        bands = _bands(scores, positive, rows)
        if bands is not None:
            roc_ax.fill_between(_GRID, *bands[0], color=color, alpha=0.15, linewidth=0)
            pr_ax.fill_between(_GRID, *bands[1], color=color, alpha=0.15, linewidth=0, step="pre")
        rejection = rejection_curve(scores, positive)
        rej_ax.plot(rejection["rejection"], rejection["quality"], label=label, linewidth=1.3, color=color)
        rej_ax.plot(rejection["rejection"], rejection["oracle"], color=color, linestyle=":", linewidth=0.8,
                    alpha=0.7)
        rej_ax.axhline(float(rejection["random"][0]), color=color, linestyle="--", linewidth=0.8, alpha=0.7)
    roc_ax.plot([0, 1], [0, 1], color="#999", linestyle=":", linewidth=1)
    roc_ax.set(xlabel="false positive rate", ylabel="true positive rate (hallucinations found)", title="ROC",
               xlim=(0, 1), ylim=(0, 1.01))
    pr_ax.set(xlabel="recall (hallucinated claims)", ylabel="precision",
              title="Precision-recall (dashed: each curve's base rate)", xlim=(0, 1), ylim=(0, 1.01))
    rej_ax.set(xlabel="fraction of claims rejected (most uncertain first)",
               ylabel="accuracy of the kept claims (correct kept / kept)",
               title="Rejection (PRR; dashed: random, dotted: oracle)", xlim=(0, 1), ylim=(0, 1.01))
    for ax in (roc_ax, pr_ax, rej_ax):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right" if ax is roc_ax else ("upper right" if ax is pr_ax else "lower left"))
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def reliability_figure(calibration: Sequence[Any], display: Callable[[str], str] = str) -> Any:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6, 5))
    ax = fig.subplots()
    ax.plot([0, 1], [0, 1], color="#999", linestyle=":", linewidth=1, label="perfect calibration")
    for k, r in enumerate(calibration):
        d = r.diagram
        filled = d["count"] > 0
        dense = d["count"] >= SPARSE_BIN_CLAIMS
        sparse = filled & ~dense
        name = display(r.signal_name)
        label = name if not r.aggregator else f"{name} ({r.aggregator})"
        color = f"C{k % 10}"
        # The line joins only bins with enough claims: a bin of three claims must not draw a spike.
        ax.plot(d["confidence"][dense], d["rate"][dense], linewidth=0.8, alpha=0.6, color=color)
        # marker area in proportion to the bin's claims: a bin of three claims should not read like one of 500
        sizes = 4 + 200 * d["count"] / max(d["count"].sum(), 1)
        ax.scatter(d["confidence"][dense], d["rate"][dense], s=sizes[dense], color=color, alpha=0.8,
                   label=f"{label}: ECE {r.ece:.3f}")
        ax.scatter(d["confidence"][sparse], d["rate"][sparse], s=sizes[sparse], facecolors="none",
                   edgecolors="#aaa", linewidths=0.8)
        for x, y, n, few in zip(d["confidence"][filled], d["rate"][filled], d["count"][filled], sparse[filled],
                                strict=True):
            ax.annotate(str(int(n)), (x, y), textcoords="offset points", xytext=(3, 3), fontsize=5,
                        color="#aaa" if few else color)
    ax.set(xlabel="predicted P(hallucinated) (bin mean)", ylabel="observed hallucination rate",
           title=f"Reliability diagram\n(numbers: claims per bin; grey, hollow: < {SPARSE_BIN_CLAIMS} claims, "
                 "not joined)",
           xlim=(0, 1), ylim=(0, 1))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    return fig
