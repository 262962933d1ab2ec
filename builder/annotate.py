"""annotate: claim labels from LLM judges through an OpenAI-compatible chat API
(docs/reference-behaviour.md#judge-prompt, paper section 3.4).

``python -m builder annotate --out DIR --judge gpt-4o-2024-11-20 --judge gpt-4.1-2025-04-14`` makes ONE call per
judge per sample (temperature 0, seed 0, strict JSON-schema output with one -1/1 integer per non-EOS claim) and
appends ``{generation_id, judge, model, labels, usage, cost_usd, attempts}`` to ``labels.<judge-key>.jsonl``
(``labels`` has the EOS claim's +1 appended). The judge key drops the model's date suffix (``gpt-4o``, ``gpt-4.1``)
or is given as ``--judge MODEL=KEY``.

Answers are validated (one field per non-EOS claim, values in {-1, 1}); rate limits, timeouts, connection and
server errors and invalid answers are retried with exponential backoff, up to ``--max-attempts`` calls, after which a
failure with its reason goes to ``labels.<key>.failures.jsonl`` (a rerun retries it). Tokens of every call, retries
included, are summed into ``usage`` and priced with ``--price MODEL=IN/OUT`` (USD per 1M tokens); a call whose usage
never came back (a timeout, a cut connection) is counted in ``usage.unmetered_calls`` and makes ``cost_usd`` null
(unknown), never 0.

Inputs: ``generations.jsonl``, ``segments.jsonl``, ``context.jsonl``, ``wiki.jsonl`` (infobox). Claim texts are decoded
with ``--tokenizer`` (tokenizer.json, .gguf, folder or hub id) or, by default, the tokenizer ``segment`` used: the
config's ``model_source`` (what ``generate`` loaded) when recorded, else its ``model_name``. The API key is read
from the environment variable named by ``--api-key-env`` (never logged); the
base URL from ``--base-url`` or ``OPENAI_BASE_URL``, so a local vLLM server or another provider works. Samples the
filter would trash anyway (no EOS, sampled token outside the top 24) are not sent unless ``--annotate-all``.
"""

from __future__ import annotations

import argparse
import os
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from builder import _judge_prompt as prompt
from builder.errors import AuthenticationError, BuilderError, require_input
from builder.filter import EosResolver, sampled_outside_top_k
from builder.store import JsonlStore, Shard, read_store
from much_dataset.schema import CORRECT, GENERATION_CONFIG, GENERATION_ID, OUTPUT, OUTPUT_TOKENS, PROMPT, TOKEN_CHUNKS

__all__ = ["DEFAULT_JUDGES", "DEFAULT_PRICES", "judge_key", "JudgeResult", "JudgeFailed", "call_judge", "cost_usd",
           "add_arguments", "run"]

DEFAULT_JUDGES = ("gpt-4o-2024-11-20", "gpt-4.1-2025-04-14")
#: USD per 1M (input, output) tokens, OpenAI list prices in 2025.
DEFAULT_PRICES: dict[str, tuple[float, float]] = {
    "gpt-4o-2024-11-20": (2.50, 10.00),
    "gpt-4.1-2025-04-14": (2.00, 8.00),
}


def judge_key(model: str) -> str:
    """Label key of a judge model: its name without a ``-YYYY-MM-DD`` suffix (``gpt-4o-2024-11-20`` -> ``gpt-4o``)."""
    return re.sub(r"-\d{4}-\d{2}-\d{2}$", "", model.split("/")[-1])


def cost_usd(usage: Mapping[str, int], price: tuple[float, float] | None) -> float | None:
    """Cost of ``usage`` (prompt/completion tokens) at ``price`` = USD per 1M (input, output); None if unpriced or
    unknown (a call the server may have computed but whose usage never came back: ``unmetered_calls``)."""
    if price is None or usage.get("unmetered_calls"):
        return None
    return (usage["prompt_tokens"] * price[0] + usage["completion_tokens"] * price[1]) / 1e6


class JudgeFailed(RuntimeError):
    """The judge gave no valid answer within the allowed attempts (or a non-retryable error)."""

    def __init__(self, reason: str, usage: dict[str, int]) -> None:
        super().__init__(reason)
        self.usage = usage


@dataclass
class JudgeResult:
    labels: list[int]
    usage: dict[str, int] = field(default_factory=dict)
    attempts: int = 1


