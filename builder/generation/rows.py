"""One record builder and one row validation for every engine (hf, vllm, openai).

An engine turns a question into an :class:`EngineResult` (tokens, per-token candidates, text, finished);
:func:`make_record` turns it into a ``generations.jsonl`` row and :func:`check_row` validates that row with the rules
of an exported row (:mod:`much_dataset.validation`: probabilities finite and in [0, 1], sorted descending, summing to
at most ``1 + 1e-4``, the sampled token among the candidates) plus what only the builder knows: candidate ids inside
the vocabulary, no duplicate candidate id, 24 candidates (25 where the sampled token ranked below 24, appended by the
serving engines; the hf engine extends the list down to the sampled token), at most ``max_new_tokens`` tokens.
A row that breaks a rule is never stored: the engine loop records it as a failure naming the rule.

Rows are also checked against the sampler they claim (:func:`check_sampled`, with the :class:`RowLimits` the engine
gives): every sampled token inside the top-k and the top-p nucleus of the stored distribution, where the stored
candidates allow the check (see :func:`check_sampled`), and the end of the row agreeing with how it finished: a
finished row (``finish_reason: stop``) ends with an EOS (or another special token the tokenizer declares) and has no
stop token before it; an unfinished one (``length``) has exactly ``max_new_tokens`` tokens and no EOS.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from typing import Any

from builder.configs import GenerationConfig, hash_id
from much_dataset import schema

__all__ = ["EngineResult", "EngineInfo", "RowLimits", "make_record", "generation_id", "check_row", "check_sampled",
           "candidates_row", "stop_tokens"]

#: Slack of the sampler checks for float rounding between the stored values and what the sampler saw: a relative
#: one for a near-tie at the top-k boundary, an absolute one on the nucleus' cumulative mass.
TIE_SLACK, MASS_SLACK = 1e-2, 1e-3


@dataclasses.dataclass(frozen=True)
class EngineResult:
    """What an engine produced for one question."""

    tokens: list[int]
    ids: list[list[int]]
    probs: list[list[float]]
    output: str
    finished: bool


@dataclasses.dataclass(frozen=True)
class EngineInfo:
    """Recorded in every row: ``engine``, ``engine_version``, (serving engines) ``sampling`` and ``dtype`` (the dtype
    the values were computed in, :mod:`builder.generation.dtype`; None: not known, e.g. a server's undeclared)."""

    engine: str
    version: str
    sampling: dict[str, Any] | None = None
    dtype: str | None = None


@dataclasses.dataclass(frozen=True)
class RowLimits:
    """What :func:`check_row` needs beyond the row: the vocabulary size (None: not checked), the token budget, and
    the sampler the engine claims (``top_k`` 0/-1 and ``top_p`` 1.0: none; ``greedy``) with the tokenizer's stop
    tokens (``eos_ids``: ids that end an answer; ``special_ids``: every special token; empty: unknown)."""

    vocab_size: int | None
    max_new_tokens: int
    extend: bool = False  # hf: the candidate list may run down to the sampled token (more than 25 entries)
    top_k: int = 0
    top_p: float = 1.0
    greedy: bool = False
    eos_ids: frozenset[int] = frozenset()
    special_ids: frozenset[int] = frozenset()

    def to_json(self) -> str:
        """The limits as JSON (the id sets as sorted lists), for an engine that runs in another process."""
        record = dataclasses.asdict(self)
        record["eos_ids"], record["special_ids"] = sorted(self.eos_ids), sorted(self.special_ids)
        return json.dumps(record)

    @classmethod
    def from_json(cls, text: str) -> RowLimits:
        """The limits :meth:`to_json` wrote."""
        record = json.loads(text)
        return cls(**{**record, "eos_ids": frozenset(record.get("eos_ids", ())),
                      "special_ids": frozenset(record.get("special_ids", ()))})


def stop_tokens(tokenizer: Any, *, extra: Sequence[int] = ()) -> tuple[frozenset[int], frozenset[int]]:
    """``(eos_ids, special_ids)`` of a transformers tokenizer for :class:`RowLimits`: its EOS id (and ``extra``, e.g.
    a generation config's), and every special token it declares (a bare ``tokenizer.json`` has no EOS but marks its
    added special tokens)."""
    eos = getattr(tokenizer, "eos_token_id", None)
    eos_ids = {int(i) for i in (eos if isinstance(eos, list | tuple) else [eos]) if isinstance(i, int)}
    eos_ids |= {int(i) for i in extra}
    special = {int(i) for i in getattr(tokenizer, "all_special_ids", None) or []}
    added = getattr(tokenizer, "added_tokens_decoder", None) or {}
    special |= {int(i) for i, token in added.items() if getattr(token, "special", False)}
    return frozenset(eos_ids), frozenset(special | eos_ids)


def generation_id(record: dict[str, Any]) -> str:
    """An ID shaped like the reference's (docs/reference-behaviour.md#generation-id): hash of the compact JSON of the
    Generation fields.

    The reference hashes pydantic's serialisation, whose float formatting we do not promise to match byte for
    byte; treat the ID as an opaque, deterministic key.
    """
    topn = [{str(i): p for i, p in zip(ids, probs, strict=True)}
            for ids, probs in zip(record[schema.LOGITS_TOKEN_IDS], record[schema.LOGITS_VALUES], strict=True)]
    payload = {
        "generation_config": record[schema.GENERATION_CONFIG], "prompt": record[schema.PROMPT],
        "output": record[schema.OUTPUT], "lang": record[schema.LANG], "output_tokens": record[schema.OUTPUT_TOKENS],
        "wiki_url": record[schema.WIKI_URL], "topn_prob_dicts": topn,
    }
    return hash_id(json.dumps(payload, ensure_ascii=False, separators=(",", ":")))


def make_record(config: GenerationConfig, question: dict[str, Any], result: EngineResult, *,
                engine: EngineInfo) -> dict[str, Any]:
    """The ``generations.jsonl`` row of ``result`` (the one record builder of every engine)."""
    record = {
        schema.GENERATION_CONFIG: config.id, "question_id": question["question_id"],
        schema.LANG: question[schema.LANG], schema.WIKI_URL: question[schema.WIKI_URL],
        schema.PROMPT: question[schema.PROMPT], schema.OUTPUT: result.output,
        schema.OUTPUT_TOKENS: [int(t) for t in result.tokens], schema.LOGITS_TOKEN_IDS: result.ids,
        schema.LOGITS_VALUES: result.probs,
    }
    extra: dict[str, Any] = {"engine": engine.engine, "engine_version": engine.version}
    if engine.sampling is not None:
        extra["sampling"] = engine.sampling
    if engine.dtype is not None:
        extra["dtype"] = engine.dtype
    return {schema.GENERATION_ID: generation_id(record), **record, "finished": bool(result.finished), **extra}


def candidates_row(sampled: int, sampled_logprob: float, top: Sequence[tuple[int, float]], *,
                   top_k: int = schema.TOP_K) -> tuple[list[int], list[float]]:
    """Ids and probabilities of one position from an engine's (id, logprob) candidates.

    Sorted by decreasing probability (ties by id, so the order does not depend on the engine's dict order), the
    first ``top_k`` kept, and ``(sampled, exp(sampled_logprob))`` appended when the sampled id is not among them.
    Values are not judged here (a NaN sorts first, so it is kept and :func:`check_row` refuses the row).
    """
    pairs = [(int(i), float(lp)) for i, lp in top]
    ordered = sorted(pairs, key=lambda c: (not math.isnan(c[1]), -c[1] if not math.isnan(c[1]) else 0.0,
                                           c[0]))[:top_k]
    if len(ordered) < top_k:
        raise ValueError(f"the engine returned {len(ordered)} candidates, {top_k} expected")
    ids = [i for i, _ in ordered]
    probs = [math.exp(lp) for _, lp in ordered]
    if int(sampled) not in ids:
        ids.append(int(sampled))
        probs.append(math.exp(float(sampled_logprob)))
    return ids, probs


def check_row(row: dict[str, Any], limits: RowLimits) -> None:
    """Raise :class:`much_dataset.validation.InvalidSampleError` (a ``ValueError`` naming the ``generation_id``, the
    field and the token) when ``row`` breaks a rule of an exported row or of the builder (module docstring)."""
    from much_dataset.validation import InvalidSampleError, validate_rows

    gid = row.get(schema.GENERATION_ID)
    tokens = row[schema.OUTPUT_TOKENS]
    if not tokens:
        raise InvalidSampleError(gid, schema.OUTPUT_TOKENS, "no generated token")
    if len(tokens) > limits.max_new_tokens:
        raise InvalidSampleError(gid, schema.OUTPUT_TOKENS,
                                 f"{len(tokens)} tokens, more than max_new_tokens={limits.max_new_tokens}")
    ids_rows, value_rows = row[schema.LOGITS_TOKEN_IDS], row[schema.LOGITS_VALUES]
    for position, ids in enumerate(ids_rows if len(ids_rows) == len(tokens) else []):
        width = len(ids)
        if width < schema.TOP_K or (width > schema.TOP_K + 1 and not limits.extend):
            raise InvalidSampleError(gid, schema.LOGITS_TOKEN_IDS, f"token {position}: {width} candidates, expected "
                                     f"{schema.TOP_K} ({schema.TOP_K + 1} when the sampled token ranked below)")
        if width > schema.TOP_K and tokens[position] in ids[:schema.TOP_K]:
            raise InvalidSampleError(gid, schema.LOGITS_TOKEN_IDS, f"token {position}: {width} candidates although "
                                     "the sampled token is among the first 24")
        if len(set(ids)) != width:
            raise InvalidSampleError(gid, schema.LOGITS_TOKEN_IDS, f"token {position}: duplicate candidate ids")
        if limits.vocab_size is not None:
            outside = [i for i in ids if not 0 <= int(i) < limits.vocab_size]
            if outside:
                raise InvalidSampleError(gid, schema.LOGITS_TOKEN_IDS, f"token {position}: id {outside[0]} outside "
                                         f"the vocabulary (size {limits.vocab_size})")
    if limits.vocab_size is not None:
        outside = [t for t in tokens if not 0 <= int(t) < limits.vocab_size]
        if outside:
            raise InvalidSampleError(gid, schema.OUTPUT_TOKENS, f"token id {outside[0]} outside the vocabulary "
                                     f"(size {limits.vocab_size})")
    # The per-token rules of an exported row, by the same function (chunk/label columns are placeholders: a
    # generation has none yet; lang too: generate accepts any question language).
    probe = {schema.GENERATION_ID: gid or "row", schema.LANG: schema.LANGUAGES[0], schema.OUTPUT_TOKENS: tokens,
             schema.LOGITS_TOKEN_IDS: ids_rows, schema.LOGITS_VALUES: [[float(p) for p in v] for v in value_rows],
             schema.TOKEN_CHUNKS: [list(range(len(tokens)))], schema.LABELS: [-1], schema.HUMAN_LABELS_0: [0],
             schema.HUMAN_LABELS_1: [0]}
    probe.update({name: row.get(name, "") for name in schema.HUB_COLUMNS if name not in probe})
    try:
        validate_rows([probe], top_k=None)
    except InvalidSampleError as error:
        raise InvalidSampleError(gid, error.field, error.reason) from None
    check_sampled(row, limits)


def _check_end(gid: Any, tokens: Sequence[int], finished: bool, limits: RowLimits) -> None:
    from much_dataset.validation import InvalidSampleError

    stops = set(limits.eos_ids) | ({int(tokens[-1])} if finished else set())
    early = next((p for p, t in enumerate(tokens[:-1]) if int(t) in stops), None)
    if early is not None:
        raise InvalidSampleError(gid, schema.OUTPUT_TOKENS, f"token {early}: stop token {tokens[early]} before the "
                                 "last token (generation ends at the first EOS)")
    if finished:
        known = limits.eos_ids | limits.special_ids
        if known and int(tokens[-1]) not in known:
            raise InvalidSampleError(gid, schema.OUTPUT_TOKENS, f"finish_reason stop, but the last token "
                                     f"{tokens[-1]} is not an EOS or special token of the tokenizer (EOS "
                                     f"{sorted(limits.eos_ids) or 'unknown'})")
        return
    if int(tokens[-1]) in limits.eos_ids:
        raise InvalidSampleError(gid, schema.OUTPUT_TOKENS, f"the last token {tokens[-1]} is EOS, but the row is "
                                 "not finished (finish_reason length)")
    if len(tokens) != limits.max_new_tokens:
        raise InvalidSampleError(gid, schema.OUTPUT_TOKENS, f"not finished (finish_reason length) after "
                                 f"{len(tokens)} tokens, fewer than max_new_tokens={limits.max_new_tokens}: the "
                                 "answer was cut for another reason")


def check_sampled(row: dict[str, Any], limits: RowLimits) -> None:
    """Raise :class:`much_dataset.validation.InvalidSampleError` when a row could not come from the sampler of
    ``limits`` (run by :func:`check_row` after the per-token rules, so values are finite, sorted and summing to at
    most 1).

    * greedy: every sampled token has the largest stored probability (near-ties allowed);
    * top-k ``K``: the sampled token ranks below ``K``, or ties with the ``K``-th (relative :data:`TIE_SLACK`). The
      stored top 24 decide when ``K <= 24`` (MUCH's 20); with a larger ``K`` only a token among the stored
      candidates has a known rank, a token appended from below the 24 is not judged;
    * top-p ``P``: the token is in the nucleus of the top-``K`` distribution renormalised (HF's and vLLM's order):
      the mass of the tokens ranked above it is below ``P`` times the top-``K`` mass (+ :data:`MASS_SLACK`). Exact
      when the token is among the stored candidates and ``K <= 24`` or off; otherwise refused only when even the
      smallest possible mass above it (the stored 24) exceeds the largest possible nucleus (the top-``K`` mass
      bounded by the 24th probability for the ranks not stored);
    * the end of the row (module docstring).
    """
    from much_dataset.validation import InvalidSampleError

    gid = row.get(schema.GENERATION_ID)
    tokens = [int(t) for t in row[schema.OUTPUT_TOKENS]]
    _check_end(gid, tokens, bool(row.get("finished", True)), limits)
    k = limits.top_k if limits.top_k > 0 else 0
    if not (limits.greedy or k or limits.top_p < 1.0):
        return
    for position, (token, ids, values) in enumerate(zip(tokens, row[schema.LOGITS_TOKEN_IDS],
                                                        row[schema.LOGITS_VALUES], strict=True)):
        problem = _sampler_problem(token, [int(i) for i in ids], [float(v) for v in values], k, limits)
        if problem:
            raise InvalidSampleError(gid, schema.OUTPUT_TOKENS, f"token {position}: sampled token {token} {problem}: "
                                     "not what the sampler the row claims can produce")


def _sampler_problem(token: int, ids: list[int], values: list[float], k: int, limits: RowLimits) -> str | None:
    """Why one position's sampled token is outside the sampler of ``limits`` (:func:`check_sampled`), or None."""
    top = schema.TOP_K
    rank = ids.index(token)
    known = rank < top or limits.extend  # an appended token only says "ranked below the 24"
    chosen = values[rank]
    if limits.greedy:
        if chosen < values[0] * (1 - TIE_SLACK):
            return f"(probability {chosen:.4g}) is not the most probable ({values[0]:.4g}) under greedy decoding"
        return None
    if k and (rank >= k or not known) and (k <= top or known) and chosen < values[k - 1] * (1 - TIE_SLACK):
        return f"ranks {rank + 1 if known else f'below {top}'}, outside top_k={k}"
    if limits.top_p < 1.0:
        head = values[:top]
        above = sum(values[:rank]) if known else sum(head)
        if not k:
            mass = 1.0
        elif k <= len(values) and (k <= top or limits.extend):
            mass = sum(values[:k])
        else:
            mass = min(1.0, sum(head) + (k - len(head)) * head[-1])
        if above > limits.top_p * mass + MASS_SLACK:
            return (f"lies outside the top_p={limits.top_p:g} nucleus (the tokens above it hold {above:.4g} of the "
                    f"{'top-' + str(k) + ' ' if k else ''}mass {mass:.4g})")
    return None
