"""Learned detectors: supervised token-level uncertainty methods trained on MUCH's claim labels.

The supervised track of MUCH (issue "Learned detectors"): detectors that read only the 24 stored probabilities of
each token, output one score per output token (higher = more uncertain) like every baseline, and are trained through
the metric's own token-to-claim aggregation on the claim labels.

* :mod:`~much_metric.learned.features` -- :func:`token_features` (the linear detector's inputs: the probability
  baselines' scores, WEPR's rank-wise entropy terms, tail mass, sampled rank, position) and :func:`sequence_inputs`
  (the sequence detector's per-token top-24 log-probabilities);
* :mod:`~much_metric.learned.splits` -- protocols ``auto-to-manual``, ``leave-one-language-out``,
  ``leave-one-model-out`` (:func:`make_folds`), grouped by question and generation, checked by
  :func:`check_disjoint` (:class:`LeakageError`);
* :mod:`~much_metric.learned.training` -- :func:`train_detector` (torch, CPU; early stopping, one checkpoint per
  epoch, resumable);
* :mod:`~much_metric.learned.detector` -- the detector folder (safetensors + JSON + card, never pickle):
  :func:`load_detector`, :class:`Detector`. A folder is a baseline of the registry under the signal name
  ``learned:<folder>`` (``much run --signals learned:DIR``, ``ClaimMonitor(method="learned:DIR")``).

torch is imported only to train and to run the sequence detector (extra ``learned``).
"""

from much_metric.learned.detector import Detector, load_detector
from much_metric.learned.features import FEATURES, SEQUENCE_INPUTS, sequence_inputs, token_features
from much_metric.learned.splits import PROTOCOLS, Fold, LeakageError, RowInfo, check_disjoint, make_folds, row_info
from much_metric.learned.training import DEFAULTS, train_detector

__all__ = [
    "DEFAULTS",
    "FEATURES",
    "PROTOCOLS",
    "SEQUENCE_INPUTS",
    "Detector",
    "Fold",
    "LeakageError",
    "RowInfo",
    "check_disjoint",
    "load_detector",
    "make_folds",
    "row_info",
    "sequence_inputs",
    "token_features",
    "train_detector",
]
