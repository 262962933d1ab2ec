"""Re-scoring a submission with the toolkit's own evaluation: the submitted numbers are never read.

:class:`EvaluationData` loads the evaluation split once (the embedded sample by default, ``orailix/MUCH`` or a local
folder). :func:`score_submission` runs :func:`much_metric.report.evaluate_signals` (one value per output token,
or per chunk for ``@claim`` signals; coverage at least :data:`much_metric.report.MIN_COVERAGE`; finite values)
with the product aggregator, every metric of :data:`much_metric.scoring.METRIC_TABLE` with seeded bootstrap
intervals, on the whole data and on each language's, each generating model's and (when the data has human labels)
the ``manual`` and ``auto`` selections' samples alone (the evaluation ``much evaluate --config fr`` or
``--selection manual`` runs; a group holding every sample reuses the overall values). :func:`rank_rows` ranks
every accepted row on the claims all of them cover with :func:`much_metric.report.rank_methods` (P(rank),
language gap).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from much_dataset.jsonl import plain_json
from much_metric.signals import ParsedSubmission, SubmissionRejected

if TYPE_CHECKING:
    from much_metric.scoring import Bootstrap

__all__ = ["EvaluationData", "score_submission", "score_breakdowns", "rank_rows", "jsonable", "BREAKDOWNS",
           "cost_record"]

#: Breakdowns computed for every row (the table's filters).
BREAKDOWNS = ("lang", "model")


def jsonable(value: Any) -> Any:
    """Plain JSON types (numpy converted, nan/inf -> None): :func:`much_dataset.jsonl.plain_json`."""
    return plain_json(value)


@dataclass
class EvaluationData:
    """The evaluation split and what the table needs of it, loaded once.

    Parameters
    ----------
    source : str
        ``"sample"`` (default: the embedded sample, offline), ``"orailix/MUCH"`` or a local folder.
    n_resamples : int
        Bootstrap resamples for the intervals and P(rank) (1000 on a public board), seeded with 0 so every submission
        sees the same replicates. The rule of ``much run`` / ``much evaluate --bootstrap``
        (:func:`much_metric.scoring.check_resamples`): 0 = no intervals and no P(rank) (rows ranked by their point
        values), else :data:`much_metric.scoring.RESAMPLES` (40 to 100000).
    split : str or None
        Only this split of ``source`` (``"test"``: a board over a new export that serves its held-out rows, so that a
        learned detector trained on the export's train split can be submitted); None = every split.
    """

    source: str = "sample"
    n_resamples: int = 1000
    dataset: Any = field(default=None, repr=False)
    split: str | None = None
    selections: tuple[str, ...] = ()
    generation_seconds: float | None = None
    langs: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    groups: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)
    _floors: list[Any] | None = field(default=None, repr=False, init=False)

    def floor_results(self) -> list[Any]:
        """The floors (random, constant, claim length: :data:`much_metric.report.EvaluationTable.floors`) on every
        labelled sample of this data, computed once: what a row's ``floor`` flag is paired against."""
        if self._floors is None:
            from much_metric.report import EvaluationOptions, evaluate_signals

            options = EvaluationOptions(bootstrap=None, floors=True, paired=False, progress=False)
            # evaluate_signals wants a signal: a constant one on every sample; only its floors are kept
            constant = {gid: np.zeros(len(tokens)) for gid, tokens in zip(
                self.dataset["generation_id"], self.dataset["output_tokens"], strict=True)}
            self._floors = list(evaluate_signals(self.dataset, {"constant": constant}, evaluation=options).floors)
        return self._floors

    @property
    def bootstrap(self) -> Bootstrap | None:
        """The resampling of every interval and P(rank) on this board (fixed seed 0); None with 0 resamples."""
        from much_metric.scoring import Bootstrap

        return Bootstrap(n_resamples=self.n_resamples, random_state=0) if self.n_resamples else None

    def __post_init__(self) -> None:
        from much_metric.scoring import check_resamples

        check_resamples(self.n_resamples, "n_resamples")  # the rule of much run / much evaluate: 0 = no intervals
        if self.split is not None and self.split not in ("train", "test"):
            raise ValueError(f"split must be 'train', 'test' or None (every split), got {self.split!r}")
        if self.dataset is None:
            import datasets

            import much_dataset

            loaded = much_dataset.load(self.source, split=self.split)
            if isinstance(loaded, datasets.DatasetDict):
                loaded = datasets.concatenate_datasets([loaded[name] for name in loaded])
            self.dataset = loaded
        from much_dataset.schema import LABELS, MUCH_GENERATION_CONFIGS

        if LABELS not in self.dataset.column_names:  # a withheld split: a board over it would rank nothing
            raise ValueError(f"--data {self.source}: the rows have no {LABELS!r} column (a split published with its "
                             "labels withheld); a public board ranks on labelled rows: serve these rows as "
                             "--private-data with their --private-labels, beside labelled --data")

        values = {"lang": [str(v) for v in self.dataset["lang"]],
                  "model": [str(MUCH_GENERATION_CONFIGS.get(c, {}).get("model", f"unknown ({c})"))
                            for c in self.dataset["generation_config"]]}
        if "human_labels_0" in self.dataset.column_names:
            from much_dataset.selection import select_samples

            manual = set(select_samples(self.dataset, manual=True)["generation_id"])
            auto = set(select_samples(self.dataset, manual=False)["generation_id"])
            if manual:  # the sample has no human label at all: no selection filter
                values["selection"] = ["manual" if g in manual else "auto" if g in auto else "disagreed"
                                       for g in self.dataset["generation_id"]]
        self.langs = tuple(sorted(set(values["lang"])))
        self.models = tuple(sorted(set(values["model"])))
        self.selections = tuple(v for v in ("manual", "auto") if v in set(values.get("selection", ())))
        # one sub-dataset per language / model (what `much evaluate --config fr` evaluates); None = the whole data
        self.groups = {}
        for breakdown, per_row in values.items():
            indices: dict[str, list[int]] = {}
            for row, value in enumerate(per_row):
                indices.setdefault(value, []).append(row)
            self.groups[breakdown] = {value: None if len(rows) == len(per_row) else self.dataset.select(rows)
                                      for value, rows in sorted(indices.items()) if value != "disagreed"}
        if self.generation_seconds is None:
            from much_metric.baselines.runtime import generation_time

            n_tokens = sum(len(t) for t in self.dataset["output_tokens"])
            self.generation_seconds = generation_time(None, data_source=self.source, n_samples=len(self.dataset),
                                                      n_tokens=n_tokens).seconds


def _strip(result: Any) -> dict[str, Any]:
    """A row's metrics as stored (:meth:`much_metric.report.SignalResult.to_dict`), without its name and ``by``."""
    return {k: v for k, v in result.to_dict().items() if k not in ("signal_name", "by")}


def _evaluate_group(subset: Any, signals: dict, options: Any) -> dict[str, dict[str, Any]]:
    from dataclasses import replace

    from much_metric.report import evaluate_signals

    ids = set(subset["generation_id"])  # the group's own samples: other ids are not "unknown", nothing to warn
    signals = {name: {gid: v for gid, v in per_sample.items() if gid in ids} for name, per_sample in signals.items()}
    try:
        table = evaluate_signals(subset, signals, evaluation=replace(options, min_coverage=0.0))
    except ValueError:  # e.g. no value for any sample of a small group: the group is left blank for this row
        return {}
    return {r.signal_name: _strip(r) for r in table.results}


def _breakdowns(submission: ParsedSubmission, data: EvaluationData, overall: dict[str, dict], options: Any
                ) -> dict[str, dict[str, dict[str, Any]]]:
    by: dict[str, dict[str, dict[str, Any]]] = {name: {} for name in overall}
    for breakdown, groups in data.groups.items():
        for value, subset in groups.items():
            found = overall if subset is None else _evaluate_group(subset, submission.signals, options)
            for name in overall:
                if name in found:
                    by[name].setdefault(breakdown, {})[value] = found[name]
    return by


def score_breakdowns(submission: ParsedSubmission, data: EvaluationData) -> dict[str, dict[str, dict[str, Any]]]:
    """Every signal's breakdown metrics with their bootstrap intervals: ``{signal: {"lang": {"fr": metrics, ...},
    ...}}`` (the second phase after :func:`score_submission` with ``breakdown_intervals=False``)."""
    from dataclasses import replace

    from much_metric.report import EvaluationOptions, evaluate_signals

    options = EvaluationOptions(aggregation="product", bootstrap=data.bootstrap, floors=False, paired=False)
    # no warnings filter here: a filter is process-wide state and would silence every other thread's warnings
    table = evaluate_signals(data.dataset, submission.signals, evaluation=replace(options, bootstrap=None))
    overall = {r.signal_name: _strip(r) for r in table.results}
    by = _breakdowns(submission, data, overall, options)
    # a group holding every sample reuses the overall values: those need the intervals too
    return {name: {b: {v: m for v, m in groups.items() if "intervals" in m or data.groups[b][v] is not None}
                   for b, groups in per.items()} for name, per in jsonable(by).items()}


def cost_record(cost: Any, *, measured: bool) -> dict[str, Any] | None:
    """A row's ``cost``: ``{"seconds_per_claim", "source": "measured" | "declared", "machine", "note"}`` (None when
    nothing is known). ``measured``: the server computed the signal itself (a built-in baseline), so the cost its
    file records is the server's measurement; an upload's cost is the submitter's word, declared in
    ``submission.json`` or recorded by their ``much run --out``, and always labelled ``declared``."""
    from much_metric.signals import DeclaredCost

    if cost is None:
        return None
    if isinstance(cost, DeclaredCost):
        return jsonable({**cost.to_dict(), "source": "declared"})
    machines = "; ".join(dict.fromkeys(f"{m.get('processor') or m.get('machine') or '?'}, "
                                       f"{(m.get('threads') or {}).get('cpus_available', '?')} CPUs"
                                       for m in cost.machines if isinstance(m, dict)))
    return jsonable({"seconds_per_claim": cost.seconds_per_claim, "source": "measured" if measured else "declared",
                     "machine": machines[:200], "note": "" if measured else "recorded by the submitter's much run"})


def score_submission(submission: ParsedSubmission, data: EvaluationData, *, breakdown_intervals: bool = True,
                     measured_costs: bool = False) -> tuple[dict[str, dict], dict[str, dict]]:
    """Score every signal of a parsed submission against ``data``.

    ``breakdown_intervals=False``: the overall metrics get their intervals, the per-language / model / selection
    values are point values only (``intervals_pending`` is True; :func:`score_breakdowns` completes them later).
    ``measured_costs``: the server computed these signals itself (built-in baselines): the costs their files record
    are shown as measured; otherwise as declared (:func:`cost_record`).

    Returns
    -------
    rows : dict
        ``{signal: {"overall": metrics, "by": {"lang": {...}, "model": {...}, "selection": {"manual", "auto"}},
        "seconds": float or None, "relative_runtime": float or None, "level": "token" | "claim", "cost":
        :func:`cost_record`, "claims_kept": :func:`much_metric.conformal.claims_kept_summary`}}`` (JSON types).
    arrays : dict
        ``{signal: {"claim_scores", "hallucinated", "claim_rows"}}``: the claim arrays (ranking, figures).

    Raises
    ------
    SubmissionRejected
        When a signal does not line up with the evaluation data (unknown sample, wrong number of values, coverage
        under the threshold): the toolkit's message, as is.
    """
    from dataclasses import replace

    from much_metric.conformal import claims_kept_summary
    from much_metric.report import EvaluationOptions, evaluate_signals
    from much_metric.signals import CLAIM_SUFFIX

    # paired=False: each signal is its own board row, scored on every sample it covers (its coverage column, at
    # least MIN_COVERAGE); the board compares rows on the claims they all cover in P(rank) (rank_rows).
    options = EvaluationOptions(aggregation="product", bootstrap=data.bootstrap, floors=False, paired=False)
    known = set(data.dataset["generation_id"])
    for name, per_sample in submission.signals.items():
        unknown = [gid for gid in per_sample if gid not in known]
        if unknown:
            raise SubmissionRejected(f"signal {name!r}: {len(unknown)} generation_id(s) not in the evaluation data "
                                     f"{data.source!r}, e.g. {unknown[0][:80]!r}")
    for name, per_sample in submission.signals.items():
        if name.endswith(CLAIM_SUFFIX):
            continue
        for gid, values in per_sample.items():
            if values.min() < 0 or values.max() > 1:
                raise SubmissionRejected(f"signal {name!r}, generation_id={gid!r}: token values must lie in [0, 1] "
                                         "(the product aggregator multiplies 1 - value); rescale them, or submit one "
                                         f"value per claim under a name ending with {CLAIM_SUFFIX!r}")
    # Missing samples warn (once per signal; counted in coverage, checked by min_coverage). No warnings filter is
    # set: a filter is process-wide state and would silence (or turn into errors) every other thread's warnings.
    # Only ValueError (the toolkit's validation errors: they name the sample and field) is the submitter's fault;
    # any other exception is a bug of the server and propagates as such (Leaderboard reports a server error).
    try:
        table = evaluate_signals(data.dataset, submission.signals, evaluation=options)
        overall = {r.signal_name: _strip(r) for r in table.results}
        group_options = options if breakdown_intervals else replace(options, bootstrap=None)
        by = _breakdowns(submission, data, overall, group_options)
    except ValueError as error:
        raise SubmissionRejected(f"does not match the evaluation data: {error}") from None
    rows, arrays = {}, {}
    for result in table.results:
        name = result.signal_name
        seconds = submission.timings.get(name, {}).get("seconds")
        learned = submission.learned.get(name)
        rows[name] = jsonable({
            "detector": learned["detector"] if learned else None,
            "internals": list(submission.internals),  # what the archive's submission.json declares
            "training_rows": len(learned["training_generation_ids"]) if learned else None,
            "overall": overall[name], "by": by[name],
            "coverage": table.coverage.get(name, 1.0), "level": result.level, "seconds": seconds,
            "hardware": submission.hardware, "intervals_pending": not breakdown_intervals,
            "relative_runtime": None if seconds is None or not data.generation_seconds
            else seconds / data.generation_seconds,
            "cost": cost_record(submission.costs.get(name), measured=measured_costs),
            # on this (public) evaluation data only: the private split's labels shape nothing but its ROC-AUC
            "claims_kept": claims_kept_summary(result, table.generation_ids),
        })
        arrays[name] = {"claim_scores": np.asarray(result.claim_scores, np.float64),
                        "hallucinated": np.asarray(result.hallucinated, bool),
                        "claim_rows": np.asarray(result.claim_rows, np.int64)}
    return rows, arrays


def rank_rows(keys: list[str], arrays: list[dict[str, np.ndarray]], data: EvaluationData, *, metric: str = "roc_auc"
              ) -> dict[str, dict[str, Any]]:
    """P(rank), rank, interval and language gap of every row by ``metric`` on the claims all rows cover.

    ``keys`` name the rows (unique); ``arrays`` are their claim arrays (:func:`score_submission`). Returns
    ``{key: {"rank", "rank_probability", "lang_gap", "lang_best", "lang_worst", "versus_best", "flags"}}``
    (``versus_best``: the paired difference to the first row; ``flags``: ``{flag: text}``, the flags ``much run`` /
    ``much evaluate`` print, by :func:`much_metric.report.paired_deltas`: not above a floor, paired on the same
    claims; heavy ties; intervals over too few samples) plus ``"_meta"`` (samples and claims compared, resamples,
    ``legend``: the shown flags' legend). Public evaluation data only: the private split's labels never enter.
    """
    from much_metric.report import EvaluationTable, SignalResult, paired_deltas, rank_methods

    if not keys:
        return {}
    results = [SignalResult(signal_name=key, claim_scores=a["claim_scores"],
                            hallucinated=a["hallucinated"], claim_rows=a["claim_rows"])
               for key, a in zip(keys, arrays, strict=True)]
    table = EvaluationTable(results=results, n_dataset_samples=len(data.dataset), missing={},
                            has_stopword_mask=True, langs=list(data.dataset["lang"]))
    board = rank_methods(table, metric, bootstrap=data.bootstrap)
    # the flags of much run / much evaluate: each row against the floors on the claims every row covers (paired)
    table.floors = data.floor_results()
    deltas = paired_deltas(table, metric=metric, bootstrap=data.bootstrap)
    out: dict[str, dict[str, Any]] = {
        row.method: jsonable({"rank": row.rank, "rank_probability": row.rank_probability, "lang_gap": row.lang_gap,
                              "lang_best": row.lang_best, "lang_worst": row.lang_worst,
                              "versus_best": None if row.versus_best is None else row.versus_best.to_dict(),
                              "flags": deltas.flags.get(row.method, {})})
        for row in board.rows}
    out["_meta"] = {"n_samples": board.n_samples, "n_claims": board.n_claims, "n_resamples": board.n_resamples,
                    "metric": metric, "legend": deltas.legend()}
    return out
