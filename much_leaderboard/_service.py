"""The leaderboard service: submissions in, scored rows out, safe under concurrency and restarts.

:meth:`Leaderboard.submit` validates the form and the archive (:func:`much_metric.signals.read_archive`: nothing
is stored for a refused archive), stores the archive and a *pending* row, re-scores it with the toolkit's
evaluation, then marks it accepted -- or removes every trace of it when it does not match the evaluation data.
A process killed while scoring leaves the pending row, which the next :meth:`Leaderboard.recover` re-scores. The
same archive submitted twice (at once or later) is one entry (its SHA-256 is the key). Scoring runs at most
``max_parallel`` at a time (a CPU-bound job on a small Space).

With a private split attached (:meth:`Leaderboard.attach_private`), a submission's values for the private rows are
set aside before anything else (:class:`much_leaderboard.PrivateSplit`), checked against the public rows only,
counted against the submitter's private daily quota, and scored after the public rows are accepted: only their
rounded ROC-AUC is kept (:mod:`much_leaderboard._private_board`).
"""

from __future__ import annotations

import logging
import threading
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from much_leaderboard._admission import Admission, builtin_label, relabel_builtins
from much_leaderboard._pairwise import PAIRWISE_KEY, pairwise_board
from much_leaderboard._pairwise_html import render_pairwise
from much_leaderboard._private import PrivateSplit
from much_leaderboard._private_board import PrivateBoard
from much_leaderboard._scoring import EvaluationData, rank_rows, score_breakdowns, score_submission
from much_leaderboard._store import Store, archive_id
from much_metric.signals import ArchiveLimits, SubmissionRejected, read_archive

__all__ = ["Leaderboard", "Outcome", "NEEDS", "validate_form", "RANK_METRIC", "BASELINES"]

_log = logging.getLogger("much_leaderboard")

#: What a method needs (the submission form's checkboxes and the table's "method type"). "hidden states" and
#: "attention weights" are also set from the archive's ``submission.json`` (``{"internals": [...]}``).
NEEDS = ("probabilities only", "an NLI model", "sampling", "hidden states", "attention weights",
         "training on the auto split")
#: The metric P(rank) is computed for.
RANK_METRIC = "roc_auc"
#: Built-in baselines added to an empty store: the registry's methods that need no model, and KTC where its
#: token-neighbour statistics exist for the evaluation data (the embedded sample ships SmolLM2's).
BASELINES = ("max_likelihood", "token_likelihood", "token_entropy_24", "ktc")
_FIELD_LIMITS = {"method": 80, "authors": 200, "link": 300}


@dataclass
class Outcome:
    """The answer to a submission: ``status`` accepted / duplicate / rejected (the submission breaks a rule) /
    error (a bug of the server while scoring: logged, the submission kept and scored at the next start), the entry
    id, a message."""

    status: str
    message: str
    submission: str | None = None
    signals: list[str] = field(default_factory=list)


def _clean_text(name: str, value: Any, *, required: bool) -> str:
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise SubmissionRejected(f"form field {name!r} must be text")
    value = value.strip()
    if required and not value:
        raise SubmissionRejected(f"form field {name!r} is required")
    if len(value) > _FIELD_LIMITS[name]:
        raise SubmissionRejected(f"form field {name!r}: {len(value)} characters, at most {_FIELD_LIMITS[name]}")
    if any(unicodedata.category(c) in ("Cc", "Cf", "Cs", "Co") for c in value):
        raise SubmissionRejected(f"form field {name!r}: control or invisible formatting characters are refused")
    return value


def validate_form(form: dict[str, Any]) -> dict[str, Any]:
    """The submission form, checked: ``method`` (required), ``authors``, ``link`` (http(s) URL), ``needs`` (a
    subset of :data:`NEEDS`). Text is kept as typed and HTML-escaped wherever it is shown."""
    if not isinstance(form, dict):
        raise SubmissionRejected("the form must be a mapping")
    unknown = sorted(set(form) - {"method", "authors", "link", "needs"})
    if unknown:
        raise SubmissionRejected(f"unknown form field(s) {unknown}")
    out = {name: _clean_text(name, form.get(name), required=name == "method") for name in _FIELD_LIMITS}
    if out["link"] and not out["link"].lower().startswith(("https://", "http://")):
        raise SubmissionRejected("form field 'link' must be an http(s) URL")
    needs = form.get("needs") or []
    if isinstance(needs, str) or not all(isinstance(n, str) and n in NEEDS for n in needs):
        raise SubmissionRejected(f"form field 'needs' must be a list among {list(NEEDS)}")
    out["needs"] = [n for n in NEEDS if n in needs]
    return out