def _retryable(error: Exception) -> bool:
    import openai

    if isinstance(error, prompt.InvalidAnswer | openai.RateLimitError | openai.APITimeoutError
                  | openai.APIConnectionError | openai.InternalServerError | openai.APIResponseValidationError):
        return True
    # A truncated or garbage 200 body: the client fails to decode it or hands back something without the fields.
    if isinstance(error, ValueError | AttributeError | TypeError) and not isinstance(error, openai.APIError):
        return True
    return isinstance(error, openai.APIStatusError) and error.status_code >= 500


def _refused(error: Exception) -> bool:
    import openai

    return isinstance(error, openai.AuthenticationError | openai.PermissionDeniedError)


def call_judge(client: Any, model: str, messages: list[dict[str, str]], n_segments: int, *,
               max_attempts: int = 5, backoff: float = 2.0, max_backoff: float = 60.0,
               sleep: Callable[[float], None] = time.sleep) -> JudgeResult:
    """Ask ``model`` for the ``n_segments`` non-EOS labels; validated, retried, usage summed over all calls.

    Retries (after ``backoff * 2**k`` seconds, capped at ``max_backoff``) on rate limits, timeouts, connection and 5xx
    errors and invalid answers; other API errors (authentication, bad request) fail at once. Raises
    :class:`JudgeFailed` with the last reason. ``usage`` sums the tokens the server reported; a call that timed out,
    lost its connection or came back without usage is counted in ``unmetered_calls`` (its tokens are unknown: the
    sums are then lower bounds and :func:`cost_usd` is None), an HTTP error answer costs nothing.
    """
    if max_attempts < 1:
        raise ValueError(f"max_attempts must be >= 1, got {max_attempts}")
    import openai

    usage = {"prompt_tokens": 0, "completion_tokens": 0, "calls": 0, "unmetered_calls": 0}
    reason = "no attempt"
    for attempt in range(1, max_attempts + 1):
        try:
            usage["calls"] += 1
            try:
                response = client.chat.completions.create(
                    model=model, messages=messages, temperature=0, seed=0,
                    response_format=prompt.response_format(n_segments))
            except (openai.APITimeoutError, openai.APIConnectionError):
                # the server may have computed (and billed) the answer: its tokens are unknown, not 0
                usage["unmetered_calls"] += 1
                raise
            if getattr(response, "usage", None) is None:
                usage["unmetered_calls"] += 1
            else:
                usage["prompt_tokens"] += int(response.usage.prompt_tokens or 0)
                usage["completion_tokens"] += int(response.usage.completion_tokens or 0)
            if not response.choices:
                raise prompt.InvalidAnswer("no choice in the answer")
            labels = prompt.parse_labels(response.choices[0].message.content, n_segments)
            return JudgeResult(labels=labels, usage=usage, attempts=attempt)
        except Exception as error:  # noqa: BLE001 -- classified just below
            if _refused(error):
                raise AuthenticationError(f"the API refused the key (HTTP {error.status_code}) for model {model!r}: "
                                          "check the variable named by --api-key-env; stopping") from None
            if not _retryable(error):
                raise JudgeFailed(f"{type(error).__name__}: {error}", usage) from error
            reason = f"{type(error).__name__}: {error}"
        if attempt < max_attempts:
            sleep(min(max_backoff, backoff * 2 ** (attempt - 1)))
    raise JudgeFailed(f"no valid answer after {max_attempts} attempts; last: {reason}", usage)


def _parse_judges(values: Sequence[str]) -> list[tuple[str, str]]:
    judges = []
    for value in values:
        model, _, key = value.partition("=")
        judges.append((model, key or judge_key(model)))
    keys = [key for _, key in judges]
    if len(set(keys)) != len(keys):
        raise BuilderError(f"two judges share a label key: {keys}; name them with --judge MODEL=KEY")
    return judges


