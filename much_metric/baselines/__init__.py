"""Baselines of the MUCH paper (section 5, appendix D, tables 3 and 7): one score per output token, EOS included,
**higher = more uncertain**.

* :func:`token_likelihood`, :func:`max_likelihood`, :func:`token_entropy` -- from the stored top-24 probabilities,
  vectorised over a whole split (numpy only);
* :func:`ccp`, :func:`sar` -- with an NLI model (transformers, imported on first use) on context windows decoded
  with the generating LLM's tokenizer; NLI runs batched and de-duplicated over the split (:class:`NliScorer`);
* :class:`Baseline` and the registry (:func:`available`, :func:`resolve`, :func:`register`): every method is one
  ``Baseline`` (built-ins define ``BASELINES`` in their module; plugins declare an entry point in the group
  ``much.baselines``), see :mod:`much_metric.baselines.registry`; the
  built-in methods live in :mod:`much_metric.baselines.methods`, one module each;
* :func:`compute_signals` -- several signals by reference name (``token_entropy_24``, ``ccp_10_8`` ...), timed,
  written resumably as MUCH-signals files, their resources (tokenizer, NLI, neighbours, internals) in one
  :class:`ResourceOptions` resolved once; :mod:`much_metric.baselines.runtime` puts times relative to LLM
  generation, as in table 3;
* claim-level methods (``Baseline(level="claim")``: one value per claim, stored under ``<name>@claim``) and their
  helpers :func:`claim_tokens`, :func:`claim_texts`, :func:`answer_texts`, :func:`claim_signal`
  (:mod:`much_metric.baselines.claims`);
* the sampling and reference detectors' resources: :func:`open_samples` (N further answers per row),
  :func:`open_reference` (``builder wiki`` / ``context`` output), :func:`load_encoder` (docs/sampling.md);
* what ``much run`` does as one call (:func:`~much_metric.benchmark.run_benchmark`) lives one layer up, in
  :mod:`much_metric.benchmark`.

Every function takes a ``datasets.Dataset`` split (e.g. ``much_dataset.load("sample", split="test")``), a pyarrow
table, a list of row dicts, or :class:`TokenArrays`, and returns a list of per-sample float arrays.

Importing this package imports the registry and nothing else: the method modules and the plugins' entry points are
imported on the first use of the registry (:func:`available`, :func:`resolve`, ...), and each function below when it
is first accessed. So a plugin may import :class:`Baseline` from here while it is itself being discovered.
"""

from __future__ import annotations

from much_metric._lazy import lazy_attributes
from much_metric.baselines.registry import (
    Baseline,
    Requirements,
    available,
    display_method,
    display_name,
    register,
    resolve,
    signal_groups,
    unregister,
)

#: Public name -> the module defining it, imported on first access.
_LAZY = {
    "TokenArrays": "much_metric.baselines._arrays",
    "token_arrays": "much_metric.baselines._arrays",
    "SignalRun": "much_metric.baselines.runner",
    "SignalOptions": "much_metric.baselines.runner",
    "ResourceOptions": "much_metric.baselines.runner",
    "compute_signals": "much_metric.baselines.runner",
    "token_likelihood": "much_metric.baselines.methods.probability",
    "max_likelihood": "much_metric.baselines.methods.probability",
    "token_entropy": "much_metric.baselines.methods.probability",
    "ccp": "much_metric.baselines.methods.ccp",
    "sar": "much_metric.baselines.methods.sar",
    "ktc": "much_metric.baselines.methods.ktc",
    "KTCConfig": "much_metric.baselines.methods.ktc",
    "NeighbourStats": "much_metric.baselines.neighbours",
    "PerSampleNeighbours": "much_metric.baselines.neighbours",
    "load_neighbours": "much_metric.baselines.neighbours",
    "DEFAULT_NLI_MODEL": "much_metric.baselines.nli",
    "NliScorer": "much_metric.baselines.nli",
    "NliBatching": "much_metric.baselines.nli",
    "load_nli": "much_metric.baselines.nli",
    "PerSampleDecoder": "much_metric.baselines.context",
    "SampleSet": "much_metric.baselines.samples",
    "open_samples": "much_metric.baselines.samples",
    "ReferenceSet": "much_metric.baselines.reference",
    "open_reference": "much_metric.baselines.reference",
    "load_encoder": "much_metric.baselines.encoders",
    "semantic_isotropy_score": "much_metric.baselines.methods.semantic_isotropy",
    "claim_tokens": "much_metric.baselines.claims",
    "claim_texts": "much_metric.baselines.claims",
    "answer_texts": "much_metric.baselines.claims",
    "claim_signal": "much_metric.baselines.claims",
}

__all__ = ["Baseline", "Requirements", "available", "display_method", "display_name", "register", "resolve",
           "signal_groups", "unregister", *_LAZY]


__getattr__, __dir__ = lazy_attributes(__name__, _LAZY, globals())
