"""The result types of :func:`much_metric.benchmark.run_benchmark` (exported by :mod:`much_metric.benchmark`):
frozen, built by keyword, with ``to_dict()`` = ``much run --json``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from much_dataset.jsonl import plain_json
from much_metric.report import SignalResult
from much_metric.scoring import ScoreResult

__all__ = ["BenchmarkNote", "BenchmarkResult", "BenchmarkRow", "plain_json"]


@dataclass(frozen=True, kw_only=True)
class BenchmarkNote:
    """One note of a run.

    Attributes
    ----------
    message : str
        The sentence ``much run`` prints after ``note:`` (and writes to its JSON ``notes``).
    skipped : tuple of str
        Signal names this note keeps out of the table (empty for a note that only informs, e.g. which neighbour
        statistics were used).
    reason : str or None
        Why they are skipped, short (e.g. ``"the NLI model ... is not in the local Hugging Face cache (offline?)"``);
        None for an informative note.
    """

    message: str
    skipped: tuple[str, ...] = ()
    reason: str | None = None


@dataclass(frozen=True, kw_only=True)
class BenchmarkRow:
    """One row of table 3: a method (or a floor) and its metrics.

    Attributes
    ----------
    signal_name : str
        The stored signal name (e.g. ``token_entropy_24``, ``ccp_10_8_nli``) or the floor's name.
    method : str
        The display label (``Token Entropy-24``; ``[floor: random]`` for a floor).
    score : much_metric.ScoreResult or None
        None on rows whose labels are withheld (nothing to score). Otherwise the metrics of the claim scores
        (``row.score.roc_auc``, ``row.score.intervals``, ``row.score.n_claims`` ...; ``nan`` where undefined);
        ``score.aggregator`` / ``score.stopword_handling`` for a method, a claim-level result for a floor. Claim
        scores are uncertainties (higher = more likely hallucinated); the positive class is the hallucinated claim.
    coverage : float
        Fraction of the samples the signal covers (1.0 for computed signals and floors).
    uq_seconds, segmentation_seconds, total_seconds : float or None
        Wall times (nan: not measured); None for a floor.
    samples_computed : int or None
        Samples this run computed (the rest were read back from ``out``); None for a floor.
    cost : much_metric.signals.SignalCost or None
        What computing the signal cost (wall and CPU seconds per claim, machine, forward passes; summed over
        resumed runs); None for a floor, or for values read back from a file that records no cost.
    """

    signal_name: str
    method: str
    score: ScoreResult | None
    coverage: float = 1.0
    uq_seconds: float | None = None
    segmentation_seconds: float | None = None
    total_seconds: float | None = None
    samples_computed: int | None = None
    cost: Any = None

    @property
    def is_floor(self) -> bool:
        return self.uq_seconds is None

    def to_dict(self) -> dict[str, Any]:
        """The row as ``much run --json`` writes it (NaN as None): names, times, then
        :meth:`much_metric.report.SignalResult.metrics_dict` (the score's metrics, ``aggregator``, ``coverage``)."""
        head: dict[str, Any] = {"signal_name": self.signal_name, "method": self.method}
        if not self.is_floor:
            head.update(uq_seconds=self.uq_seconds, segmentation_seconds=self.segmentation_seconds,
                        total_seconds=self.total_seconds, samples_computed=self.samples_computed,
                        cost=None if self.cost is None else self.cost.to_dict())
        if self.score is None:  # rows whose labels are withheld: no metric
            return plain_json({**head, "coverage": self.coverage})
        return plain_json({**head, **SignalResult.metrics_dict(self.score, self.coverage)})


@dataclass(frozen=True, kw_only=True)
class BenchmarkResult:
    """What :func:`run_benchmark` computed.

    Attributes
    ----------
    data : str or None
        The data source (``"sample"``, ``"orailix/MUCH"``, a folder), None for a dataset passed in memory with no
        ``data_source``.
    config, split, selection : str or None
        The dataset config, split (None: every split) and selection asked for.
    splits_used : str
        The split(s) actually evaluated (``"test"``, ``"train+test"``; ``"all"`` when unknown).
    n_samples, n_tokens : int
        Samples of the split and their output tokens (EOS included).
    aggregator, stopword_handling : str
        How token scores became claim scores.
    n_resamples : int
        Bootstrap resamples of the intervals (0: none).
    default_signals : bool
        True when the signals were table 3's defaults (not asked by name).
    signals : dict of str to SignalRun
        Every computed signal, by stored name, in table order: ``values`` (generation_id -> token scores, float64
        array of the sample's length, higher = more uncertain), ``seconds`` (UQ wall time), ``n_computed``.
        Signals left out of the table (see ``notes``) are still here.
    out : Path or None
        The folder the signal files (``<name>.<file_format>``) and ``timings.json`` were written to.
    file_format : str
        ``"parquet"`` or ``"jsonl"``.
    generation : GenerationTime
        LLM generation time of the samples (the denominator of relative runtimes) and where it comes from.
    segmentation_seconds : float
        Wall time of segmenting every output into claims; nan when not measured.
    segmentation_note : str
        How many samples segment exactly as their ``token_chunks``, or why the time was not measured.
    load_seconds : float
        Wall time of loading the data (0 for a dataset passed in memory); not part of any runtime.
    table : EvaluationTable or None
        The evaluation (claim scores, labels, coverage, floors) the rows come from; None on rows whose labels are
        withheld (the signals and times are the whole result).
    rows, floors : tuple of BenchmarkRow
        Table 3's rows (methods, in registry order) and the floors (random, constant) on the same claims.
    notes : tuple of BenchmarkNote
        In the order they arose; ``skipped`` (a property) gathers the methods kept out and why.
    top_k : int or None
        The input view the signals were computed on (``much run --top-k``); None: the stored 24 candidates.
    """

    data: str | None
    config: str | None
    split: str | None
    selection: str
    splits_used: str
    n_samples: int
    n_tokens: int
    aggregator: str
    stopword_handling: str
    n_resamples: int
    default_signals: bool
    signals: Mapping[str, Any]
    out: Path | None
    file_format: str
    generation: Any
    segmentation_seconds: float
    segmentation_note: str
    load_seconds: float
    table: Any
    rows: tuple[BenchmarkRow, ...]
    floors: tuple[BenchmarkRow, ...]
    notes: tuple[BenchmarkNote, ...] = field(default=())
    top_k: int | None = None

    @property
    def skipped(self) -> dict[str, str]:
        """Signal name -> the reason it is not in the table (not computed, or left out of the evaluation)."""
        return {name: note.reason or note.message for note in self.notes for name in note.skipped}

    @property
    def timings(self) -> dict[str, float]:
        """Signal name -> UQ wall time in seconds (nan: unknown, e.g. read back from files without timings)."""
        return {name: run.seconds for name, run in self.signals.items()}

    def to_dict(self) -> dict[str, Any]:
        """The run as ``much run --json`` writes it: plain JSON types, NaN as None."""
        return plain_json({
            "data": self.data, "config": self.config, "split": self.split, "selection": self.selection,
            "n_samples": self.n_samples, "n_tokens": self.n_tokens, "top_k": self.top_k,
            "generation_seconds": self.generation.seconds,
            "generation_source": self.generation.source, "segmentation_seconds": self.segmentation_seconds,
            "notes": [note.message for note in self.notes], "results": [row.to_dict() for row in self.rows],
            "floors": [row.to_dict() for row in self.floors],
            # which samples the rows are scored on: paired (the same for every row) or not, and what was left out
            "pairing": None if self.table is None or self.table.pairing is None else asdict(self.table.pairing),
        })