def _parse_prices(values: Sequence[str]) -> dict[str, tuple[float, float]]:
    prices = dict(DEFAULT_PRICES)
    for value in values:
        try:
            model, rates = value.split("=")
            rate_in, rate_out = (float(x) for x in rates.split("/"))
        except ValueError as error:
            raise BuilderError(f"--price must look like MODEL=IN/OUT (USD per 1M tokens), got {value!r}") from error
        prices[model] = (rate_in, rate_out)
    return prices


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--judge", action="append", default=None,
                        help="judge model, repeatable; MODEL or MODEL=KEY (default: gpt-4o-2024-11-20 and "
                             "gpt-4.1-2025-04-14)")
    parser.add_argument("--base-url", default=None, help="OpenAI-compatible API base URL (default $OPENAI_BASE_URL)")
    parser.add_argument("--api-key-env", default="OPENAI_API_KEY", help="environment variable holding the API key")
    parser.add_argument("--tokenizer", default=None,
                        help="generating model's tokenizer to decode claims (default: the config's model_name)")
    parser.add_argument("--price", action="append", default=[], help="MODEL=IN/OUT, USD per 1M tokens")
    parser.add_argument("--max-attempts", type=int, default=5)
    parser.add_argument("--backoff", type=float, default=2.0, help="first retry delay in seconds (doubles)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per API call")
    parser.add_argument("--workers", type=int, default=4, help="concurrent API calls")
    parser.add_argument("--limit", type=int, default=None, help="annotate at most this many samples (cost control)")
    parser.add_argument("--annotate-all", action="store_true",
                        help="also send samples the filter trashes anyway (no EOS, outside the top 24)")
    parser.add_argument("--eos-ids", type=int, nargs="+", default=None, help="EOS ids for the no-EOS pre-check")


class Decoders:
    """One decoder per generating model, loaded on first use (``--tokenizer`` overrides them all)."""

    def __init__(self, tokenizer: str | None, configs: Mapping[str, Mapping[str, Any]]) -> None:
        self._override, self._configs, self._cache = tokenizer, configs, {}

    def for_row(self, row: Mapping[str, Any]) -> Callable[[list[int]], str]:
        config = self._configs.get(row[GENERATION_CONFIG], {})
        # segment's rule: the model generate loaded (model_source) when recorded, else the config's model_name
        spec = self._override or config.get("model_source") or config.get("model_name")
        if not spec:
            raise ValueError(f"generation_id={row[GENERATION_ID]!r}: no tokenizer for field {GENERATION_CONFIG!r}="
                             f"{row[GENERATION_CONFIG]!r} (not in configs.jsonl); pass --tokenizer")
        if spec not in self._cache:
            self._cache[spec] = prompt.load_decoder(spec)
        return self._cache[spec]


def build_judge_messages(generation: Mapping[str, Any], segments: Mapping[str, Any], context: Mapping[str, Any],
                         infobox: dict[str, Any] | None, decode: Callable[[list[int]], str]) -> tuple[list, int]:
    """Chat messages for one sample and its number of non-EOS claims.

    Raises ``ValueError`` naming the sample when ``token_chunks`` is not a contiguous, exhaustive cover of the
    output tokens (the labels could not be aligned with the claims).
    """
    chunks, n_tokens = segments[TOKEN_CHUNKS], len(generation[OUTPUT_TOKENS])
    if not chunks or [i for chunk in chunks for i in chunk] != list(range(n_tokens)) or not all(chunks):
        raise ValueError(f"generation_id={generation[GENERATION_ID]!r}: field {TOKEN_CHUNKS!r} does not cover the "
                         f"{n_tokens} output tokens contiguously")
    texts = prompt.chunk_texts(generation[OUTPUT_TOKENS], chunks, decode)
    messages = prompt.build_messages(question=generation[PROMPT], output=generation[OUTPUT], segments=texts[:-1],
                                     infobox=infobox, context_chunks=context.get("chunks", []))
    return messages, len(texts) - 1


@dataclass(frozen=True)
class _Inputs:
    """The step's artifacts, read once: rows by generation_id (infoboxes by wiki URL)."""

    configs: dict[str, dict]
    generations: dict[str, dict]
    segments: dict[str, dict]
    contexts: dict[str, dict]
    infoboxes: dict[str, dict]


def _read_inputs(out: Path) -> _Inputs:
    require_input(out / "generations.jsonl", made_by="generate")
    require_input(out / "segments.jsonl", made_by="segment")
    return _Inputs(configs={r[GENERATION_CONFIG]: r for r in read_store(out / "configs.jsonl")},
                   generations={r[GENERATION_ID]: r for r in read_store(out / "generations.jsonl")},
                   segments={r[GENERATION_ID]: r for r in read_store(out / "segments.jsonl")},
                   contexts={r[GENERATION_ID]: r for r in read_store(out / "context.jsonl")},
                   infoboxes={r["wiki_url"]: r.get("infobox") or {} for r in read_store(out / "wiki.jsonl")})


