"""A public leaderboard of claim-level hallucination detectors: submissions re-scored on the server.

* :func:`read_archive` / :class:`Limits` / :class:`SubmissionRejected` -- an untrusted zip of a MUCH-signals folder,
  validated in memory (sizes, zip bombs, names, links, file types, JSONL lines, parquet schema and metadata);
* :class:`Store` -- SQLite + archives in a folder, one entry per archive content (SHA-256);
* :class:`EvaluationData`, :func:`score_submission`, :func:`rank_rows` -- re-scoring with the toolkit's own
  evaluation (never the submitted numbers) and P(rank) across rows;
* :class:`Leaderboard` -- submit / recover / seed built-in baselines / mirror to a hub dataset repository
  (:class:`HubMirror`);
* :func:`table_rows` / :func:`render_table` -- the main table; :func:`build_app` / :func:`create_server` -- the
  Gradio app (extra ``leaderboard``; gradio is imported on first use); :func:`start` / :func:`serve` -- what
  ``much leaderboard serve`` and the Space's ``app.py`` run.
"""

from much_metric.leaderboard._app import build_app, create_server, serve, start
from much_metric.leaderboard._archive import Limits, ParsedSubmission, SubmissionRejected, read_archive
from much_metric.leaderboard._hub import HubError, HubMirror
from much_metric.leaderboard._scoring import EvaluationData, rank_rows, score_breakdowns, score_submission
from much_metric.leaderboard._service import BASELINES, NEEDS, RANK_METRIC, Leaderboard, Outcome, validate_form
from much_metric.leaderboard._store import Store, archive_id
from much_metric.leaderboard._table import published_html, render_submission, render_table, subsets, table_rows

__all__ = [
    "BASELINES",
    "NEEDS",
    "RANK_METRIC",
    "EvaluationData",
    "HubError",
    "HubMirror",
    "Leaderboard",
    "Limits",
    "Outcome",
    "ParsedSubmission",
    "Store",
    "SubmissionRejected",
    "archive_id",
    "build_app",
    "create_server",
    "serve",
    "start",
    "published_html",
    "rank_rows",
    "render_submission",
    "render_table",
    "subsets",
    "table_rows",
    "read_archive",
    "score_breakdowns",
    "score_submission",
    "validate_form",
]
