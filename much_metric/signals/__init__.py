"""Signal files and their evaluation: MUCH-signals I/O, the one evaluation loop and the HTML report.

* :func:`read_signals` / :func:`write_signals` -- files in the layout of ``orailix/MUCH-signals``
  (``generation_id``, ``signal_name``, ``values``), parquet or JSONL, idempotent writes;
* :func:`read_sample_metadata` / :func:`add_sample_metadata` -- per-sample metadata of a signal file (which NLI
  model scored each sample);
* :func:`evaluate_signals` -> :class:`EvaluationTable` -- the loop behind both ``much run`` and ``much evaluate``:
  joins signals with a MUCH split by ``generation_id``, builds each claim layout once, and scores every
  (signal, aggregator) pair;
* :func:`write_report` -- a self-contained HTML report (matplotlib, extra ``report``, imported on first use).
"""

from much_metric.signals._evaluation import (
    BREAKDOWNS,
    CLAIM_SUFFIX,
    FLOORS,
    LABEL_CHOICES,
    MIN_COVERAGE,
    EvaluationTable,
    SignalResult,
    dataset_columns,
    evaluate_signals,
    ground_truth,
)
from much_metric.signals._files import SignalsFormatError, read_signals, write_signals
from much_metric.signals._metadata import add_sample_metadata, read_sample_metadata

__all__ = [
    "BREAKDOWNS",
    "CLAIM_SUFFIX",
    "FLOORS",
    "LABEL_CHOICES",
    "MIN_COVERAGE",
    "ground_truth",
    "add_sample_metadata",
    "read_sample_metadata",
    "EvaluationTable",
    "SignalResult",
    "SignalsFormatError",
    "dataset_columns",
    "evaluate_signals",
    "format_metric",
    "read_signals",
    "render_report",
    "write_report",
    "write_signals",
]


def __getattr__(name: str):
    # The report imports nothing heavy at module level, but keeping it lazy keeps `import much_metric.signals` lean.
    if name in ("format_metric", "render_report", "write_report"):
        from much_metric.signals import _report

        return getattr(_report, name)
    raise AttributeError(f"module 'much_metric.signals' has no attribute {name!r}")
