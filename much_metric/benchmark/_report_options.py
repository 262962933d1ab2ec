"""What :func:`much_metric.benchmark.evaluate_files` is asked and what it returns: :class:`ReportOptions` (ranking,
calibration, Mu-SHROOM spans and the Δ column's reference, besides the table) and :class:`EvaluationReport` (the
table and each part computed; ``to_dict`` is ``much evaluate --json``, ``write_html`` the HTML report).
The evaluation itself, reading the files and loading the split, is :mod:`much_metric.benchmark._evaluate`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from much_dataset.params import InvalidParameterError, unknown_name
from much_metric.benchmark._options import DataOptions
from much_metric.report import (
    CalibrationResult,
    EvaluationOptions,
    EvaluationTable,
    Ranking,
    calibration_json,
    write_report,
)
from much_metric.scoring import METRICS

__all__ = ["CALIBRATION_SOURCES", "EvaluationReport", "ReportOptions"]

#: ``calibrate_on`` names besides a fraction: MUCH's train split (its "auto" samples) and the two selections.
CALIBRATION_SOURCES = ("train", "auto", "manual")


@dataclass(frozen=True, kw_only=True)
class ReportOptions:
    """What :func:`evaluate_files` reads off the evaluation table besides the table itself.

    Attributes
    ----------
    rank : str or None, default None
        Rank the methods by this metric (a key of :data:`much_metric.scoring.METRICS`) with paired bootstrap
        intervals, rank probabilities and p-values (the evaluation's ``bootstrap``), language gaps and relative
        runtimes (``timings.json`` next to the signal files).
    calibrate_on : float, str or None, default None
        Fit an isotonic calibrator and report ECE / Brier on the other samples: a fraction in (0, 1) (a seeded part
        of the evaluated samples), ``"train"`` (MUCH's train split: its auto samples), ``"auto"`` / ``"manual"`` (a
        selection) or another split's name.
    spans : bool, default False
        Mu-SHROOM span scores (IoU, rho) per language next to mark-all / mark-none.
    mushroom : str, path or None, default None
        The Mu-SHROOM JSONL file or folder for ``spans`` (None: the repository's ``data/mushroom``).
    tokenizer : str, default "smollm2"
        The tokenizer giving the character offsets for ``spans`` (the embedded sample's).
    baseline : str or None, default None
        The reference method of the table's paired Δ column (``table.deltas``, by ``rank``'s metric, ROC-AUC
        without it; :func:`much_metric.report.paired_deltas`): a signal or display name; None: the best row.
    """

    rank: str | None = None
    calibrate_on: float | str | None = None
    spans: bool = False
    mushroom: str | Path | None = None
    tokenizer: str = "smollm2"
    baseline: str | None = None

    def __post_init__(self) -> None:
        owner = "ReportOptions"
        if self.rank is not None and self.rank not in METRICS:
            raise unknown_name(f"{owner}: rank metric", self.rank, METRICS, hint=" or None")
        spec = self.calibrate_on
        if isinstance(spec, bool) or not (spec is None or isinstance(spec, int | float | str)):
            raise InvalidParameterError(f"{owner}: calibrate_on must be a fraction, a split or selection name, or "
                                        f"None, got {spec!r}")
        if isinstance(spec, int | float) and not 0 < spec < 1:
            raise InvalidParameterError(f"{owner}: calibrate_on must be a fraction in (0, 1), got {spec!r}")
        if not isinstance(self.spans, bool):
            raise InvalidParameterError(f"{owner}: spans must be True or False, got {self.spans!r}")



@dataclass(frozen=True)
class EvaluationReport:
    """The result of :func:`evaluate_files`.

    Attributes
    ----------
    source : str
        The data source evaluated on; ``data`` the :class:`~much_metric.benchmark.DataOptions` it was loaded with.
    table : EvaluationTable
        Every (signal, aggregator) row with the floors, coverage, missing and unknown samples.
    ranking : Ranking or None
        The methods ranked by ``ReportOptions.rank``.
    calibration : tuple of CalibrationResult or None
    spans : dict or None
        Mu-SHROOM span scores.
    generation_seconds, generation_source : float or None, str or None
        The LLM generation time behind the ranking's relative runtimes, and where it comes from.
    trained_as : dict of str to str
        Learned signals: how they were trained (the protocol and fold of their metadata).
    from_pack : tuple of str
        Signals checked to come from the internals pack given (empty without one).
    notes : tuple of str
        What was left out or checked, in words (training rows, the internals pack).
    """

    source: str
    data: DataOptions
    evaluation: EvaluationOptions
    table: EvaluationTable
    ranking: Ranking | None = None
    calibration: tuple[CalibrationResult, ...] | None = None
    spans: dict[str, Any] | None = None
    generation_seconds: float | None = None
    generation_source: str | None = None
    trained_as: dict[str, str] = field(default_factory=dict)
    from_pack: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    #: "claims kept at alpha" of every row (:func:`much_metric.conformal.claims_kept_of_table`), when computed
    claims_kept: Any = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON of ``much evaluate --json``: labels, excluded samples, coverage, every row's metrics, the
        floors, and the ranking, calibration and span scores when computed."""
        table = self.table
        payload: dict[str, Any] = {
            "labels": table.labels, "excluded_samples": table.excluded, "n_samples": table.n_dataset_samples,
            "coverage": table.coverage, "results": [r.to_dict() for r in table.results],
            "floors": [r.to_dict() for r in table.floors],
            "costs": {name: cost.to_dict() for name, cost in table.costs.items()},
        }
        if self.ranking is not None:
            payload["leaderboard"] = {**self.ranking.to_dict(), "generation": None if self.generation_seconds is None
                                      else {"seconds": self.generation_seconds, "source": self.generation_source}}
        if self.calibration:
            payload["calibration"] = calibration_json(list(self.calibration))
        if self.spans:
            payload["spans"] = self.spans
        if table.deltas is not None:
            payload["deltas"] = table.deltas.to_dict()
        if self.claims_kept is not None:
            payload["claims_kept"] = self.claims_kept.to_dict()
        return payload

    def write_html(self, path: str | Path, *, title: str = "MUCH evaluation", figures: str | Path | None = None,
                   display: Callable[[str], str] = str) -> Path:
        """The self-contained HTML report (matplotlib, extra ``report``) of every part computed."""
        options = {"title": title, "source": str(self.source), "leaderboard": self.ranking, "spans": self.spans,
                   "calibration": list(self.calibration) if self.calibration else None, "figures": figures,
                   "display": display}
        if self.claims_kept is None:
            write_report(path, self.table, **options)
            return Path(path)
        from much_metric.fileio import atomic_write_bytes
        from much_metric.report import claims_kept_section, render_report

        # the section goes before the glossary; render_report keeps its eight parameters
        text = render_report(self.table, **options)
        section = claims_kept_section(self.claims_kept, figures)
        text = text.replace("<h2>Glossary</h2>", section + "\n<h2>Glossary</h2>", 1)
        atomic_write_bytes(Path(path), text.encode("utf-8"))
        return Path(path)
