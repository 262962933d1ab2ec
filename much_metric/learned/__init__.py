"""Learned detectors: supervised token-level uncertainty methods trained on MUCH's claim labels.

The supervised track of MUCH (issue "Learned detectors"): detectors that read only the 24 stored probabilities of
each token, output one score per output token (higher = more uncertain) like every baseline, and are trained through
the metric's own token-to-claim aggregation on the claim labels.

* :mod:`~much_metric.learned.features` -- :func:`token_features` (the linear detector's inputs: the probability
  baselines' scores, WEPR's rank-wise entropy terms, tail mass, sampled rank, position) and :func:`sequence_inputs`
  (the sequence detector's per-token top-24 log-probabilities);
* :mod:`~much_metric.learned.splits` -- protocols ``auto-to-manual``, ``leave-one-language-out``,
  ``leave-one-model-out`` (:func:`make_folds`), grouped by question, Wikipedia article (across languages) and
  generation, checked by :func:`check_disjoint` (:class:`LeakageError`), each fold saying what it purged;
* :class:`LinearDetector`, :class:`SequenceDetector` -- scikit-learn-shaped estimators (hyper-parameters in the
  constructor, ``.fit(train, validation)``, ``.save(folder)``; torch on CPU, early stopping, resumable checkpoints);
* :class:`ProbeDetector`, :class:`ClaimHeadDetector` -- the same, on an internals pack
  (``.fit(train, validation, internals=PACK)``, :mod:`~much_metric.learned.internals`): a logistic-regression
  probe on one hidden layer, and a small transformer over attention features, top-24 log-probabilities and the
  claim mask; their folders record the pack's model and layers (:class:`PackMismatchError` on another pack);
* :mod:`~much_metric.learned.detector` -- the detector folder (safetensors + JSON + the exact training rows + card,
  never pickle), checked completely by :func:`load_detector` (:class:`DetectorFolderError`). A folder is a baseline
  of the registry under the signal name ``learned:<folder>`` (``much run --signals learned:DIR``,
  ``ClaimMonitor(method="learned:DIR")``) through the entry point of :mod:`much_metric.learned.plugin`; it is scored
  on the rows it was not trained or validated on unless asked otherwise.

A detector kind is one record, :class:`Kind` (what it reads, its hyper-parameters with their defaults and
constraints, its trainer and its torch module), in one registry, :data:`KINDS`: the four above, the kinds of the
entry-point group ``much.detector_kinds`` (installed plugins) and those of :func:`register_kind`. Every estimator is
generated from its record (:class:`LearnedDetector`; :func:`estimator_class` for a plugin's kind), so
``sklearn.base.clone`` works on them. torch is imported only to train and to run a torch kind (extra ``learned``).
"""

from much_metric.learned._kinds import ENTRY_POINT_GROUP, KINDS, Kind, register_kind, unregister_kind
from much_metric.learned.detector import Detector, DetectorFolderError, load_detector
from much_metric.learned.estimators import (
    ClaimHeadDetector,
    LearnedDetector,
    LinearDetector,
    ProbeDetector,
    SequenceDetector,
    estimator_class,
)
from much_metric.learned.features import FEATURES, SEQUENCE_INPUTS, sequence_inputs, token_features
from much_metric.learned.internals import PackMismatchError
from much_metric.learned.splits import (
    PROTOCOLS,
    Fold,
    LeakageError,
    RowInfo,
    article_title,
    check_disjoint,
    make_folds,
    row_info,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "LearnedDetector",
    "estimator_class",
    "register_kind",
    "unregister_kind",
    "ClaimHeadDetector",
    "FEATURES",
    "KINDS",
    "PROTOCOLS",
    "SEQUENCE_INPUTS",
    "Detector",
    "DetectorFolderError",
    "Fold",
    "Kind",
    "LeakageError",
    "LinearDetector",
    "PackMismatchError",
    "ProbeDetector",
    "RowInfo",
    "SequenceDetector",
    "article_title",
    "check_disjoint",
    "load_detector",
    "make_folds",
    "row_info",
    "sequence_inputs",
    "token_features",
]
