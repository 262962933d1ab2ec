"""The report stage: signal files scored on MUCH claims, and what is read off the scores.

Above :mod:`much_metric.signals` (the MUCH-signals file format: reading, writing, metadata, the submission
archive), below the benchmark and the commands:

* :func:`evaluate_signals` -> :class:`EvaluationTable` (rows: :class:`SignalResult`, each holding a
  :class:`much_metric.ScoreResult`; options: one frozen :class:`EvaluationOptions`) -- the one evaluation loop
  behind ``much run`` and ``much evaluate``: joins signals with a MUCH split by ``generation_id``, builds each claim
  layout once, scores every (signal, aggregation) pair and adds the floors;
* :func:`rank_methods` -> :class:`Ranking` (rows: :class:`RankedMethod`) -- methods ranked by one metric on the
  claims they all cover, with paired bootstrap intervals, rank probabilities and p-values;
* :func:`calibrate_table` -> :class:`CalibrationResult` (ECE, Brier, reliability);
* :func:`evaluate_spans` -- Mu-SHROOM IoU / rho of claim scores (:data:`DEFAULT_MUSHROOM`: the repository's copy);
* :func:`write_report` / :func:`render_report` -- a self-contained HTML report (matplotlib, extra ``report``,
  imported on first use), with ROC-AUC against the cost per claim and its Pareto front (:func:`pareto_front`);
  :func:`write_degradation_report` / :func:`render_degradation_report` -- the input-view degradation figure;
  :func:`format_metric` -- a metric with its interval, as every table prints it;
* :func:`paired_deltas` -> :class:`DeltaColumn` -- every method's paired difference to a reference method (the
  Δ column of every table) and the flags of rows not above a floor, with heavy ties or too few samples;
* :class:`RowPairing` -- which samples a table's rows are scored on (paired: the same for every row) and what was
  left out, and why.

The paper's published numbers, printed next to ours, are :mod:`much_metric.report.published`. Ranking, calibration,
spans and the HTML report load on first use: ``import much_metric.report`` stays lean.
"""

from much_metric._lazy import lazy_attributes
from much_metric.report._evaluation import EvaluationTable, SignalResult, evaluate_signals
from much_metric.report._options import BREAKDOWNS, LABEL_CHOICES, MIN_COVERAGE, EvaluationOptions
from much_metric.report._pairing import RowPairing

__all__ = [
    "BREAKDOWNS",
    "LABEL_CHOICES",
    "MIN_COVERAGE",
    "EvaluationOptions",
    "EvaluationTable",
    "RowPairing",
    "SignalResult",
    "evaluate_signals",
    "Ranking",
    "RankedMethod",
    "rank_methods",
    "CalibrationResult",
    "calibrate_table",
    "calibration_json",
    "DEFAULT_MUSHROOM",
    "MUSHROOM_HINT",
    "evaluate_spans",
    "mushroom_source",
    "format_metric",
    "DeltaColumn",
    "method_key",
    "paired_deltas",
    "resolve_method",
    "spans_flags",
    "render_report",
    "write_report",
    "pareto_front",
    "render_degradation_report",
    "write_degradation_report",
    "claims_kept_section",
]

_LAZY = {
    "DeltaColumn": "much_metric.report._delta", "method_key": "much_metric.report._delta",
    "paired_deltas": "much_metric.report._delta",
    "resolve_method": "much_metric.report._delta", "spans_flags": "much_metric.report._spans",
    "rank_methods": "much_metric.report._rank", "Ranking": "much_metric.report._rank",
    "RankedMethod": "much_metric.report._rank",
    "CalibrationResult": "much_metric.report._calibrate", "calibrate_table": "much_metric.report._calibrate",
    "calibration_json": "much_metric.report._calibrate",
    "DEFAULT_MUSHROOM": "much_metric.report._spans", "MUSHROOM_HINT": "much_metric.report._spans",
    "evaluate_spans": "much_metric.report._spans", "mushroom_source": "much_metric.report._spans",
    "format_metric": "much_metric.report._html", "render_report": "much_metric.report._html",
    "write_report": "much_metric.report._html",
    "render_degradation_report": "much_metric.report._html", "write_degradation_report": "much_metric.report._html",
    "pareto_front": "much_metric.report._cost",
    "claims_kept_section": "much_metric.report._kept",
}

__getattr__, __dir__ = lazy_attributes(__name__, _LAZY, globals())