class Leaderboard:
    """A leaderboard over a :class:`Store` folder and an :class:`EvaluationData`.

    Parameters
    ----------
    folder : path
        The store folder (created if needed).
    data : EvaluationData, optional
        The evaluation data (default: the embedded sample, 1000 resamples).
    limits : ArchiveLimits, optional
        Archive limits (default: :class:`much_metric.signals.ArchiveLimits`'s defaults).
    mirror : optional
        An object with ``push(store, submission)`` (e.g. :class:`much_leaderboard.HubMirror`): accepted
        submissions are mirrored there; failures are logged and retried by :meth:`sync`.
    max_parallel : int
        Submissions scored at the same time.
    daily_limit : int
        Submissions one submitter (the ``authors`` field) may make in any 24 hours (default 5); the other rules on
        names are those of :mod:`much_leaderboard._admission`.
    private : PrivateSplit, optional
        A private split (rows without labels, labels on this server): every row is ranked on it too
        (:meth:`attach_private`); it is scored for what the store holds by :meth:`recover`.
    background : bool
        False (default): :meth:`submit` returns when everything is computed. True (the server): it returns once the
        row is scored with its overall intervals and the breakdown point values; the breakdown intervals and P(rank)
        are computed by a background thread (the table shows them when ready; a restart completes what a stopped
        process left, :meth:`recover`). :meth:`join` waits for the background work.
    """

    def __init__(self, folder: str | Path, *, data: EvaluationData | None = None,
                 limits: ArchiveLimits | None = None, mirror: Any = None, max_parallel: int = 1,
                 background: bool = False, daily_limit: int = 5, private: PrivateSplit | None = None) -> None:
        self.store = Store(folder)
        self.data = data if data is not None else EvaluationData()
        self.admission = Admission(self.data, daily_limit=daily_limit)
        self.limits = limits if limits is not None else ArchiveLimits()
        self.mirror = mirror
        self._slots = threading.BoundedSemaphore(max_parallel)
        self._rank_lock = threading.Lock()
        self._complete_lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self.background = background
        if private is not None:
            private.check_disjoint(self.data.dataset, self.data.source)
        #: The private board (:meth:`attach_private`), None without a private split.
        self.private: PrivateBoard | None = None if private is None else PrivateBoard(private, self.store.folder)
        self._label_sources: Any = None
        self._baseline_resources: dict[str, Any] | None = None

    def attach_private(self, split: PrivateSplit) -> PrivateBoard:
        """Rank every row on ``split`` too: its built-in baselines are computed on the private rows and every
        accepted submission's private values are scored (what this label file has not scored yet); from then on a
        submission may hold private values (all private samples or none)."""
        split.check_disjoint(self.data.dataset, self.data.source)
        self.private = PrivateBoard(split, self.store.folder)
        self.private.catch_up(self)
        return self.private

    @property
    def label_sources(self) -> Any:
        """The evaluation data's label sources (:class:`much_leaderboard._label_sources.LabelSources`)."""
        if self._label_sources is None:
            from much_leaderboard._label_sources import LabelSources

            self._label_sources = LabelSources(self.data)
        return self._label_sources

    # -- submissions -----------------------------------------------------------------------------------------
    def submit(self, archive: bytes, form: dict[str, Any], *, kind: str = "submission") -> Outcome:
        """Validate, store and re-score one submission. Never raises for a bad submission: the outcome says."""
        known = self.store.get(archive_id(archive)) if isinstance(archive, bytes | bytearray) else None
        if known is not None:
            return self._duplicate(known)
        try:
            clean = validate_form(form)
            parsed, copies, private = self._parse(archive, kind)
            with self.admission.lock:  # the store's rules and the insertion, together
                if kind == "submission":
                    self.admission.check_entry(self.store, clean)
                    if private and self.private is not None:
                        self.private.reserve(archive_id(archive), clean)
                submission, created = self.store.add_pending(archive, clean, kind=kind)
        except SubmissionRejected as error:
            return Outcome("rejected", f"rejected: {error}")
        if not created:
            return self._duplicate(self.store.get(submission) or {"id": submission, "status": "pending"})
        return self._score(submission, parsed, copies, private)

    def _parse(self, archive: bytes, kind: str) -> tuple[Any, list[str], dict[str, Any]]:
        """The archive read and checked, without the built-ins' own rows (for a submission), their names, and the
        private split's values of the signals kept (empty without a private split)."""
        parsed = read_archive(archive, limits=self.limits)
        private: dict[str, Any] = {}
        if self.private is not None:
            parsed, private = self.private.split.separate(parsed)
        parsed, copies = (parsed, []) if kind == "baseline" else self.admission.filter(parsed)
        return parsed, copies, {name: values for name, values in private.items() if name in parsed.signals}

    @staticmethod
    def _duplicate(known: dict[str, Any]) -> Outcome:
        state = "already on the leaderboard" if known["status"] == "accepted" else "being scored"
        return Outcome("duplicate", f"this archive was submitted before ({state}): one entry", known["id"])

    def _score(self, submission: str, parsed: Any, copies: list[str] = (), private: dict[str, Any] | None = None
               ) -> Outcome:
        with self._slots:
            if not self.store.claim(submission):
                return Outcome("duplicate", "this archive is already scored", submission)
            try:
                kind = (self.store.get(submission) or {}).get("kind")
                rows, arrays = score_submission(parsed, self.data, breakdown_intervals=not self.background,
                                                measured_costs=kind == "baseline")
            except SubmissionRejected as error:
                self.store.discard(submission)
                if self.private is not None:
                    self.private.forget(submission)
                return Outcome("rejected", f"rejected: {error}")
            except Exception:  # noqa: BLE001 -- a bug of the server, not of the submission: never a rejection
                _log.exception("scoring %s failed (server error); left pending, re-scored at the next start",
                               submission[:12])
                return Outcome("error", "server error while scoring (logged for the maintainers); your submission is "
                                        "not rejected: it is kept and scored again when the server restarts",
                               submission)
            # a KeyboardInterrupt (or another BaseException) propagates and leaves the row pending as well
            self.store.accept(submission, rows, arrays)
        note = ""
        if self.private is not None:
            if (self.store.get(submission) or {}).get("kind") == "baseline":
                values = self.private.score_builtins(submission, sorted(rows), self.baseline_resource_options())
            else:
                values = self.private.score(submission, private or {})
            note = "; " + self.private.describe(values)
        self._after_accept(submission)
        self.sync(submission)
        note += f"; {', '.join(copies)}: the built-in baseline's own values, not listed again" if copies else ""
        return Outcome("accepted", f"accepted: {len(rows)} signal(s) re-scored on {self.data.source}{note}",
                       submission, sorted(rows))

    def recover(self) -> list[Outcome]:
        """Re-score every pending submission (a previous process stopped while scoring)."""
        outcomes = []
        for submission in self.store.pending():
            path = self.store.archive_path(submission)
            if not path.is_file():  # its archive was removed with a rejected twin: nothing to score
                _log.warning("pending submission %s has no archive; removed", submission[:12])
                self.store.discard(submission)
                continue
            try:
                parsed, copies, private = self._parse(path.read_bytes(),
                                                      (self.store.get(submission) or {}).get("kind"))
            except SubmissionRejected as error:
                self.store.discard(submission)
                outcomes.append(Outcome("rejected", f"rejected: {error}"))
                continue
            outcomes.append(self._score(submission, parsed, copies, private))
        if self.private is not None:  # entries pulled from a mirror or scored before the private split existed
            self.private.catch_up(self)
        if self.background:
            self._after_accept(None)
        else:
            self.complete_intervals()
            self.refresh_ranking()
        return outcomes

    def sync(self, submission: str | None = None) -> None:
        """Mirror accepted, not yet mirrored submissions (one, or all)."""
        if self.mirror is None:
            return
        for key in [submission] if submission else self.store.unsynced():
            entry = self.store.get(key)
            if entry is None or entry["synced"] or entry["status"] != "accepted":
                continue
            try:
                self.mirror.push(self.store, key)
            except Exception as error:  # noqa: BLE001 -- a mirror outage must not lose the local entry
                _log.warning("mirroring %s failed, will retry at the next sync: %s", key[:12], error)
            else:
                self.store.mark_synced(key)

    # -- built-in baselines ----------------------------------------------------------------------------------
    def baseline_resources(self) -> dict[str, Any]:
        """The resources the built-in baselines read, found once for the public evaluation data (KTC's
        token-neighbour statistics: the shipped SmolLM2 ones for the embedded sample, else None). The private split
        is scored with these same resources: its rows are fresh generations of the public rows' models, for which
        no statistics of their own are shipped."""
        if self._baseline_resources is None:
            from much_metric.baselines.methods.ktc import default_neighbours

            self._baseline_resources = {"neighbours": default_neighbours(self.data.dataset)}
        return self._baseline_resources

    def baseline_resource_options(self) -> Any:
        """:meth:`baseline_resources` as the toolkit's ``ResourceOptions`` (what ``compute_signals`` takes)."""
        from much_metric.baselines import ResourceOptions

        return ResourceOptions(neighbours=self.baseline_resources().get("neighbours"))

    def add_baselines(self, names: tuple[str, ...] = BASELINES) -> list[Outcome]:
        """Compute the registry's model-free baselines on the evaluation data and add them, labelled
        ``baseline``; baselines already on the board are skipped (so a restart adds nothing), and so is one whose
        resource the data lacks (KTC without token-neighbour statistics for it; logged)."""
        import io
        import json
        import tempfile
        import zipfile

        from much_metric.baselines import compute_signals, resolve

        relabel_builtins(self.store)  # rows of an older server: one display name per method (KTC-4-0.3, not ktc)
        present = {r["signal"] for r in self.store.rows() if r["kind"] == "baseline"}
        found = self.baseline_resources()
        wanted = []
        for name in names:
            spec = resolve(name)
            lacking = [need for need in spec.needs if found.get(need) is None]
            if lacking:
                _log.info("built-in baseline %s not added: the evaluation data has no %s for it", name,
                          " or ".join(lacking))
            elif spec.stored_name(found) not in present:
                wanted.append(name)
        outcomes = []
        for name in wanted:
            with tempfile.TemporaryDirectory() as folder:
                compute_signals(self.data.dataset, [name], out=folder, progress=False,
                                resources=self.baseline_resource_options())
                buffer = io.BytesIO()
                with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
                    for path in sorted(Path(folder).iterdir()):
                        if path.name == "timings.json":
                            timings = json.loads(path.read_text(encoding="utf-8"))
                            archive.writestr("timings.json", json.dumps(
                                {k: {"seconds": v["seconds"]} for k, v in timings.items()}))
                        else:
                            archive.write(path, path.name)
            form = {"method": builtin_label(name), "authors": "MUCH toolkit",
                    "link": "", "needs": ["probabilities only"]}
            outcomes.append(self.submit(buffer.getvalue(), form, kind="baseline"))
        return outcomes

    # -- ranking ---------------------------------------------------------------------------------------------
    def _after_accept(self, submission: str | None) -> None:
        if not self.background:
            self.refresh_ranking()
            return
        thread = threading.Thread(target=self._background_job, args=(submission,), daemon=True,
                                  name="much-leaderboard-background")
        self._threads = [t for t in self._threads if t.is_alive()] + [thread]
        thread.start()

    def _background_job(self, submission: str | None) -> None:
        try:
            self.complete_intervals(submission)
            self.refresh_ranking(wait=False)
        except Exception:  # noqa: BLE001 -- a background job logs; the next submission or start retries
            _log.exception("background work after %s failed; retried at the next start",
                           (submission or "start")[:12])

    def join(self, timeout: float | None = None) -> None:
        """Wait for the background work started so far."""
        for thread in list(self._threads):
            thread.join(timeout)

    def complete_intervals(self, submission: str | None = None) -> None:
        """Compute the breakdown intervals of one submission (or of every one still lacking them)."""
        for key in [submission] if submission else self.store.incomplete():
            with self._complete_lock:
                if key not in self.store.incomplete():
                    continue
                parsed, _, _ = self._parse(self.store.archive_path(key).read_bytes(), self.store.get(key)["kind"])
                self.store.complete_breakdowns(key, score_breakdowns(parsed, self.data))

    def refresh_ranking(self, *, wait: bool = True) -> None:
        """Recompute P(rank) when the accepted set changed. ``wait=False``: return at once if another thread is
        computing it (that thread re-checks the accepted set when it is done)."""
        while True:
            if not self._rank_lock.acquire(blocking=wait):
                return  # the thread holding the lock re-checks the version after releasing it
            try:
                version, rows = self.store.version(), self.store.rows()
                cached = self.store.board(RANK_METRIC)
                # the pairwise matrix (_pairwise.py) is cached beside P(rank), once per board state (pairwise())
                if cached is None or cached[1] != version or self.pairwise(rows) is None:
                    keys = [f"{r['submission']}/{r['signal']}" for r in rows]
                    arrays = [self.store.scores(r["submission"], r["signal"]) for r in rows]
                    self.store.save_board(RANK_METRIC, rank_rows(keys, arrays, self.data, metric=RANK_METRIC)
                                          if rows else {}, version)
                    self.store.save_board(PAIRWISE_KEY, pairwise_board(keys, arrays, self.data.bootstrap), version)
            finally:
                self._rank_lock.release()
            if self.store.version() == version:
                return

    def ranking(self) -> dict[str, Any]:
        cached = self.store.board(RANK_METRIC)
        return {} if cached is None else cached[0]

    def pairwise(self, rows: list[dict[str, Any]] | None = None) -> dict[str, Any] | None:
        """The cached pairwise matrix (:func:`much_leaderboard._pairwise.pairwise_board`, key ``"pairwise:roc_auc"``)
        of the board as it is now (``rows``: the store's rows); None while it is computed, never an older board's."""
        cached, rows = self.store.board(PAIRWISE_KEY), self.store.rows() if rows is None else rows
        fresh = cached is not None and cached[1] == self.store.version() and cached[0].get("all_keys") == sorted(
            f"{r['submission']}/{r['signal']}" for r in rows)
        return cached[0] if fresh else None

    def pairwise_html(self) -> str:
        """The pairwise tab's HTML: the matrix and the cost figure (:mod:`much_leaderboard._pairwise_html`)."""
        return render_pairwise(self.pairwise(rows := self.store.rows()), rows)
