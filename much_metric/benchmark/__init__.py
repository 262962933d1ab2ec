"""The benchmark layer: a run of the paper's table 3 as one call, above the baselines and the signals.

* :func:`run_benchmark` -> :class:`BenchmarkResult` -- what ``much run`` does: plan, compute, time, evaluate;
* :func:`evaluate_files` -> :class:`EvaluationReport` -- what ``much evaluate`` does: read signal files, evaluate
  them on a MUCH split, and rank, calibrate and score spans as :class:`ReportOptions` asks;
* :func:`plan_benchmark` -> :class:`BenchmarkPlan` -- the data, the signals and their resources (tokenizers, NLI
  model, neighbour statistics) resolved once;
* the options, grouped and checked when built: :class:`EvaluationOptions` (the report layer's, shared with
  :func:`~much_metric.report.evaluate_signals`), :class:`DataOptions`, :class:`NliOptions` (its ``batching`` a
  :class:`~much_metric.baselines.NliBatching`), :class:`ResourceOptions` (the baselines layer's, shared with
  :func:`~much_metric.baselines.compute_signals`), :class:`OutputOptions`;
* :func:`degradation_table` -> :class:`DegradationResult` -- the probability methods and learned detectors on input
  views of 0, 1, 5, 20 and 24 candidates, each compared with itself on the stored 24 (``much run --top-k-grid``);
* :mod:`much_metric.benchmark.resources` -- how each resource is found (packaged, cached, hub) or why not.

This package imports the baselines (registry, :func:`~much_metric.baselines.compute_signals`), the report and the
scoring; none of them imports it.
"""

from __future__ import annotations

from much_metric._lazy import lazy_attributes

_LAZY = {
    "run_benchmark": "much_metric.benchmark._run",
    "evaluate_files": "much_metric.benchmark._evaluate",
    "EvaluationReport": "much_metric.benchmark._report_options",
    "ReportOptions": "much_metric.benchmark._report_options",
    "plan_benchmark": "much_metric.benchmark._plan",
    "check_signals": "much_metric.benchmark._plan",
    "BenchmarkPlan": "much_metric.benchmark._plan",
    "BenchmarkResult": "much_metric.benchmark._result",
    "BenchmarkRow": "much_metric.benchmark._result",
    "BenchmarkNote": "much_metric.benchmark._result",
    "degradation_table": "much_metric.benchmark._degradation",
    "DegradationResult": "much_metric.benchmark._degradation",
    "DegradationRow": "much_metric.benchmark._degradation",
    "DegradationCell": "much_metric.benchmark._degradation",
    "DEGRADATION_GRID": "much_metric.benchmark._degradation",
    "EvaluationOptions": "much_metric.report",
    "DataOptions": "much_metric.benchmark._options",
    "NliOptions": "much_metric.benchmark._options",
    "ResourceOptions": "much_metric.baselines",
    "OutputOptions": "much_metric.benchmark._options",
}

__all__ = list(_LAZY)

__getattr__, __dir__ = lazy_attributes(__name__, _LAZY, globals())
