"""``much run``'s first table (table 3's columns: runtimes, ROC-AUC, PR-AUC and AP) with the paired Δ ROC-AUC
column and the rows' flags (:func:`much_metric.report.paired_deltas`), and the ``--baseline`` check made before any
signal is computed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from much_metric.cli._text import footnote, text_table

__all__ = ["TABLE3_METRICS", "check_baseline", "print_table3", "table_deltas"]

#: The first table's metrics: AP beside PR-AUC, which the reference's trapezoid inflates for tied scores.
TABLE3_METRICS = ("roc_auc", "pr_auc", "average_precision")


def check_baseline(baseline: str | None, signals: Sequence[str] | None) -> None:
    """``--baseline`` names one of the ``--signals`` (checked before any signal is computed; with the default signals
    it is checked against the table once computed)."""
    if baseline is None or signals is None:
        return
    from much_metric.baselines import display_name
    from much_metric.report import resolve_method

    resolve_method(baseline, list(signals), display_name)


def table_deltas(table: Any, baseline: str | None, bootstrap: Any) -> Any:
    """The table's paired Δ ROC-AUC column against ``baseline`` (None: the best row) and its flags, set on the table
    too (the report draws the column the terminal prints); None without a table (labels withheld)."""
    if table is None:
        return None
    from much_metric.baselines import display_name
    from much_metric.report import paired_deltas

    table.deltas = paired_deltas(table, metric="roc_auc", baseline=baseline, bootstrap=bootstrap,
                                 display=display_name)
    return table.deltas


def print_table3(result: Any, deltas: Any) -> None:
    """Table 3's columns (runtimes, ROC-AUC, PR-AUC, AP) with the paired Δ column and flags, and their legend."""
    from much_metric.baselines import display_name
    from much_metric.baselines.runtime import format_runtime
    from much_metric.report import format_metric, method_key
    from much_metric.scoring import METRIC_TABLE

    generation = result.generation.seconds
    labels = {metric.key: metric.label for metric in METRIC_TABLE}
    key_of = {r.signal_name: method_key(r) for r in [*result.table.results, *result.table.floors]}

    def paired(row: Any) -> list[str]:
        key = key_of.get(row.signal_name, row.signal_name)
        return [] if deltas is None else [deltas.cell(key), deltas.flag_cell(key)]

    if deltas is not None:
        print(deltas.describe(display_name))
    print(text_table(
        [[r.method, format_runtime(r.segmentation_seconds, generation), format_runtime(r.uq_seconds, generation),
          format_runtime(r.total_seconds, generation), *(format_metric(r.score, key) for key in TABLE3_METRICS),
          *paired(r)] for r in result.rows]
        + [[r.method, "", "", "", *(format_metric(r.score, key) for key in TABLE3_METRICS), *paired(r)]
           for r in result.floors],
        ["Method", "Segmentation", "UQ", "Total", *(labels[key] for key in TABLE3_METRICS),
         *([deltas.header(), "flags"] if deltas is not None else [])],
    ))
    legend = "" if deltas is None else deltas.legend()
    if legend:
        print(footnote("Flags: " + legend))