def _select(ids: Sequence[str], done: Callable[[str, str], bool], judges: Sequence[tuple[str, str]],
            worth_sending: Callable[[str], bool]) -> tuple[list[tuple[str, list[tuple[str, str]]]], int]:
    """The samples to send, each with the judges ``(model, key)`` that have not labelled it yet (``done(gid, key)``),
    and how many were left out because ``worth_sending(gid)`` is false (the filter would trash them)."""
    todo, skipped = [], 0
    for gid in ids:
        pending = [(model, key) for model, key in judges if not done(gid, key)]
        if not pending:
            continue
        if not worth_sending(gid):
            skipped += 1
            continue
        todo.append((gid, pending))
    return todo, skipped


def _messages_for(gid: str, inputs: _Inputs, decoders: Decoders) -> tuple[list[dict[str, str]], int]:
    """The judge's messages for ``gid`` and its number of non-EOS claims; ValueError/KeyError naming the sample when
    its context is missing or empty."""
    if gid not in inputs.contexts:
        raise ValueError(f"generation_id={gid!r}: no row in context.jsonl (run `context` first)")
    context = inputs.contexts[gid]
    if not context.get("chunks") and context.get("status") not in (None, "ok"):
        raise ValueError(f"generation_id={gid!r}: no reference knowledge (context status "
                         f"{context.get('status')!r})")
    generation = inputs.generations[gid]
    return build_judge_messages(generation, inputs.segments[gid], context, inputs.infoboxes.get(generation["wiki_url"]),
                                decoders.for_row(generation))


class _Ledger:
    """One judge's store of answers (``labels.<key>.jsonl``) and its running totals, printed at the end."""

    def __init__(self, key: str, store: JsonlStore) -> None:
        self.key, self.store = key, store
        self.prompt_tokens = self.completion_tokens = self.ok = self.failed = self.unmetered = 0
        self.cost = 0.0
        self.unpriced = 0  # answers that used tokens with no price for their model (no --price): cost unknown

    def fail(self, gid: str, reason: str, **fields: Any) -> None:
        self.store.record_failure(gid, reason, **fields)
        self.failed += 1

    def settle(self, gid: str, model: str, future: Future, price: tuple[float, float] | None) -> None:
        """Wait for ``model``'s answer about ``gid`` and append its labels (or its failure); an AuthenticationError
        propagates (the caller cancels the calls not started yet)."""
        try:
            result = future.result()
        except JudgeFailed as error:
            self.fail(gid, str(error), judge=self.key, model=model, usage=error.usage,
                      cost_usd=cost_usd(error.usage, price))
            return
        cost = cost_usd(result.usage, price)
        self.store.append({GENERATION_ID: gid, "judge": self.key, "model": model,
                           "labels": [*result.labels, CORRECT], "usage": result.usage, "cost_usd": cost,
                           "attempts": result.attempts})
        self.ok += 1
        self.prompt_tokens += result.usage["prompt_tokens"]
        self.completion_tokens += result.usage["completion_tokens"]
        self.unmetered += result.usage.get("unmetered_calls", 0)
        self.cost += cost or 0.0
        used = result.usage["prompt_tokens"] + result.usage["completion_tokens"]
        self.unpriced += cost is None and used > 0 and not result.usage.get("unmetered_calls")

    def summary(self) -> str:
        per_1000 = 1000 * self.cost / self.ok if self.ok else 0.0
        unknown = (f"; {self.unmetered} calls without usage (timed out or cut): tokens and cost are lower bounds"
                   if self.unmetered else "")
        if self.unpriced and self.unpriced == self.ok:  # never "USD 0" for a cost nobody priced
            cost = "price unknown (no --price MODEL=IN/OUT for this judge; cost_usd stored as null)"
        elif self.unpriced:
            cost = (f"USD {self.cost:.4f} for the priced answers, {self.unpriced} answers' price unknown (no "
                    "--price for their model)")
        else:
            cost = f"USD {self.cost:.4f} (~{per_1000:.2f} per 1,000)"
        return (f"annotate {self.key}: {self.ok} labelled, {self.failed} failed, {self.prompt_tokens} input + "
                f"{self.completion_tokens} output tokens, {cost}{unknown}")


