"""Conformal claim filtering: from a detector's claim scores to a kept set of claims with a stated guarantee.

Calibrate on labelled answers (:func:`calibrate`), apply to new ones (:meth:`ConformalCalibration.apply`,
:func:`filter_claims`, ``much monitor --conformal FILE``). Two guarantees, each under exchangeability of the
calibration data and the new data (no assumption on the detector or the model):

* ``guarantee="answer"`` (Mohri & Hashimoto, ICML 2024): P(every kept claim of a new answer is correct) >= 1 - alpha;
* ``guarantee="claim"`` (conformal selection, Jin & Candès 2023): E[fraction of hallucinated claims among the kept
  claims] <= alpha (claims exchangeable; with answer-level splits only approximately, measured in BENCHMARKS.md);
* ``by="lang"`` (or any column): one calibration per group, the guarantee then holds within each group; a group
  below ``min_answers`` calibration answers is refused, a group never calibrated is outside the guarantee.

Claims come from the metric's own claim scores (:func:`claims_from_token_scores` through
:func:`much_metric.aggregate_claims`, :func:`claims_from_claim_scores` for one score per claim,
:func:`claims_from_result` for any row of ``much evaluate``'s table). :func:`claims_kept` is the "claims kept at
alpha" metric over seeded splits by answer or article; :func:`violation_rates` measures the guarantees.
"""

from much_metric.conformal._calibration import (
    GUARANTEES,
    MIN_ANSWERS,
    ConformalCalibration,
    GroupCalibration,
    Selection,
    calibrate,
    filter_claims,
    load_calibration,
)
from much_metric.conformal._claims import (
    ClaimSet,
    claims_from_claim_scores,
    claims_from_result,
    claims_from_token_scores,
)
from much_metric.conformal._core import (
    answer_level_threshold,
    answer_risk_scores,
    benjamini_hochberg,
    conformal_p_values,
    min_answers_for,
    select_claims,
)
from much_metric.conformal._splits import (
    ALPHAS,
    BOARD_SPLITS,
    ClaimsKept,
    Splits,
    claims_kept,
    claims_kept_of_table,
    claims_kept_summary,
    split_masks,
)
from much_metric.conformal._text import format_claims_kept
from much_metric.conformal._validity import Violations, violation_rates, wilson_interval

__all__ = [
    "ALPHAS", "BOARD_SPLITS", "GUARANTEES", "MIN_ANSWERS", "ClaimSet", "ClaimsKept", "ConformalCalibration",
    "GroupCalibration", "Selection", "Splits", "Violations", "answer_level_threshold", "answer_risk_scores",
    "benjamini_hochberg", "calibrate", "claims_from_claim_scores", "claims_from_result", "claims_from_token_scores",
    "claims_kept", "claims_kept_of_table", "claims_kept_summary", "conformal_p_values", "filter_claims",
    "format_claims_kept", "load_calibration", "min_answers_for", "select_claims", "split_masks", "violation_rates",
    "wilson_interval",
]
