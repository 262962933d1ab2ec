"""Multilingual NLI for CCP and SAR: one NLI model per language inside one run, and a shared NLI cache.

The paper finds CCP and SAR weak outside English because ``microsoft/deberta-large-mnli`` is English-only;
:class:`NliRouter` scores each sample's pairs with the model of the sample's language (e.g. an English MNLI model
for ``en``, a multilingual XNLI model for ``fr``, ``es``, ``de``) and behaves like one
:class:`~much_metric.baselines.nli.NliScorer` to CCP and SAR:

* ``id2label`` is the canonical ``{0: entailment, 1: neutral, 2: contradiction}``; every model's output columns
  are reordered into it from **its own** ``config.id2label`` (binary models: not_entailment -> contradiction,
  neutral 0), so models with different label orders mix safely;
* ``predict_proba(premises, hypotheses, generation_ids=...)`` takes the generation id of each pair (CCP and SAR
  pass it to scorers whose ``routes_by_sample`` is true) and sends each model only its pairs, in one call per model;
* ``model_of(generation_id)`` names the model that scores a sample; the runner records it in the signal file's
  per-sample metadata (:mod:`much_metric.signals._metadata`).

:class:`NliCache` wraps any scorer (router or not) and remembers ``(model, premise, hypothesis) -> probabilities``
within a run, so the table-7 grid does not score a pair twice: the pairs of ``ccp_10_sigma`` are a subset of those
of ``ccp_24_sigma`` (run the 24 first), and duplicated windows recur across configurations.
"""

from __future__ import annotations

import json
import os
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from much_dataset.params import POSITIVE_INT, InvalidParameterError, check_param
from much_metric.baselines.nli import nli_label_indices

__all__ = ["CANONICAL_ID2LABEL", "NliCache", "NliPairRecorder", "NliRouter", "parse_nli_mapping", "routed_nli_name"]

#: Columns of :class:`NliRouter`'s output.
CANONICAL_ID2LABEL = {0: "entailment", 1: "neutral", 2: "contradiction"}
#: Language key of the model used for languages not named in a mapping.
DEFAULT_LANGUAGE = "*"


def parse_nli_mapping(spec: str | os.PathLike | Mapping[str, str]) -> dict[str, str]:
    """``"en=microsoft/deberta-large-mnli,fr=X,es=X,de=X"``, ``"fr+es+de=X"``, a JSON file ``{"en": ..., ...}`` or a
    mapping -> ``{language: model}``. The language ``*`` names the model of every other language.

    Raises ValueError naming the offending entry (no ``=``, empty language or model, a language given twice).
    """
    if isinstance(spec, Mapping):
        items = [(str(k), str(v)) for k, v in spec.items()]
    else:
        text = str(spec)
        if text.endswith(".json") or (Path(text).is_file() and text.lower().endswith(".json")):
            try:
                loaded = json.loads(Path(text).read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError) as error:
                raise ValueError(f"--nli-model {text}: cannot read the JSON mapping ({error})") from error
            if not isinstance(loaded, dict):
                raise ValueError(f"{text}: the NLI mapping must be a JSON object {{language: model}}")
            items = [(str(k), str(v)) for k, v in loaded.items()]
        else:
            items = []
            for entry in filter(None, (part.strip() for part in text.split(","))):
                if "=" not in entry:
                    raise ValueError(f"NLI mapping entry {entry!r} has no '=' (expected language=model, e.g. "
                                     "en=microsoft/deberta-large-mnli)")
                languages, model = entry.split("=", 1)
                items += [(language.strip(), model.strip()) for language in languages.split("+")]
    mapping: dict[str, str] = {}
    for language, model in items:
        if not language or not model:
            raise ValueError(f"NLI mapping entry {language}={model}: empty language or model")
        if language in mapping:
            raise ValueError(f"NLI mapping names language {language!r} twice")
        mapping[language] = model
    if not mapping:
        raise ValueError("empty NLI mapping")
    return mapping