def _no_call_needed() -> Future:
    """The answer for a sample with only the EOS claim: its label is +1 by definition, no call is made."""
    future: Future = Future()
    future.set_result(JudgeResult(labels=[], usage={"prompt_tokens": 0, "completion_tokens": 0, "calls": 0,
                                                    "unmetered_calls": 0}, attempts=0))
    return future


def _judge_with(client: Any, args: argparse.Namespace) -> Callable[[str, list, int], JudgeResult]:
    """``call_judge`` for the step's options, which stops calling after the first 401/403 (every further call would
    be refused the same way)."""
    refused = threading.Event()

    def work(model: str, messages: list, n_segments: int) -> JudgeResult:
        if refused.is_set():
            raise AuthenticationError("stopped after the API refused the key")
        try:
            return call_judge(client, model, messages, n_segments, max_attempts=args.max_attempts,
                              backoff=args.backoff)
        except AuthenticationError:
            refused.set()
            raise

    return work


def _send(gid: str, pending: Sequence[tuple[str, str]], prepare: Callable[[str], tuple[list, int]],
          submit: Callable[..., Future], ledgers: Mapping[str, _Ledger]) -> list[tuple[str, str, str, Future]]:
    """``(gid, model, key, future answer)`` for each pending judge ``(model, key)`` of ``gid``; [] after recording a
    failure for each when ``prepare(gid)`` (the judge's messages and the number of claims) raises about the sample."""
    try:
        messages, n_segments = prepare(gid)
    except (ValueError, KeyError) as error:
        for _, key in pending:
            ledgers[key].fail(gid, str(error))
        return []
    return [(gid, model, key, _no_call_needed() if n_segments == 0 else submit(model, messages, n_segments))
            for model, key in pending]


def run(args: argparse.Namespace) -> int:
    from openai import OpenAI
    from tqdm import tqdm

    out = Path(args.out)
    judges = _parse_judges(args.judge or DEFAULT_JUDGES)
    prices = _parse_prices(args.price)
    inputs = _read_inputs(out)
    ledgers = {key: _Ledger(key, JsonlStore(out / f"labels.{key}.jsonl")) for _, key in judges}
    resolver = EosResolver(eos_ids=args.eos_ids, tokenizer=args.tokenizer, configs=inputs.configs)
    decoders = Decoders(args.tokenizer, inputs.configs)

    def worth_sending(gid: str) -> bool:  # the filter would trash a sample without EOS or sampled outside the top k
        row = inputs.generations[gid]
        return args.annotate_all or (resolver.ends_with_eos(row) and not sampled_outside_top_k(row))

    ids = Shard.parse(args.shard).select(sorted(set(inputs.generations) & set(inputs.segments)))
    todo, skipped = _select(ids, lambda gid, key: gid in ledgers[key].store, judges, worth_sending)
    if args.limit is not None:
        todo = todo[: args.limit]
    client = OpenAI(base_url=args.base_url or os.environ.get("OPENAI_BASE_URL"),
                    api_key=os.environ.get(args.api_key_env) or "EMPTY", max_retries=0, timeout=args.timeout)
    work = _judge_with(client, args)
    with ThreadPoolExecutor(max_workers=max(1, args.workers)) as pool, \
            tqdm(total=sum(len(pending) for _, pending in todo), desc="annotate") as bar:
        futures = []
        for gid, pending in todo:
            sent = _send(gid, pending, lambda gid: _messages_for(gid, inputs, decoders),
                         lambda *call: pool.submit(work, *call), ledgers)
            if not sent:  # no messages: a failure recorded for every pending judge
                bar.update(len(pending))
            futures += sent
        for gid, model, key, future in futures:
            try:
                ledgers[key].settle(gid, model, future, prices.get(model))
            except AuthenticationError:
                for *_, other in futures:
                    other.cancel()
                raise
            bar.update(1)
    for ledger in ledgers.values():
        print(ledger.summary())
    if skipped:
        print(f"annotate: {skipped} samples not sent (no EOS or sampled token outside the top 24; --annotate-all "
              "sends them)")
    return 0 if all(ledger.failed == 0 for ledger in ledgers.values()) else 1

