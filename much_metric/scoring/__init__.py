"""Scoring: token scores -> claim scores -> claim-level detection metrics, with breakdowns and bootstrap intervals.

numpy only. Sign conventions: token and claim scores are **uncertainties** (higher = more likely hallucinated);
the positive class of every metric is the hallucinated claim (label -1).

* :func:`score` (-> :class:`ScoreResult`), :func:`score_claims`, :func:`aggregate_claims`, :func:`compare` -- the
  public metric; :class:`Aggregation` -- how token scores become claim scores, passed as ``aggregation=``;
* :func:`claim_layout` / :class:`ClaimLayout` -- claims as flat index arrays, validated once and reusable;
* :data:`METRIC_TABLE` -- one :class:`Metric` per reported number (key, label, function over :class:`Curves`,
  description): ``score``'s dict, the CLI tables, the HTML report and the module card iterate it;
* :class:`Bootstrap` -- the resampling options (count, level, seed), passed as ``bootstrap=``; :data:`RESAMPLES`
  (40 to 100000, :data:`MIN_RANK_RESAMPLES` / :data:`MAX_RESAMPLES`) is the one resample rule every bootstrap option
  and command reads, :func:`check_resamples` its check for a count where 0 means "no bootstrap";
* :func:`bootstrap_intervals`, :func:`paired_bootstrap` -- resampling of the samples (claims move with their sample);
* :func:`roc_curve`, :func:`pr_curve` (``(precision, recall, thresholds)`` as scikit-learn's
  ``precision_recall_curve``), :func:`rejection_curve` -- curve points for figures;
* :func:`prr` -- prediction-rejection ratio (also the table's ``prr`` / ``prr_50`` entries);
* :func:`fit_calibrator` (isotonic / binned) -> :class:`Calibrator`, :func:`ece`, :func:`brier`,
  :func:`reliability_diagram`, :func:`bootstrap_ece` -- calibration of claim scores into probabilities;
* :func:`random_baseline`, :func:`length_scores`, :func:`constant_baseline`, :func:`constant_expected` -- floors;
* :func:`rank_claim_scores`, :func:`rank_probabilities`, :func:`pairwise_p_values` -- ranking methods on the same claims
  (``leaderboard`` until round 4, a deprecated alias now: the public leaderboard is the ``much_leaderboard``
  package).

``__all__`` is what a user calls. The flat building blocks that the toolkit's own evaluation loop, ranking and
report use (``aggregate_flat``, ``flatten_scores``, ``bootstrap_distribution``, ``curve_metrics``, ``sort_claims``)
are in :mod:`much_metric.scoring.engine`.
"""

from much_metric._deprecation import renamed
from much_metric.scoring._aggregation import (
    AGGREGATORS,
    SCORE_TYPES,
    STOPWORD_MODES,
    ClaimLayout,
    MuchMetricWarning,
    claim_layout,
)
from much_metric.scoring._api import MissingStopwordMaskWarning, aggregate_claims, compare, score, score_claims
from much_metric.scoring._bootstrap import (
    MAX_RESAMPLES,
    MIN_RANK_RESAMPLES,
    RESAMPLES,
    Bootstrap,
    bootstrap_intervals,
    check_resamples,
    paired_bootstrap,
)
from much_metric.scoring._calibration import Calibrator, bootstrap_ece, brier, ece, reliability_diagram
from much_metric.scoring._calibration import fit as fit_calibrator
from much_metric.scoring._comparison import Comparison, MetricComparison
from much_metric.scoring._floors import constant_baseline, constant_expected, length_scores, random_baseline
from much_metric.scoring._leaderboard import pairwise_p_values, rank_claim_scores, rank_probabilities
from much_metric.scoring._options import Aggregation
from much_metric.scoring._ranking import METRIC_TABLE, METRICS, Curves, Metric, pr_curve, roc_curve
from much_metric.scoring._rejection import prr, rejection_curve
from much_metric.scoring._result import ScoreResult
from much_metric.scoring._steps import suppress_single_class_warning

__all__ = [
    "AGGREGATORS",
    "MAX_RESAMPLES",
    "MIN_RANK_RESAMPLES",
    "RESAMPLES",
    "check_resamples",
    "Aggregation",
    "Bootstrap",
    "Calibrator",
    "Comparison",
    "MetricComparison",
    "bootstrap_ece",
    "brier",
    "constant_baseline",
    "constant_expected",
    "ece",
    "fit_calibrator",
    "length_scores",
    "pairwise_p_values",
    "prr",
    "random_baseline",
    "rank_claim_scores",
    "rank_probabilities",
    "rejection_curve",
    "reliability_diagram",
    "METRICS",
    "METRIC_TABLE",
    "SCORE_TYPES",
    "STOPWORD_MODES",
    "ScoreResult",
    "ClaimLayout",
    "Curves",
    "Metric",
    "MissingStopwordMaskWarning",
    "MuchMetricWarning",
    "aggregate_claims",
    "bootstrap_intervals",
    "claim_layout",
    "compare",
    "paired_bootstrap",
    "pr_curve",
    "roc_curve",
    "score",
    "score_claims",
    "suppress_single_class_warning",
]

__getattr__ = renamed(__name__, {"leaderboard": "rank_claim_scores"})
