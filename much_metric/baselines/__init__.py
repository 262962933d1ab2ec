"""Baselines of the MUCH paper (section 5, appendix D, tables 3 and 7): one score per output token, EOS included,
**higher = more uncertain**.

* :func:`token_likelihood`, :func:`max_likelihood`, :func:`token_entropy` -- from the stored top-24 probabilities,
  vectorised over a whole split (numpy only);
* :func:`ccp`, :func:`sar` -- with an NLI model (transformers, imported on first use) on context windows decoded
  with the generating LLM's tokenizer; NLI runs batched and de-duplicated over the split (:class:`NliScorer`);
* :class:`Baseline` and the registry (:func:`available`, :func:`resolve`, :func:`register`): every method is one
  ``Baseline`` (built-ins define ``BASELINES`` in their module; plugins declare an entry point in the group
  ``much.baselines``), see :mod:`much_metric.baselines.registry`;
* :func:`compute_signals` -- several signals by reference name (``token_entropy_24``, ``ccp_10_8`` ...), timed,
  written resumably as MUCH-signals files; :mod:`much_metric.baselines.runtime` puts times relative to LLM
  generation, as in table 3.

Every function takes a ``datasets.Dataset`` split (e.g. ``much_dataset.load("sample", split="test")``), a pyarrow
table, a list of row dicts, or :class:`TokenArrays`, and returns a list of per-sample float arrays.
"""

from much_metric.baselines._arrays import TokenArrays, token_arrays
from much_metric.baselines._ktc_kernels import ktc_token_scores
from much_metric.baselines.ccp import ccp, ccp_signal_name
from much_metric.baselines.context import PerSampleDecoder
from much_metric.baselines.ktc import KTCConfig, default_neighbours, ktc, ktc_adjacency
from much_metric.baselines.neighbours import NeighbourStats, PerSampleNeighbours, load_neighbours
from much_metric.baselines.nli import DEFAULT_NLI_MODEL, NliScorer, load_nli, nli_label_indices
from much_metric.baselines.probability import max_likelihood, sampled_token_probability, token_entropy, token_likelihood
from much_metric.baselines.registry import (
    Baseline,
    BaselineSpec,
    available,
    expand_signals,
    register,
    resolve,
    signal_groups,
    unregister,
)
from much_metric.baselines.runner import NLI_SIGNALS, PROBABILITY_SIGNALS, TABLE3_SIGNALS, SignalRun, compute_signals
from much_metric.baselines.sar import sar, sar_signal_name

__all__ = [
    "Baseline",
    "BaselineSpec",
    "available",
    "expand_signals",
    "register",
    "resolve",
    "signal_groups",
    "unregister",
    "DEFAULT_NLI_MODEL",
    "KTCConfig",
    "NeighbourStats",
    "PerSampleNeighbours",
    "default_neighbours",
    "ktc",
    "ktc_adjacency",
    "ktc_token_scores",
    "load_neighbours",
    "NLI_SIGNALS",
    "PROBABILITY_SIGNALS",
    "TABLE3_SIGNALS",
    "NliScorer",
    "PerSampleDecoder",
    "SignalRun",
    "TokenArrays",
    "ccp",
    "ccp_signal_name",
    "compute_signals",
    "load_nli",
    "max_likelihood",
    "nli_label_indices",
    "sampled_token_probability",
    "sar",
    "sar_signal_name",
    "token_arrays",
    "token_entropy",
    "token_likelihood",
]