def routed_nli_name(mapping: Mapping[str, str]) -> str:
    """Name of a per-language NLI mapping in signal names.

    One distinct model -> its name (so the signal names are those of ``--nli-model MODEL``: ``ccp_10_8`` for
    ``microsoft/deberta-large-mnli``, ``ccp_10_8_M`` ...). Several -> ``multi-`` + the first 6 hex digits of the
    SHA-1 of the mapping as sorted compact JSON (``{"en": ..., "fr": ...}``): short, stable across runs and
    machines, different for different mappings. The mapping itself is printed by ``much run`` and every sample's
    model is in the signal file's metadata (``nli_model``).
    """
    import hashlib

    models = set(mapping.values())
    if len(models) == 1:
        return next(iter(models))
    canonical = json.dumps(dict(sorted(mapping.items())), separators=(",", ":"), ensure_ascii=False)
    return "multi-" + hashlib.sha1(canonical.encode("utf-8")).hexdigest()[:6]


class NliRouter:
    """One NLI model per language, seen by CCP and SAR as a single scorer (see the module docstring).

    Parameters
    ----------
    scorers : mapping of str to scorer
        Language -> an :class:`~much_metric.baselines.nli.NliScorer` (or any object with ``id2label`` and
        ``predict_proba``). The same object may serve several languages (it is called once per call for all of
        them); ``"*"`` serves the languages not named.
    languages : mapping of str to str
        ``generation_id`` -> language (the split's ``lang`` column).
    name : str, optional
        Name for signal names (its NLI suffix, see :func:`much_metric.baselines.nli.nli_signal_suffix`); default
        :func:`routed_nli_name` of the language -> model-name mapping: the model's own name when every language
        has the same model (``ccp_10_8`` for deberta-large-mnli alone), else ``multi-<6 hex>`` (``ccp_10_8_multi-
        3fa2c1``), a digest of the mapping, so that two mappings never share a signal file.
    """

    routes_by_sample = True
    id2label = CANONICAL_ID2LABEL

    def __init__(self, scorers: Mapping[str, Any], languages: Mapping[str, str], *, name: str | None = None) -> None:
        if not scorers:
            raise ValueError("NliRouter needs at least one language -> scorer")
        self.scorers = dict(scorers)
        self.languages = dict(languages)
        self.name = name or routed_nli_name({language: _name(scorer) for language, scorer in self.scorers.items()})
        self._columns: dict[int, np.ndarray] = {}
        for language, scorer in self.scorers.items():
            if not hasattr(scorer, "predict_proba") or not hasattr(scorer, "id2label"):
                raise InvalidParameterError(f"the NLI scorer of language {language!r} has no id2label / "
                                            f"predict_proba()")
            try:
                labels = nli_label_indices({int(k): v for k, v in scorer.id2label.items()})
            except ValueError as error:
                raise ValueError(f"NLI model of language {language!r} ({_name(scorer)}): {error}") from error
            # Canonical column c takes the model's column order[c]; -1 = a class the model lacks (neutral).
            order = np.array([labels.entailment, -1 if labels.neutral is None else labels.neutral,
                              labels.contradiction])
            self._columns[id(scorer)] = order

    def scorer_of(self, generation_id: str) -> Any:
        """The scorer of a sample; ValueError naming it when its language is unknown or has no model."""
        if generation_id not in self.languages:
            raise ValueError(f"generation_id={generation_id!r}: no language known for this sample (NliRouter "
                             "languages come from the split's lang column)")
        language = self.languages[generation_id]
        scorer = self.scorers.get(language, self.scorers.get(DEFAULT_LANGUAGE))
        if scorer is None:
            raise ValueError(f"generation_id={generation_id!r}: no NLI model for language {language!r} (mapping "
                             f"has {sorted(self.scorers)}; add {language}=<model> or *=<model>)")
        return scorer

    def usage(self) -> dict[str, int]:
        """The forward passes of every distinct scorer, summed (scorers without ``usage()`` count none)."""
        distinct = {id(scorer): scorer for scorer in self.scorers.values()}.values()
        return {"forward_passes": sum(int((getattr(s, "usage", None) or dict)().get("forward_passes", 0))
                                      for s in distinct)}

    def model_of(self, generation_id: str) -> str:
        """Name of the NLI model that scores ``generation_id``."""
        return _name(self.scorer_of(generation_id))

    def route_key(self, generation_id: str) -> int:
        """Identifies the scorer of a sample (pairs of two samples with the same key get the same probabilities)."""
        return id(self.scorer_of(generation_id))

    def predict_proba(self, premises: Sequence[str], hypotheses: Sequence[str], *,
                      generation_ids: Sequence[str] | None = None) -> np.ndarray:
        """Canonical class probabilities (n_pairs, 3): entailment, neutral, contradiction."""
        n = len(premises)
        if len(hypotheses) != n:
            raise ValueError(f"{n} premises but {len(hypotheses)} hypotheses")
        if generation_ids is None or len(generation_ids) != n:
            raise ValueError("NliRouter.predict_proba needs the generation_id of every pair (generation_ids=...)")
        out = np.zeros((n, 3))
        if n == 0:
            return out
        # One scorer lookup per distinct sample, then a stable grouping of the pairs by scorer.
        unique, inverse = np.unique(np.asarray(generation_ids, dtype=object).astype(str), return_inverse=True)
        scorers = [self.scorer_of(gid) for gid in unique.tolist()]
        keys = np.array([id(s) for s in scorers], dtype=np.int64)[inverse]
        by_key = {id(s): s for s in scorers}
        for key, scorer in by_key.items():
            rows = np.flatnonzero(keys == key)
            probabilities = np.asarray(scorer.predict_proba([premises[i] for i in rows], [hypotheses[i] for i in rows]))
            order = self._columns[key]
            if probabilities.shape != (len(rows), len(scorer.id2label)):
                raise ValueError(f"the NLI model {_name(scorer)} returned shape {probabilities.shape}, expected "
                                 f"({len(rows)}, {len(scorer.id2label)})")
            present = order >= 0
            out[np.ix_(rows, np.flatnonzero(present))] = probabilities[:, order[present]]
        return out


