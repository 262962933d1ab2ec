"""Signal files and their evaluation: MUCH-signals I/O, the one evaluation loop and the HTML report.

* :func:`read_signals` / :func:`write_signals` -- files in the layout of ``orailix/MUCH-signals``
  (``generation_id``, ``signal_name``, ``values``), parquet or JSONL, idempotent writes;
* :func:`read_archive` / :class:`ArchiveLimits` / :class:`SubmissionRejected` -- the submission format: an
  untrusted zip of a MUCH-signals folder, validated in memory (sizes, zip bombs, names, links, file types, JSONL
  lines, parquet schema and metadata, a learned signal's training rows) -- what the leaderboard accepts;
* :func:`read_sample_metadata` / :func:`add_sample_metadata` -- per-sample metadata of a signal file (which NLI
  model scored each sample); :func:`read_signal_metadata` / :func:`write_signal_metadata` -- metadata of the whole
  signal (a learned detector's ``training_generation_ids`` and ``detector``), turned into rows to leave out by
  :func:`training_exclusions`; a signal computed from an internals pack records it (:func:`internals_pack_record`,
  checked by :func:`check_internals_pack` when the file is resumed or evaluated with ``--internals``);
* :class:`SignalCost` (:func:`cost_of`, key :data:`COST_KEY` of the signal metadata) -- what a signal cost to compute
  (wall and CPU seconds per claim and token, machine and threads, forward passes, samples and model calls beyond the
  stored data), written by ``much run --out``; :class:`DeclaredCost` -- what a leaderboard upload declares;
* :func:`evaluate_signals` -> :class:`EvaluationTable` (rows: :class:`SignalResult`, each holding a
  :class:`much_metric.ScoreResult`; options: one frozen :class:`EvaluationOptions`) -- the loop behind both
  ``much run`` and ``much evaluate``:
  joins signals with a MUCH split by ``generation_id``, builds each claim layout once, and scores every
  (signal, aggregator) pair, by default all on the samples every signal covers (:class:`RowPairing`);
* :func:`write_report` -- a self-contained HTML report (matplotlib, extra ``report``, imported on first use);
* :func:`rank_methods` (leaderboard), :func:`calibrate_table` (ECE/Brier/reliability), :func:`evaluate_spans`
  (Mu-SHROOM IoU/rho of claim scores), published reference numbers (:data:`PAPER_TABLE7`) -- loaded on first use.
"""

from much_metric.signals._cost import (
    COST_KEY,
    DeclaredCost,
    SignalCost,
    cost_of,
    format_seconds,
    machine_record,
)
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
from much_metric.signals._internals import (
    INTERNALS_PACK_KEY,
    check_internals_pack,
    check_signal_files,
    internals_pack_record,
)
from much_metric.signals._metadata import (
    add_sample_metadata,
    read_sample_metadata,
    read_signal_metadata,
    write_signal_metadata,
)
from much_metric.signals._options import EvaluationOptions
from much_metric.signals._pairing import RowPairing
from much_metric.signals._training import (
    DETECTOR_KEY,
    TRAINING_IDS_KEY,
    TrainingRowsWarning,
    scored_rows,
    signal_metadata_of,
    training_exclusions,
    training_label,
    with_scored_rows,
)

__all__ = [
    "BREAKDOWNS",
    "CLAIM_SUFFIX",
    "FLOORS",
    "LABEL_CHOICES",
    "MIN_COVERAGE",
    "ground_truth",
    "COST_KEY",
    "DeclaredCost",
    "SignalCost",
    "cost_of",
    "format_seconds",
    "machine_record",
    "ArchiveLimits",
    "ParsedSubmission",
    "SubmissionRejected",
    "read_archive",
    "SUBMISSION_INTERNALS",
    "add_sample_metadata",
    "read_sample_metadata",
    "read_signal_metadata",
    "write_signal_metadata",
    "DETECTOR_KEY",
    "INTERNALS_PACK_KEY",
    "TRAINING_IDS_KEY",
    "check_internals_pack",
    "check_signal_files",
    "internals_pack_record",
    "TrainingRowsWarning",
    "signal_metadata_of",
    "training_exclusions",
    "training_label",
    "scored_rows",
    "with_scored_rows",
    "EvaluationOptions",
    "EvaluationTable",
    "RowPairing",
    "SignalResult",
    "SignalsFormatError",
    "dataset_columns",
    "evaluate_signals",
    "format_metric",
    "read_signals",
    "render_report",
    "write_report",
    "pareto_front",
    "render_degradation_report",
    "write_degradation_report",
    "write_signals",
    "rank_methods",
    "MIN_RANK_RESAMPLES",
    "MAX_RESAMPLES",
    "check_resamples",
    "CalibrationResult",
    "calibrate_table",
    "calibration_json",
    "DEFAULT_MUSHROOM",
    "MUSHROOM_HINT",
    "evaluate_spans",
    "match_mushroom",
    "PAPER_GENERATION_SECONDS",
    "PAPER_TABLE7",
    "REFERENCE_NOTEBOOK",
    "is_much",
]


_LAZY = {
    "format_metric": "_report", "render_report": "_report", "write_report": "_report",
    "pareto_front": "_report_cost", "render_degradation_report": "_report", "write_degradation_report": "_report",
    "rank_methods": "_rank", "MIN_RANK_RESAMPLES": "_options", "MAX_RESAMPLES": "_options",
    "check_resamples": "_options",
    "CalibrationResult": "_calibrate", "calibrate_table": "_calibrate", "calibration_json": "_calibrate",
    "DEFAULT_MUSHROOM": "_spans", "MUSHROOM_HINT": "_spans", "evaluate_spans": "_spans", "match_mushroom": "_spans",
    "PAPER_GENERATION_SECONDS": "_published", "PAPER_TABLE7": "_published", "REFERENCE_NOTEBOOK": "_published",
    "is_much": "_published",
    "ArchiveLimits": "_archive", "ParsedSubmission": "_archive", "SubmissionRejected": "_archive",
    "read_archive": "_archive", "SUBMISSION_INTERNALS": "_archive",
}


def __getattr__(name: str):
    # Report, leaderboard, calibration and span views load on first use: `import much_metric.signals` stays lean.
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"much_metric.signals.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'much_metric.signals' has no attribute {name!r}")
