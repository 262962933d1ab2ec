"""MUCH metric: claim segmentation, token-to-claim aggregation, claim-level metrics and baselines.

``import much_metric`` is cheap (no torch, transformers, datasets or scikit-learn at import time): public names are
resolved lazily from their modules on first access.

Sign convention everywhere: token and claim scores are **uncertainties** (higher = more likely hallucinated), and
the positive class of every metric is the hallucinated claim (label -1).
"""

from __future__ import annotations

from much_dataset._version import __version__ as __version__
from much_metric._lazy import lazy_attributes  # one version for both packages (pyproject.toml reads it)

# public name -> module that defines it
_LAZY = {
    "segment": "much_metric.segmentation",
    "IncrementalSegmenter": "much_metric.segmentation",
    "segment_many": "much_metric.segmentation",
    "aggregate_claims": "much_metric.scoring",
    "Aggregation": "much_metric.scoring",
    "score": "much_metric.scoring",
    "score_claims": "much_metric.scoring",
    "ScoreResult": "much_metric.scoring",
    "Bootstrap": "much_metric.scoring",
    "compare": "much_metric.scoring",
    "METRIC_TABLE": "much_metric.scoring",
    "select_samples": "much_dataset.selection",
    "read_signals": "much_metric.signals",
    "write_signals": "much_metric.signals",
    "evaluate_signals": "much_metric.report",
    "Baseline": "much_metric.baselines.registry",
    "run_benchmark": "much_metric.benchmark",
    "BenchmarkResult": "much_metric.benchmark",
    "load_metric": "much_metric.evaluate_module",
    "install_metric": "much_metric.evaluate_module",
    "EVALUATION_STOPWORDS": "much_dataset.stopwords",
    "SEGMENTER_STOPWORDS": "much_dataset.stopwords",
}

__all__ = sorted(_LAZY)


__getattr__, __dir__ = lazy_attributes(__name__, _LAZY, globals())
