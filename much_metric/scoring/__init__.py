"""Scoring: token scores -> claim scores -> claim-level detection metrics, with breakdowns and bootstrap intervals.

numpy only. Sign conventions: token and claim scores are **uncertainties** (higher = more likely hallucinated);
the positive class of every metric is the hallucinated claim (label -1).

* :func:`score`, :func:`aggregate_claims`, :func:`compare` -- the public metric;
* :func:`claim_layout` / :class:`ClaimLayout` -- claims as flat index arrays, validated once and reusable;
* :data:`METRIC_TABLE` -- one :class:`Metric` per reported number (key, label, function over :class:`Curves`,
  description): ``score``'s dict, the CLI tables, the HTML report and the module card iterate it;
* :func:`bootstrap_intervals`, :func:`paired_bootstrap` -- resampling of the samples (claims move with their sample);
* :func:`roc_curve`, :func:`pr_curve` -- curve points for figures.
"""

from much_metric.scoring._aggregation import (
    AGGREGATORS,
    STOPWORD_MODES,
    ClaimLayout,
    MuchMetricWarning,
    aggregate_flat,
    claim_layout,
    flatten_scores,
)
from much_metric.scoring._api import aggregate_claims, compare, score, score_claims
from much_metric.scoring._bootstrap import bootstrap_distribution, bootstrap_intervals, paired_bootstrap
from much_metric.scoring._ranking import (
    METRIC_TABLE,
    METRICS,
    Curves,
    Metric,
    curve_metrics,
    pr_curve,
    roc_curve,
    sort_claims,
)

__all__ = [
    "AGGREGATORS",
    "METRICS",
    "METRIC_TABLE",
    "STOPWORD_MODES",
    "ClaimLayout",
    "Curves",
    "Metric",
    "MuchMetricWarning",
    "aggregate_claims",
    "aggregate_flat",
    "bootstrap_distribution",
    "bootstrap_intervals",
    "claim_layout",
    "compare",
    "curve_metrics",
    "flatten_scores",
    "paired_bootstrap",
    "pr_curve",
    "roc_curve",
    "score",
    "score_claims",
    "sort_claims",
]
