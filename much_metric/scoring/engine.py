"""Building blocks of the metric that the toolkit's other stages use (the evaluation loop behind ``much run`` and
``much evaluate``, the ranking, the report): flat aggregation over a validated claim layout, bootstrap replicates,
the metrics of sorted claims; the constraints of the metric's options (:data:`AGGREGATOR`,
:data:`STOPWORD_MODE`, :data:`SCORE_TYPE`: ``much_dataset.params`` constraints over
:data:`~much_metric.scoring.AGGREGATORS` and the other vocabularies) that other stages' options objects check; and the
per-replicate paths the evaluation benchmark times on their own (``benchmarks/bench_metric_ext.py``:
:func:`resample_counts`, :func:`bootstrap_prr`, :func:`bootstrap_metrics_and_prr`).

Not the user API (that is :mod:`much_metric.scoring`'s ``__all__``): these take the validated flat arrays that
:func:`much_metric.scoring.claim_layout` and :func:`flatten_scores` produce and check little themselves.
"""

from much_metric.scoring._aggregation import aggregate_flat, flatten_scores
from much_metric.scoring._bootstrap import MAX_RESAMPLES_REASON, RESAMPLES_REASON, bootstrap_distribution
from much_metric.scoring._counts import resample_counts
from much_metric.scoring._leaderboard import differences_to_reference, shown_ranks
from much_metric.scoring._options import (
    AGGREGATOR,
    SCORE_TYPE,
    STOPWORD_MODE,
    STOPWORD_MODES,
    as_aggregation,
)
from much_metric.scoring._ranking import curve_metrics, sort_claims
from much_metric.scoring._rejection import bootstrap_metrics_and_prr, bootstrap_prr

__all__ = ["AGGREGATOR", "MAX_RESAMPLES_REASON", "RESAMPLES_REASON", "SCORE_TYPE", "STOPWORD_MODE", "STOPWORD_MODES",
           "aggregate_flat", "as_aggregation", "bootstrap_distribution", "curve_metrics", "flatten_scores",
           "sort_claims", "resample_counts", "bootstrap_prr", "bootstrap_metrics_and_prr", "differences_to_reference",
           "shown_ranks"]
