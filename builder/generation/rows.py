"""One record builder and one row validation for every engine (hf, vllm, openai).

An engine turns a question into an :class:`EngineResult` (tokens, per-token candidates, text, finished);
:func:`make_record` turns it into a ``generations.jsonl`` row and :func:`check_row` validates that row with the rules
of an exported row (:mod:`much_dataset.validation`: probabilities finite and in [0, 1], sorted descending, summing to
at most ``1 + 1e-4``, the sampled token among the candidates) plus what only the builder knows: candidate ids inside
the vocabulary, no duplicate candidate id, 24 candidates (25 where the sampled token ranked below 24, appended by the
serving engines; the hf engine extends the list down to the sampled token), at most ``max_new_tokens`` tokens.
A row that breaks a rule is never stored: the engine loop records it as a failure naming the rule.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from typing import Any

from builder.configs import GenerationConfig, hash_id
from much_dataset import schema

__all__ = ["EngineResult", "EngineInfo", "RowLimits", "make_record", "generation_id", "check_row",
           "candidates_row"]


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
    """What :func:`check_row` needs beyond the row: the vocabulary size (None: not checked) and the token budget."""

    vocab_size: int | None
    max_new_tokens: int
    extend: bool = False  # hf: the candidate list may run down to the sampled token (more than 25 entries)


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
