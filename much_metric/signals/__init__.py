"""Signal files: the MUCH-signals file format, its metadata, and the submission archive.

* :func:`read_signals` / :func:`write_signals` -- files in the layout of ``orailix/MUCH-signals``
  (``generation_id``, ``signal_name``, ``values``), parquet or JSONL, idempotent writes; a name ending with
  :data:`CLAIM_SUFFIX` holds one value per claim;
* :func:`read_archive` / :class:`ArchiveLimits` / :class:`SubmissionRejected` -- the submission format: an
  untrusted zip of a MUCH-signals folder, validated in memory (sizes, zip bombs, names, links, file types, JSONL
  lines, parquet schema and metadata, a learned signal's training rows) -- what the leaderboard accepts;
* :func:`read_sample_metadata` / :func:`add_sample_metadata` -- per-sample metadata of a signal file (which NLI
  model scored each sample); :func:`read_signal_metadata` / :func:`write_signal_metadata` -- metadata of the whole
  signal (a learned detector's ``training_generation_ids`` and ``detector``), turned into rows to leave out by
  :func:`training_exclusions` (:func:`scored_rows` / :func:`with_scored_rows`: which rows a learned row is scored
  on); a signal computed from an internals pack records it (:func:`internals_pack_record`, checked by
  :func:`check_internals_pack` when the file is resumed or evaluated with ``--internals``);
* :class:`SignalCost` (:func:`cost_of`, key :data:`COST_KEY` of the signal metadata) -- what a signal cost to compute
  (wall and CPU seconds per claim and token, machine and threads, forward passes, samples and model calls beyond the
  stored data), written by ``much run --out``; :class:`DeclaredCost` -- what a leaderboard upload declares.

What is read off the signals -- their evaluation on MUCH claims, the ranking, calibration, span scores and the HTML
report -- is the stage above, :mod:`much_metric.report`. Its names were importable from here until this split; they
still are, with a ``FutureWarning`` naming their new place.
"""

from much_metric._deprecation import moved
from much_metric.signals._cost import (
    COST_KEY,
    DeclaredCost,
    SignalCost,
    cost_of,
    format_seconds,
    machine_record,
)
from much_metric.signals._files import CLAIM_SUFFIX, SignalsFormatError, read_signals, write_signals
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
    "CLAIM_SUFFIX",
    "SignalsFormatError",
    "read_signals",
    "write_signals",
    "ArchiveLimits",
    "ParsedSubmission",
    "SubmissionRejected",
    "SUBMISSION_INTERNALS",
    "read_archive",
    "add_sample_metadata",
    "read_sample_metadata",
    "read_signal_metadata",
    "write_signal_metadata",
    "COST_KEY",
    "DeclaredCost",
    "SignalCost",
    "cost_of",
    "format_seconds",
    "machine_record",
    "DETECTOR_KEY",
    "INTERNALS_PACK_KEY",
    "TRAINING_IDS_KEY",
    "TrainingRowsWarning",
    "check_internals_pack",
    "check_signal_files",
    "internals_pack_record",
    "scored_rows",
    "signal_metadata_of",
    "training_exclusions",
    "training_label",
    "with_scored_rows",
]

#: The submission archive loads on first use (zipfile, pyarrow's schema checks).
_LAZY = {"ArchiveLimits": "much_metric.signals._archive", "ParsedSubmission": "much_metric.signals._archive",
         "SubmissionRejected": "much_metric.signals._archive", "read_archive": "much_metric.signals._archive",
         "SUBMISSION_INTERNALS": "much_metric.signals._archive"}

#: Names of the report stage (and the resample rule, now the metric's) that lived here before the split.
_MOVED = {
    **dict.fromkeys(("BREAKDOWNS", "LABEL_CHOICES", "MIN_COVERAGE", "EvaluationOptions", "EvaluationTable",
                     "SignalResult", "evaluate_signals", "format_metric", "render_report", "write_report",
                     "rank_methods", "CalibrationResult", "calibrate_table", "calibration_json", "DEFAULT_MUSHROOM",
                     "MUSHROOM_HINT", "evaluate_spans", "RowPairing", "pareto_front", "render_degradation_report",
                     "write_degradation_report"), "much_metric.report"),
    **dict.fromkeys(("FLOORS", "ground_truth", "dataset_columns"), "much_metric.report._evaluation"),
    "match_mushroom": "much_metric.report._spans",
    **dict.fromkeys(("PAPER_GENERATION_SECONDS", "PAPER_TABLE7", "REFERENCE_NOTEBOOK", "is_much"),
                    "much_metric.report.published"),
    **dict.fromkeys(("MIN_RANK_RESAMPLES", "MAX_RESAMPLES", "check_resamples"), "much_metric.scoring"),
}

_moved = moved(__name__, _MOVED)


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    return _moved(name)
