"""What :class:`much_metric.monitor.ClaimMonitor` hands out: one final claim, and the result of a calibration."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Calibration", "MonitoredClaim"]


@dataclass(frozen=True)
class MonitoredClaim:
    """One final claim of the generation being monitored.

    Attributes
    ----------
    index : int
        Claim number in the generation (0, 1, ...).
    text : str
        Its decoded text; the texts of all claims concatenate to the decoded generation.
    token_indices : list of int
        Indices into the generated tokens (consecutive; all claims cover every generated token once, in order).
    token_ids : list of int
        The generated ids at those positions.
    token_scores : ndarray of shape (n,)
        The baseline's score of each token (higher = more uncertain), before the stopword rule.
    stopword : ndarray of shape (n,), bool
        Tokens whose score the stopword rule nulls (``stopword_handling="null"``) or excludes
        (docs/reference-behaviour.md#stopword-rule).
    score : float
        The aggregated claim uncertainty, as :func:`much_metric.aggregate_claims` computes it.
    flagged : bool
        ``score >= threshold`` (False without a threshold, and for the EOS claim).
    eos : bool
        The claim is made only of EOS/EOT tokens: the metric drops it (docs/reference-behaviour.md#evaluation-modes), it
        is never flagged.
    """

    index: int
    text: str
    token_indices: list[int]
    token_ids: list[int]
    token_scores: np.ndarray
    stopword: np.ndarray
    score: float
    flagged: bool
    eos: bool

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields (what ``much monitor --json`` prints)."""
        return {"claim": self.index, "text": self.text, "token_indices": list(self.token_indices),
                "token_ids": list(self.token_ids), "token_scores": [float(s) for s in self.token_scores],
                "score": float(self.score), "flagged": bool(self.flagged), "eos": bool(self.eos)}


@dataclass(frozen=True)
class Calibration:
    """The threshold :meth:`ClaimMonitor.calibrate` picked and what it achieves on the calibration data.

    ``tpr`` is the recall of hallucinated claims (label -1), ``fpr`` the share of correct claims flagged,
    ``precision`` the share of flagged claims that are hallucinated (1.0 when nothing is flagged).
    """

    threshold: float
    method: str
    aggregator: str
    target: str
    target_value: float
    tpr: float
    fpr: float
    precision: float
    n_flagged: int
    n_claims: int
    n_hallucinated: int

    def __str__(self) -> str:
        bound = "<=" if self.target == "fpr" else ">="
        return (f"threshold {self.threshold:.6g} ({self.method}, {self.aggregator}; {self.target} {bound} "
                f"{self.target_value:g}): TPR {self.tpr:.3f}, FPR {self.fpr:.3f}, precision {self.precision:.3f}, "
                f"{self.n_flagged}/{self.n_claims} claims flagged")