def _name(scorer: Any) -> str:
    return str(getattr(scorer, "name", None) or type(scorer).__name__)


class _ScorerProxy:
    """Behaves like the wrapped ``scorer``: id2label, name, model_of ... are the scorer's (subclasses set
    ``self.scorer`` and replace ``predict_proba``)."""

    scorer: Any

    def __getattr__(self, attribute: str) -> Any:
        if attribute == "scorer":  # not set yet (during unpickling): no recursion
            raise AttributeError(attribute)
        return getattr(self.scorer, attribute)

    @property
    def routes_by_sample(self) -> bool:
        return bool(getattr(self.scorer, "routes_by_sample", False))


class NliCache(_ScorerProxy):
    """Remembers ``(model, premise, hypothesis) -> class probabilities`` within a run; behaves like the scorer.

    Parameters
    ----------
    scorer : NliScorer-like or NliRouter
    max_pairs : int, default 4_000_000
        Most pairs kept (least recently used dropped first): about 150 bytes each plus the texts, which the
        callers' strings share.

    ``hits`` / ``misses`` count the pairs answered from the cache / sent to the model.
    """

    def __init__(self, scorer: Any, *, max_pairs: int = 4_000_000) -> None:
        check_param("max_pairs", max_pairs, POSITIVE_INT, owner="NliCache")
        self.scorer = scorer
        self.max_pairs = max_pairs
        self._store: OrderedDict[tuple, np.ndarray] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def clear(self) -> None:
        """Forget every stored pair (the hit / miss counts stay)."""
        self._store.clear()

    def predict_proba(self, premises: Sequence[str], hypotheses: Sequence[str], *,
                      generation_ids: Sequence[str] | None = None) -> np.ndarray:
        n = len(premises)
        routed = self.routes_by_sample
        route: Callable[[int], Any] = (lambda i: self.scorer.route_key(generation_ids[i])) if routed else \
            (lambda i: None)
        if routed and (generation_ids is None or len(generation_ids) != n):
            raise ValueError("the routed NLI scorer needs the generation_id of every pair (generation_ids=...)")
        keys = [(route(i), premises[i], hypotheses[i]) for i in range(n)]
        store = self._store
        first: dict[tuple, int] = {}
        for i, key in enumerate(keys):
            if key not in store:
                first.setdefault(key, i)
        missing = list(first)
        if missing:
            kwargs = {"generation_ids": [generation_ids[first[key]] for key in missing]} if routed else {}
            fresh = np.asarray(self.scorer.predict_proba([k[1] for k in missing], [k[2] for k in missing], **kwargs))
            for key, row in zip(missing, fresh, strict=True):
                store[key] = row
        self.misses += len(missing)
        self.hits += n - len(missing)
        rows = []
        for key in keys:
            store.move_to_end(key)
            rows.append(store[key])
        while len(store) > self.max_pairs:
            store.popitem(last=False)
        width = len(self.scorer.id2label)
        return np.array(rows).reshape(n, width)


