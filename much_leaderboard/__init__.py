"""The MUCH leaderboard: a web server that re-scores submitted signals with the toolkit (extra ``leaderboard``).

An application package on top of :mod:`much_metric` (which never imports it): the submission format itself (reading
and checking an archive, its limits, its rejection error) is :func:`much_metric.signals.read_archive`.

* :class:`Leaderboard` -- submit / recover / add the built-in baselines / rank, over a :class:`Store` (SQLite + the
  archives in a folder, one entry per archive content) and an :class:`EvaluationData`; :class:`Outcome` is the
  answer to a submission;
* :class:`PrivateSplit` / :class:`PrivatePolicy` -- a private split (rows published without labels, their label file
  on the server only), attached with :meth:`Leaderboard.attach_private`: every row is ranked on it too, with only a
  rounded ROC-AUC over the whole split shown, within a daily quota;
* :class:`HubMirror` (:class:`HubError`) -- persisting the entries in a hub dataset repository;
* :func:`start` / :func:`serve` / :func:`create_server` -- what ``much-leaderboard serve`` (:func:`main`, also
  ``python -m much_leaderboard``) and the Space's ``app.py`` run (gradio/FastAPI imported on first use);
* the server's two costly steps, for tools and benchmarks that time them on their own: re-scoring
  (:func:`score_submission`, :func:`score_breakdowns`, :func:`rank_rows`) and the main page
  (:func:`table_rows`, :func:`render_table`).
"""

from much_leaderboard._app import create_server, serve, start
from much_leaderboard._cli import main
from much_leaderboard._hub import HubError, HubMirror
from much_leaderboard._private import PrivatePolicy, PrivateSplit
from much_leaderboard._scoring import EvaluationData, rank_rows, score_breakdowns, score_submission
from much_leaderboard._service import BASELINES, NEEDS, Leaderboard, Outcome
from much_leaderboard._store import Store
from much_leaderboard._table import render_table, table_rows

__all__ = [
    "BASELINES",
    "NEEDS",
    "EvaluationData",
    "HubError",
    "HubMirror",
    "Leaderboard",
    "Outcome",
    "PrivatePolicy",
    "PrivateSplit",
    "Store",
    "create_server",
    "main",
    "rank_rows",
    "render_table",
    "score_breakdowns",
    "score_submission",
    "serve",
    "start",
    "table_rows",
]
