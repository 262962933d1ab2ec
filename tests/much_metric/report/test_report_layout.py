"""Report layout: intervals under their value (main tables fit ~1400 px), an unambiguous rejection y-label, and a
reliability diagram that labels bin counts and does not join sparse bins."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from much_metric.report import _figures as _report_figures
from much_metric.report import _html as _report

pytest.importorskip("matplotlib")


def test_metric_cell_puts_the_interval_on_a_second_line():
    assert _report._value_cell("0.629 [0.607, 0.650]") == "0.629<br><span class='ci'>[0.607, 0.650]</span>"
    assert _report._value_cell("0.629") == "0.629"
    assert _report._value_cell("n/a") == "n/a"


def test_reliability_diagram_joins_only_dense_bins_and_labels_counts():
    counts = np.array([0, 3, 50, 2, 80, 40])
    diagram = {"count": counts, "confidence": np.linspace(0.05, 0.95, 6), "rate": np.linspace(0.1, 0.9, 6)}
    result = SimpleNamespace(diagram=diagram, signal_name="max_likelihood", aggregator="product", ece=0.05)
    from much_metric.baselines import display_name

    fig = _report_figures.reliability_figure([result], display_name)  # the command passes the registry's labels
    ax = fig.axes[0]
    joined = [line for line in ax.lines if line.get_label() != "perfect calibration"]
    dense = counts >= _report_figures.SPARSE_BIN_CLAIMS
    assert len(joined) == 1 and np.allclose(joined[0].get_xdata(), diagram["confidence"][dense])
    assert sorted(text.get_text() for text in ax.texts) == sorted(str(n) for n in counts[counts > 0])
    assert "Max Likelihood (product)" in ax.get_legend().get_texts()[1].get_text()


def test_rejection_plot_says_what_its_y_axis_is():
    rng = np.random.default_rng(0)
    scores = rng.random(50)
    positive = rng.random(50) < 0.4
    fig = _report_figures.curves_figure([("m", scores, positive, None)], "t")
    assert fig.axes[2].get_ylabel() == "accuracy of the kept claims (correct kept / kept)"