class NliPairRecorder(_ScorerProxy):
    """A dry-run scorer: records the NLI pairs that computations ask for, then scores their union in one call.

    Run CCP / SAR (any configurations) with the recorder as ``nli``: it answers uniform probabilities (results of
    the dry run are meaningless and must be discarded) and remembers every distinct ``(model, premise,
    hypothesis)``. :meth:`prefetch` then sends the union to the wrapped scorer in **one** call (one de-duplicated,
    length-sorted, token-budget batching over every configuration's pairs) and returns an :class:`NliCache` holding
    the answers; running the computations again with that cache scores nothing more.

    ``benchmarks/bench_grid.py`` compares this schedule with the sequential one (configurations one after the other
    through an :class:`NliCache`).
    """

    def __init__(self, scorer: Any) -> None:
        self.scorer = scorer
        self._pairs: dict[tuple, str | None] = {}

    def predict_proba(self, premises: Sequence[str], hypotheses: Sequence[str], *,
                      generation_ids: Sequence[str] | None = None) -> np.ndarray:
        n = len(premises)
        if len(hypotheses) != n:
            raise ValueError(f"{n} premises but {len(hypotheses)} hypotheses")
        routed = self.routes_by_sample
        if routed and (generation_ids is None or len(generation_ids) != n):
            raise ValueError("the routed NLI scorer needs the generation_id of every pair (generation_ids=...)")
        for i in range(n):
            key = (self.scorer.route_key(generation_ids[i]) if routed else None, premises[i], hypotheses[i])
            self._pairs.setdefault(key, generation_ids[i] if routed else None)
        width = len(self.scorer.id2label)
        return np.full((n, width), 1.0 / width)

    def pairs(self) -> list[tuple[str, str]]:
        """The distinct (premise, hypothesis) pairs recorded (per model when routed), in first-asked order."""
        return [(premise, hypothesis) for _, premise, hypothesis in self._pairs]

    def prefetch(self, cache: NliCache | None = None) -> NliCache:
        """Score every recorded pair in one call of the wrapped scorer; returns the (new or given) cache."""
        cache = NliCache(self.scorer, max_pairs=max(len(self._pairs), 1)) if cache is None else cache
        keys = list(self._pairs)
        kwargs = {"generation_ids": [self._pairs[key] for key in keys]} if self.routes_by_sample else {}
        cache.predict_proba([k[1] for k in keys], [k[2] for k in keys], **kwargs)
        return cache
