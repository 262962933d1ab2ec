"""Real-time claim monitoring: score and flag each claim while the model is still generating.

:class:`ClaimMonitor` receives one generated token at a time with its captured candidates (the top-24
temperature-scaled probabilities, exactly as MUCH stores them, docs/reference-behaviour.md#captured-distribution), feeds
the incremental claim segmenter and,
as soon as a claim is final, scores it with a registered token-level baseline, aggregates it with the metric's
stopword rule and aggregator (docs/reference-behaviour.md#stopword-rule, #aggregators) and flags it against a threshold.
Token sources:

* Hugging Face ``generate`` -- :meth:`ClaimMonitor.generate` (an iterator) or :meth:`ClaimMonitor.hooks` (a
  ``LogitsProcessor`` and a streamer to pass to your own ``generate`` call), in :mod:`much_metric.monitor._hf`;
* an OpenAI-compatible streaming endpoint with ``logprobs`` -- :meth:`ClaimMonitor.stream_openai`, in
  :mod:`much_metric.monitor._openai` (at most 20 alternatives per token on the OpenAI API, 24 from ``vllm serve
  --max-logprobs 25``, see there); ``much monitor --base-url`` streams from one;
* anything else -- :meth:`ClaimMonitor.push` / :meth:`ClaimMonitor.finish`.

Which baselines can run online: every registered baseline whose ``needs`` is empty (it reads only the sampled ids
and the candidate probabilities: Token Likelihood, Max Likelihood, Token Entropy, the other probability baselines,
and whatever is registered later through :mod:`much_metric.baselines.registry`), and those that need only static
data besides: KTC with its token-neighbour statistics (``neighbours=``, the generating tokenizer's). Baselines that
need a model (CCP and SAR's NLI) are refused. The baseline is run on the arrays of all tokens generated so far each
time a claim closes, so a *causal* baseline (token ``i``'s score depends on tokens ``<= i``) gives exactly its
offline scores; the per-token ones above are causal.

Thresholds: ``flagged = score >= threshold`` (the convention of ``sklearn.metrics.roc_curve``);
:meth:`ClaimMonitor.calibrate` picks a threshold on labelled data for a target false-positive rate or precision.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from much_dataset.params import POSITIVE_INT, check_param
from much_dataset.schema import TOP_K
from much_metric.monitor._openai import IncompleteStreamError, stream_chat_completion
from much_metric.monitor._records import Calibration, MonitoredClaim

__all__ = ["ClaimMonitor", "MonitoredClaim", "Calibration", "IncompleteStreamError", "online_spec",
           "stream_chat_completion"]



#: What an online baseline may need besides the probabilities: static data, no model.
_ONLINE_RESOURCES = ("neighbours",)


def online_spec(method: str, width: int, resources: dict[str, Any] | None = None):
    """Resolve ``method`` in the baseline registry and check it can score online on ``width`` candidates.

    ``resources`` holds what the method needs besides the probabilities, among ``("neighbours",)`` (KTC's
    token-neighbour statistics).
    """
    from much_metric.baselines import TokenArrays
    from much_metric.baselines.registry import resolve

    spec = resolve(method)
    if spec.baseline.level == "claim":
        raise ValueError(f"method {method!r} is claim-level (one value per claim, not per token): the monitor scores "
                         "a claim from its tokens' scores as it closes; choose a token-level method")
    model_needs = [need for need in spec.needs if need not in _ONLINE_RESOURCES]
    if model_needs:
        raise ValueError(f"method {method!r} needs {', '.join(model_needs)}: only baselines that need nothing but the "
                         "probabilities (and static data such as KTC's neighbour statistics) can score online")
    resources = resources or {}
    missing = [need for need in spec.needs if resources.get(need) is None]
    if missing:
        raise ValueError(f"method {method!r} needs {', '.join(missing)}: pass neighbours= (the generating "
                         "tokenizer's statistics, see `much neighbours`)")
    # A dry run on one token with `width` candidates: a parameter the candidates cannot support (token_entropy_24
    # on an endpoint's 20 alternatives) fails here, before any generation.
    probabilities = np.linspace(0.5, 0.01, width)[None, :]
    dummy = TokenArrays(["dry-run"], np.array([0, 1]), np.array([0]), np.arange(width)[None, :], probabilities)
    try:
        spec.compute(dummy, resources, {})
    except ValueError as error:
        raise ValueError(f"method {method!r} cannot score {width} candidates per token: {error}") from error
    return spec


def _check_probabilities(token: int, candidate_probs: Sequence[float]) -> None:
    """Refuse values that are not the top candidates of one distribution: each in [0, 1], summing to at most 1
    (both up to ``PROBABILITY_SUM_TOLERANCE``, float rounding)."""
    from much_dataset.validation import PROBABILITY_SUM_TOLERANCE as tolerance

    probs = np.asarray(candidate_probs, dtype=np.float64)
    inside = (probs >= 0) & (probs <= 1 + tolerance)  # False for NaN
    if not inside.all():
        position = int(np.flatnonzero(~inside)[0])
        raise ValueError(f"token {token}: candidate probability {probs[position]!r} at position {position} not in "
                         "[0, 1]: pass probabilities (not logits or log-probabilities)")
    total = float(probs.sum())
    if total > 1 + tolerance:
        raise ValueError(f"token {token}: candidate probabilities sum to {total:.6g} > 1 + {tolerance:g}: they "
                         "must be the top candidates of one distribution (probabilities, not scores)")


class ClaimMonitor:
    """Segment, score and flag claims while tokens are generated (batch size 1).

    Parameters
    ----------
    tokenizer : transformers tokenizer
        The generating model's tokenizer (segmentation, stopword rule, token strings of an endpoint).
    method : str, default "token_entropy_24"
        A signal name of the baseline registry whose baseline needs nothing but the probabilities.
    aggregation : Aggregation or str, keyword-only, default "product"
        How a claim's token scores become its score, as for :func:`much_metric.score`: an aggregator name or a
        :class:`~much_metric.scoring.Aggregation` (aggregator and stopword rule; a claim is scored as it closes, so
        its ``drop_last_chunk`` does not apply). ``monitor.aggregator`` / ``monitor.stopword_handling`` read it.
    threshold : float, optional
        Flag claims with ``score >= threshold``; set by :meth:`calibrate` too.
    compat : {"0.3.0", "0.2.1"}, keyword-only
        Segmenter version (0.3.0 emits each claim one claim late, see ``IncrementalSegmenter``).
    top_k : int, keyword-only, default 24
        Candidates captured per token (24 as MUCH; an OpenAI endpoint gives at most 20).
    neighbours : NeighbourStats, path or hub id, keyword-only, optional
        KTC's token-neighbour statistics of this tokenizer (``much_metric.baselines.load_neighbours``); needed by
        ``ktc*`` methods only. Their vocabulary size must be the tokenizer's.

    Examples
    --------
    Replaying a sample row token by token (its top-24 candidates as a model would give them): the claims close in
    the order the dataset's ``token_chunks`` list them.

    >>> import much_dataset
    >>> from much_metric.models import load_tokenizer
    >>> from much_metric.monitor import ClaimMonitor
    >>> row = much_dataset.load("sample", "en", split="test")[0]
    >>> monitor = ClaimMonitor(load_tokenizer("smollm2"), "max_likelihood", aggregation="max", threshold=0.5)
    >>> claims = []
    >>> for token, ids, probs in zip(row["output_tokens"], row["logits_token_ids"], row["logits_values"]):
    ...     claims += monitor.push(token, ids, probs)
    >>> claims += monitor.finish()
    >>> [claim.token_indices for claim in claims] == row["token_chunks"]
    True
    >>> monitor.aggregator, claims[0].text
    ('max', ' No')

    With a model, ``monitor.generate(model, input_ids, max_new_tokens=64)`` yields the claims while it generates,
    ``monitor.stream_openai(chunks)`` while an OpenAI-compatible server streams.
    """

    def __init__(self, tokenizer, method: str = "token_entropy_24", *, aggregation: Any = "product",
                 threshold: float | None = None, compat: str = "0.3.0", top_k: int = TOP_K,
                 neighbours: Any = None) -> None:
        from dataclasses import replace

        from much_metric.scoring.engine import as_aggregation
        from much_metric.segmentation import IncrementalSegmenter

        check_param("top_k", top_k, POSITIVE_INT, owner="ClaimMonitor")
        self.tokenizer = tokenizer
        self.method = str(method)
        # a claim is aggregated alone, as it closes: there is no EOS claim to drop from one claim
        self.aggregation = replace(as_aggregation(aggregation, "ClaimMonitor"), drop_last_chunk=False)
        self.threshold = self._check_threshold(threshold)
        self.compat = compat
        self.top_k = top_k
        self._resources = {"neighbours": self._check_neighbours(neighbours, tokenizer)}
        self._spec = online_spec(self.method, top_k, self._resources)
        self._eos_ids = IncrementalSegmenter(tokenizer, compat=compat).eos_ids
        self._stop_cache: dict[int, bool] = {}  # bounded by the vocabulary
        self.last_output: Any = None  # what the last HF generate call returned
        self.timings = {"segmenter": 0.0, "scorer": 0.0}  # seconds spent in each, summed over generations
        self.reset()
        self._warm_up()

    def _warm_up(self) -> None:
        # The segmenter builds per-tokenizer tables on its first tokens (seconds for a 50k vocabulary): pay that
        # here, not inside the first monitored generation.
        ids = list(self.tokenizer.encode("Warm up: the monitor is ready.", add_special_tokens=False))
        for token_id in ids:
            self._segmenter.push(token_id)
        self._segmenter.finish()
        self.reset()

    @staticmethod
    def _check_neighbours(neighbours: Any, tokenizer: Any) -> Any:
        if neighbours is None:
            return None
        from much_metric.baselines import NeighbourStats, load_neighbours

        stats = neighbours if isinstance(neighbours, NeighbourStats) else load_neighbours(neighbours)
        if stats.vocab_size != len(tokenizer):
            raise ValueError(f"neighbour statistics of {stats.tokenizer} cover {stats.vocab_size} ids, this tokenizer "
                             f"has {len(tokenizer)}: statistics of another tokenizer?")
        return stats

    @staticmethod
    def _check_threshold(threshold: float | None) -> float | None:
        if threshold is None:
            return None
        value = float(threshold)
        if not np.isfinite(value):
            raise ValueError(f"threshold must be a finite number, got {threshold!r}")
        return value

    # -- one generation ----------------------------------------------------------------------------------------------

    @property
    def aggregator(self) -> str:
        """The claim aggregator (``aggregation.aggregator``)."""
        return self.aggregation.aggregator

    @property
    def stopword_handling(self) -> str:
        """The stopword rule (``aggregation.stopword_handling``)."""
        return self.aggregation.stopword_handling

    def reset(self) -> None:
        """Start a new generation (called by the token sources)."""
        from much_metric.segmentation import IncrementalSegmenter

        self._segmenter = IncrementalSegmenter(self.tokenizer, compat=self.compat)
        self._ids: list[int] = []
        self._cand_ids: list[Sequence[int]] = []
        self._cand_probs: list[Sequence[float]] = []
        self._claims: list[MonitoredClaim] = []
        self._scores = np.zeros(0)

    @property
    def claims(self) -> list[MonitoredClaim]:
        """Claims emitted so far in the current generation."""
        return list(self._claims)

    @property
    def token_ids(self) -> list[int]:
        """Tokens pushed so far in the current generation."""
        return list(self._ids)

    def candidates(self) -> tuple[list[list[int]], list[list[float]]]:
        """The captured candidates of every token so far (``logits_token_ids``, ``logits_values`` of the row)."""
        return [list(row) for row in self._cand_ids], [list(row) for row in self._cand_probs]

    def push(self, token_id: int, candidate_ids: Sequence[int], candidate_probs: Sequence[float]
             ) -> list[MonitoredClaim]:
        """Add the next generated token and its candidates; return the claims that became final (often none).

        ``candidate_ids`` / ``candidate_probs`` are sorted by decreasing probability (the builder's row: ``top_k``
        entries, more when the token ranked lower, down to it).
        """
        import time

        if len(candidate_ids) != len(candidate_probs) or not len(candidate_ids):
            raise ValueError(f"token {len(self._ids)}: {len(candidate_ids)} candidate ids but "
                             f"{len(candidate_probs)} probabilities (need the same, non-zero count)")
        _check_probabilities(len(self._ids), candidate_probs)
        self._ids.append(int(token_id))
        self._cand_ids.append(candidate_ids)
        self._cand_probs.append(candidate_probs)
        started = time.perf_counter()
        closed = self._segmenter.push(int(token_id))
        self.timings["segmenter"] += time.perf_counter() - started
        return self._score(closed) if closed else []

    def finish(self) -> list[MonitoredClaim]:
        """Declare the generation complete; return the remaining claims."""
        import time

        if not self._ids:
            raise ValueError("finish() before any token: nothing was generated")
        started = time.perf_counter()
        closed = self._segmenter.finish()
        self.timings["segmenter"] += time.perf_counter() - started
        return self._score(closed)

    def _arrays(self, n: int):
        from much_metric.baselines import TokenArrays

        # Rows are `top_k` wide except when the sampled token ranked lower (extended down to it, as the builder
        # does): pad those generations with probability 0 / id -1, which no baseline mistakes for a candidate.
        width = max(len(row) for row in self._cand_ids[:n])
        ids = np.full((n, width), -1, dtype=np.int64)
        probs = np.zeros((n, width), dtype=np.float64)
        for i in range(n):
            row = self._cand_ids[i]
            ids[i, : len(row)] = row
            probs[i, : len(row)] = self._cand_probs[i]
        return TokenArrays(["monitored"], np.array([0, n]), np.asarray(self._ids[:n], dtype=np.int64), ids, probs)

    def _is_stopword(self, token_id: int) -> bool:
        found = self._stop_cache.get(token_id)
        if found is None:
            from much_dataset.stopwords import is_stopword

            found = self._stop_cache[token_id] = is_stopword(self.tokenizer.decode([token_id]))
        return found

    def _score(self, closed: list[list[int]]) -> list[MonitoredClaim]:
        import time

        from much_metric.scoring import aggregate_claims

        started = time.perf_counter()
        end = closed[-1][-1] + 1
        if end > len(self._scores):
            self._scores = self._spec.compute(self._arrays(end), self._resources, {})
        out = []
        for indices in closed:
            first, last = indices[0], indices[-1]
            ids = self._ids[first : last + 1]
            scores = self._scores[first : last + 1].copy()
            stop = np.fromiter((self._is_stopword(t) for t in ids), dtype=bool, count=len(ids))
            (value,), = aggregate_claims([scores], [[list(range(len(ids)))]], [stop], aggregation=self.aggregation)
            text = self._segmenter.text_of(first, last)  # decoded text the segmenter already maintains
            eos = all(t in self._eos_ids for t in ids)
            flagged = self.threshold is not None and not eos and float(value) >= self.threshold
            claim = MonitoredClaim(len(self._claims), text, list(indices), ids, scores, stop, float(value),
                                   bool(flagged), eos)
            self._claims.append(claim)
            out.append(claim)
        self.timings["scorer"] += time.perf_counter() - started
        return out

    # -- token sources ------------------------------------------------------------------------------------------------

    def hooks(self, on_claim, *, temperature: float = 1.0):
        """``(logits_processor, streamer)`` for your own ``model.generate(..., logits_processor=..., streamer=...)``.

        ``on_claim(claim)`` is called from inside ``generate`` for each claim as soon as it is final. ``temperature``
        must be the sampling temperature (1.0 for greedy decoding, as the builder). See
        :func:`much_metric.monitor._hf.monitor_hooks`.
        """
        from much_metric.monitor._hf import monitor_hooks

        return monitor_hooks(self, on_claim, temperature=temperature)

    def generate(self, model, input_ids, **generate_kwargs) -> Iterator[MonitoredClaim]:
        """Run ``model.generate`` (in a thread) and yield each claim as soon as it is final.

        ``generate_kwargs`` go to ``model.generate``; batch size 1. After the iterator is exhausted,
        :attr:`last_output` holds what ``generate`` returned. See :func:`much_metric.monitor._hf.generate_claims`.
        """
        from much_metric.monitor._hf import generate_claims

        return generate_claims(self, model, input_ids, **generate_kwargs)

    def stream_openai(self, chunks: Iterable[Any]) -> Iterator[MonitoredClaim]:
        """Yield claims from the chunks of an OpenAI-compatible chat/completions stream with ``logprobs``.

        Raises :class:`IncompleteStreamError` (a ``ValueError``) after the last claim it could yield when the stream
        ends before the answer (no ``finish_reason``, no ``data: [DONE]``), holds no token, or is not a stream.
        See :func:`much_metric.monitor._openai.claims_from_stream`.
        """
        from much_metric.monitor._openai import claims_from_stream

        return claims_from_stream(self, chunks)

    # -- thresholds ---------------------------------------------------------------------------------------------------

    def calibrate(self, dataset: Any, *, target_fpr: float | None = None, target_precision: float | None = None,
                  drop_last_chunk: bool = True) -> Calibration:
        """Pick the flagging threshold on labelled data and set it; return what it achieves there.

        Parameters
        ----------
        dataset : datasets.Dataset or list of rows
            A MUCH split or any labelled export (``output_tokens``, ``logits_token_ids``, ``logits_values``,
            ``token_chunks``, ``labels``, ``stopword_mask``), e.g. ``much_dataset.load("sample", split="test")``.
            Its token scores come from this monitor's method, its claim scores from its aggregator and stopword
            rule, exactly as online.
        target_fpr : float in [0, 1], optional (default 0.10 when no target is given)
            The lowest threshold whose false-positive rate (correct claims flagged) is at most this.
        target_precision : float in (0, 1], optional
            Instead: the lowest threshold whose precision is at least this (the highest recall at that precision).
        drop_last_chunk : bool, default True
            Drop each sample's EOS claim, as the metric does.

        Raises
        ------
        ValueError
            Both targets given, a target out of range, data without both classes, or no threshold reaching a
            target precision.
        """
        from much_metric.monitor._calibration import calibrate

        result = calibrate(self, dataset, target_fpr=target_fpr, target_precision=target_precision,
                           drop_last_chunk=drop_last_chunk)
        self.threshold = result.threshold
        return result

