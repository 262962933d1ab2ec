"""The private split: rows published without labels, their labels on this server only
(docs/leaderboard.md#hidden-split).

:class:`PrivateSplit` joins the rows of a withheld export (``python -m builder export --withhold-labels``, loaded with
:func:`much_dataset.load`) and their label file (:func:`much_dataset.label_files.read_label_file`: digest, format and
rows checked) in memory. :class:`PrivatePolicy` is what the board may tell a submitter about them:

* one number per signal, its ROC-AUC over **every** claim of the split (a signal covers every private sample or
  none: no subset, hence no metric over a few claims), rounded to ``decimals`` (2: a grid of 0.01);
* only when the split holds at least ``min_claims`` evaluated claims (checked when the split is loaded);
* no interval, no breakdown, no curve, no count of hallucinated claims; ranks are computed from the rounded values
  (so they reveal nothing the values do not);
* at most ``daily_limit`` submissions with private values per submitter in any 24 hours, and at most
  ``board_daily_limit`` from all submitters together (names are free to make up: the board-wide cap bounds what the
  labels can leak per day whatever the names).

Whatever a submission does, one answer tells at most :meth:`PrivatePolicy.bits_per_submission` bits about the labels
(log2 of the number of answers it can get); the probing attack of ``benchmarks/bench_private_probing.py`` is measured
against that bound. Validation of a submission's private values uses the public rows only (no message depends on a
label), and any failure of the scoring itself is a generic message (logged without the values).
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from much_dataset import schema
from much_metric.signals import CLAIM_SUFFIX, ParsedSubmission, SubmissionRejected

__all__ = ["PrivatePolicy", "PrivateSplit", "check_label_file_place"]

_log = logging.getLogger("much_leaderboard")
#: Columns that make two rows one row whatever their ids (same config, same question, same answer).
_SAME_ROW = (schema.GENERATION_CONFIG, schema.PROMPT, schema.OUTPUT)


def check_label_file_place(labels: str | Path, *published: str | Path) -> None:
    """The label file's guards (docs/leaderboard.md#hidden-split): owner-readable only (no permission for the
    group or others; refused with the ``chmod`` that fixes it) and inside none of the ``published`` folders (the
    ``--private-data`` rows, the ``--data`` rows: the rule of ``builder export --withhold-labels``)."""
    import os
    import stat

    from much_dataset.label_files import check_outside_published

    path = Path(labels)
    if os.name == "posix" and path.is_file():
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode & 0o077:
            raise ValueError(f"--private-labels {labels}: readable or writable by others (mode {mode:o}); the "
                             f"labels must be owner-readable only: chmod 600 {labels}")
    elif os.name != "posix":  # no POSIX permission bits to read here: say what to check instead
        _log.warning("--private-labels %s: cannot check its permissions on this platform; make sure only the "
                     "server's account can read it", labels)
    for folder in published:
        if Path(folder).is_dir():  # a hub repository id holds no local file
            try:
                check_outside_published(labels, folder)
            except ValueError as error:
                raise ValueError(f"--private-labels {error}") from None


@dataclass(frozen=True)
class PrivatePolicy:
    """What the private board shows and how often (module docstring).

    Parameters
    ----------
    decimals : int
        Digits of the private ROC-AUC shown (default 2).
    min_claims : int
        Least number of evaluated claims (EOS claims excluded) the private split must hold (default 1000).
    daily_limit : int
        Submissions with private values one submitter (the ``authors`` field) may make in any 24 hours (default 1).
    board_daily_limit : int
        Submissions with private values all submitters together may make in any 24 hours (default 10): the bound
        on the answers, hence on the information about the labels, per day, however many names submit.
    """

    decimals: int = 2
    min_claims: int = 1000
    daily_limit: int = 1
    board_daily_limit: int = 10

    def __post_init__(self) -> None:
        for name, least in (("decimals", 0), ("min_claims", 1), ("daily_limit", 1), ("board_daily_limit", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ValueError(f"PrivatePolicy: {name} must be an integer >= {least}, got {value!r}")
        if self.decimals > 4:
            raise ValueError(f"PrivatePolicy: decimals must be at most 4 (finer values probe the labels faster), got "
                             f"{self.decimals}")

    @property
    def levels(self) -> int:
        """How many values a private ROC-AUC can show: 0, 10**-decimals, ..., 1."""
        return 10 ** self.decimals + 1

    def rounded(self, value: float) -> float | None:
        """``value`` as shown (None for an undefined metric)."""
        return None if value is None or not math.isfinite(value) else round(float(value), self.decimals)

    def bits_per_submission(self, n_signals: int) -> float:
        """The most a submission of ``n_signals`` signals can learn about the labels: log2 of the number of answers
        it can get (each signal's value is one of :attr:`levels`; ranks are functions of these values)."""
        return n_signals * math.log2(self.levels)


class PrivateSplit:
    """The private split: its public rows (no labels) and, in memory only, the same rows with their labels.

    Parameters
    ----------
    data : str or path
        The published rows (a folder written by ``builder export --withhold-labels``; anything
        :func:`much_dataset.load` reads): they must have no label column.
    labels : path
        The label file of these rows (with its ``.sha256``).
    policy : PrivatePolicy, optional
        Rounding, minimum number of claims, daily limit.
    """

    def __init__(self, data: str | Path, labels: str | Path, *, policy: PrivatePolicy | None = None) -> None:
        import datasets

        import much_dataset
        from much_dataset.label_files import read_label_file

        self.policy = policy if policy is not None else PrivatePolicy()
        self.source = str(data)
        check_label_file_place(labels, data)
        rows = much_dataset.load(str(data))
        if isinstance(rows, datasets.DatasetDict):
            rows = datasets.concatenate_datasets([rows[name] for name in rows])
        present = [name for name in schema.LABEL_COLUMNS if name in rows.column_names]
        if present:
            raise ValueError(f"--private-data {data}: the rows carry label column(s) {present}; a private split is "
                             "published without labels (python -m builder export --withhold-labels)")
        label_file = read_label_file(labels, rows=rows)
        self.rows = rows
        self.labels_sha256 = label_file.sha256
        ids = [str(g) for g in rows[schema.GENERATION_ID]]
        self.ids = frozenset(ids)
        self.n_tokens = dict(zip(ids, (len(t) for t in rows[schema.OUTPUT_TOKENS]), strict=True))
        self.n_chunks = dict(zip(ids, (len(c) for c in rows[schema.TOKEN_CHUNKS]), strict=True))
        self.n_claims = sum(n - 1 for n in self.n_chunks.values())  # the EOS claims are not evaluated
        if self.n_claims < self.policy.min_claims:
            raise ValueError(f"--private-labels {labels}: the private split holds {self.n_claims} evaluated claims, "
                             f"fewer than the minimum of {self.policy.min_claims} below which a metric over all of "
                             "them says too much about each label (docs/leaderboard.md#hidden-split)")
        evaluated = {value for gid in ids for value in label_file.rows[gid][schema.LABELS][:-1]}
        if len(evaluated) < 2:
            raise ValueError(f"--private-labels {labels}: every evaluated claim of the private split has one and the "
                             "same label; ROC-AUC is undefined on one class, so every submitter would read null "
                             "(a split for a board holds hallucinated and supported claims)")
        self._content = frozenset(zip(*(map(str, rows[name]) for name in _SAME_ROW), strict=True))
        columns = {name: [label_file.rows[gid][name] for gid in ids] for name in label_file.columns}
        labelled = rows
        for name in schema.LABEL_COLUMNS:
            labelled = labelled.add_column(name, columns.get(name) or [list(schema.NO_HUMAN_LABEL)] * len(ids))
        target = schema.features(with_stopword_mask=schema.STOPWORD_MASK in labelled.column_names)
        self._labelled = labelled.cast(datasets.Features({name: target[name] for name in labelled.column_names}))

    def check_disjoint(self, public: Any, source: str) -> None:
        """Refuse public rows (``--data``) that share a row with this split, by ``generation_id`` or by content (the
        same config, prompt and output under another id): the private rows would be public with their labels."""
        ids = [str(g) for g in public[schema.GENERATION_ID]]
        shared = sorted(self.ids.intersection(ids))
        if not shared:
            content = zip(*(map(str, public[name]) for name in _SAME_ROW), strict=True)
            shared = sorted(gid for gid, key in zip(ids, content, strict=True) if key in self._content)
        if shared:
            raise ValueError(f"--data {source} and --private-data {self.source} share {len(shared)} row(s) (e.g. "
                             f"generation_id={shared[0]!r}): the private rows would be public with their labels; a "
                             "private split holds rows the public data does not")

    def __repr__(self) -> str:  # never the labels
        return f"PrivateSplit({self.source!r}, {len(self.ids)} rows, {self.n_claims} claims, {self.policy})"

    # -- a submission's private part -------------------------------------------------------------------------
    def separate(self, parsed: ParsedSubmission) -> tuple[ParsedSubmission, dict[str, dict[str, np.ndarray]]]:
        """The submission without its private values, and those values (``{signal: {generation_id: values}}``,
        only signals that have some). Checks them against the public rows only: a signal covers every private
        sample or none, with one value per token (per chunk for ``@claim``), finite, in [0, 1] for token values.
        Raises :class:`~much_metric.signals.SubmissionRejected`."""
        public, private = {}, {}
        for name, per_sample in parsed.signals.items():
            mine = {gid: values for gid, values in per_sample.items() if gid in self.ids}
            rest = {gid: values for gid, values in per_sample.items() if gid not in self.ids}
            if mine and not rest:
                raise SubmissionRejected(f"signal {name!r} has values for the private split only; every signal is "
                                         "scored on the public split, its private values are optional (one archive "
                                         "with both: much-leaderboard archive PUBLIC PRIVATE --out submission.zip)")
            public[name] = rest
            if mine:
                self._check(name, mine)
                private[name] = mine
        for name, info in parsed.learned.items():
            seen = info["training_generation_ids"] & self.ids
            if seen and name in private:
                raise SubmissionRejected(f"signal {name!r}: its detector was trained or validated on {len(seen)} rows "
                                         "of the private split; train it without them")
        return dataclasses.replace(parsed, signals=public), private

    def _check(self, name: str, values: Mapping[str, np.ndarray]) -> None:
        if len(values) != len(self.ids):
            raise SubmissionRejected(
                f"signal {name!r}: values for {len(values)} of the {len(self.ids)} private samples; the private split "
                "is scored on all of its samples or not at all (send all of them, or none)")
        claim_level = name.endswith(CLAIM_SUFFIX)
        expected = self.n_chunks if claim_level else self.n_tokens
        for gid, array in values.items():
            array = np.asarray(array, dtype=np.float64)
            if array.ndim != 1 or len(array) != expected[gid]:
                unit = "chunk" if claim_level else "output token"
                raise SubmissionRejected(f"signal {name!r}, generation_id={gid!r} (private split): {len(array)} "
                                         f"values, expected one per {unit} ({expected[gid]})")
            if not np.isfinite(array).all():
                raise SubmissionRejected(f"signal {name!r}, generation_id={gid!r} (private split): values must be "
                                         "finite")
            if not claim_level and (array.min() < 0 or array.max() > 1):
                raise SubmissionRejected(f"signal {name!r}, generation_id={gid!r} (private split): token values must "
                                         "lie in [0, 1]")

    def score(self, private: Mapping[str, Mapping[str, np.ndarray]]) -> dict[str, float | None]:
        """Each signal's ROC-AUC on the private split as shown (rounded; None when undefined). Values are
        expected checked by :meth:`separate`; any failure here is logged by type only and raised as a generic
        ``RuntimeError`` (its message cannot carry anything about a label)."""
        from much_metric.report import EvaluationOptions, evaluate_signals

        if not private:
            return {}
        options = EvaluationOptions(aggregation="product", bootstrap=None, floors=False, min_coverage=1.0)
        # No warnings filter (process-wide state): a warning goes to the server's stderr, which no submitter reads.
        try:
            table = evaluate_signals(self._labelled, dict(private), evaluation=options)
            found = {r.signal_name: r.score.roc_auc for r in table.results}
        except Exception as error:  # noqa: BLE001 -- a message here could name what only the labels decide
            _log.error("private scoring failed (%s); details withheld", type(error).__name__)
            raise RuntimeError("private scoring failed (logged for the maintainers)") from None
        return {name: self.policy.rounded(found.get(name)) for name in private}
