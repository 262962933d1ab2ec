"""The ``openai`` engine: chat completions against an OpenAI-compatible server (``vllm serve``, SGLang).

The server samples with the config's own sampler (MUCH's top_p 0.9 / top_k 20 by default) and returns its raw
log-probabilities; at T != 1 it must serve the tempered model (:mod:`builder.generation.sampling`: started with
``--hf-overrides '{"logit_scale": 1/T}'``), which ``--server-logit-scale`` declares; requests use temperature 1.

Deadlines: ``timeout`` bounds a whole request (connection, waiting, every byte of the answer), not each read: a
server that trickles its answer is cut at the deadline. Retries (``max_attempts``, exponential backoff): transport
errors (connection, timeouts), HTTP 408/429/5xx and malformed answers only; anything else (a 4xx, a bug on the
client side such as an ``AttributeError``) fails the question at once. Each row is validated before it is stored
(:func:`builder.generation.rows.check_row`, by :func:`builder.generation.engine.run_engine`).
"""

from __future__ import annotations

import json
import math
import os
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from typing import Any

from builder.configs import GenerationConfig
from builder.errors import BuilderError
from builder.generation.dtype import DTYPES
from builder.generation.engine import EngineOptions
from builder.generation.rows import (
    EngineInfo,
    EngineResult,
    RowLimits,
    candidates_row,
    check_row,
    make_record,
    stop_tokens,
)
from builder.generation.sampling import SamplingSettings
from much_dataset import schema

__all__ = ["OpenAIEngine", "OpenAIGenerationFailed", "MalformedAnswer", "RetryableHTTPError", "request_json",
           "parse_answer", "openai_generate", "bounded_map", "reported_dtype", "server_dtype"]

_TOKEN_ID = re.compile(r"^token_id:(-?\d+)$")
_RETRY_STATUS = frozenset({408, 409, 425, 429})


class OpenAIGenerationFailed(RuntimeError):
    """No valid answer from the server within the allowed attempts (or a non-retryable error)."""


class MalformedAnswer(ValueError):
    """The server's answer is not a chat completion with token ids and log-probabilities (retried)."""


class RetryableHTTPError(RuntimeError):
    """HTTP 408/409/425/429/5xx or a transport failure (retried)."""


class _HTTPStatusError(RuntimeError):
    """Any other HTTP error status (not retried)."""


def request_json(url: str, body: dict[str, Any], *, headers: dict[str, str], timeout: float) -> Any:
    """POST ``body`` and return the decoded JSON answer, the whole exchange bounded by ``timeout`` seconds.

    The request runs in a helper thread; at the deadline its connection is closed and :class:`RetryableHTTPError`
    is raised (so a server trickling bytes cannot hold the run). Raises :class:`MalformedAnswer` for a body that is
    not JSON and ``_HTTPStatusError`` for a non-retryable status.
    """
    import httpx

    client = httpx.Client(timeout=httpx.Timeout(timeout))
    box: dict[str, Any] = {}

    def call() -> None:
        try:
            response = client.post(url, json=body, headers=headers)
            box["status"], box["content"] = response.status_code, response.content
        except Exception as error:  # noqa: BLE001 - handed to the caller below
            box["error"] = error

    worker = threading.Thread(target=call, daemon=True, name="much-openai-request")
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        client.close()  # aborts the transfer; the helper thread ends with an error nobody reads
        raise RetryableHTTPError(f"no complete answer within --timeout {timeout:g} s")
    client.close()
    if "error" in box:
        error = box["error"]
        if isinstance(error, httpx.TransportError):
            raise RetryableHTTPError(f"{type(error).__name__}: {error}") from error
        raise error
    status, content = box["status"], box["content"]
    if status >= 500 or status in _RETRY_STATUS:
        raise RetryableHTTPError(f"HTTP {status} from {url}: {content[:200]!r}")
    if status >= 400:
        raise _HTTPStatusError(f"HTTP {status} from {url}: {content[:200]!r}")
    try:
        return json.loads(content)
    except ValueError as error:
        raise MalformedAnswer(f"the answer is not JSON ({error})") from None


def _token_id(entry: Any) -> int:
    token = entry.get("token") if isinstance(entry, dict) else None
    match = _TOKEN_ID.match(token) if isinstance(token, str) else None
    if match is None:
        raise MalformedAnswer(f"token {token!r} is not 'token_id:N': the server must honour "
                              "return_tokens_as_token_ids (vLLM and SGLang do)")
    return int(match.group(1))


def _logprob(entry: dict[str, Any]) -> float:
    value = entry.get("logprob")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise MalformedAnswer(f"logprob {value!r} is not a number")
    return float(value)


def parse_answer(answer: Any) -> EngineResult:
    """The :class:`EngineResult` of a chat-completion JSON answer (``output`` = the server's text; the engine
    replaces it with the decoded tokens). Raises :class:`MalformedAnswer` for a missing or mistyped field; the
    values themselves (NaN, > 1, ids) are checked on the row."""
    try:
        choice = answer["choices"][0]
        content = (choice.get("logprobs") or {}).get("content")
        finish = choice.get("finish_reason")
    except (KeyError, IndexError, TypeError, AttributeError) as error:
        raise MalformedAnswer(f"not a chat completion ({type(error).__name__}: {error})") from None
    if not isinstance(content, list) or not content:
        raise MalformedAnswer("the answer has no logprobs")
    if finish not in ("stop", "length"):
        raise MalformedAnswer(f"finish_reason {finish!r}: neither 'stop' (an EOS) nor 'length' (max_tokens)")
    tokens, ids, probs = [], [], []
    for entry in content:
        token = _token_id(entry)
        top = entry.get("top_logprobs")
        if not isinstance(top, list):
            raise MalformedAnswer(f"top_logprobs {top!r} is not a list")
        try:
            row_ids, row_probs = candidates_row(token, _logprob(entry), [(_token_id(c), _logprob(c)) for c in top])
        except MalformedAnswer:
            raise
        except ValueError as error:
            raise MalformedAnswer(str(error)) from None
        tokens.append(token)
        ids.append(row_ids)
        probs.append(row_probs)
    message = choice.get("message") or {}
    return EngineResult(tokens=tokens, ids=ids, probs=probs, output=message.get("content") or "",
                        finished=finish == "stop")


def _retryable(error: BaseException) -> bool:
    return isinstance(error, RetryableHTTPError | MalformedAnswer)


def openai_generate(call: Callable[[], Any], *, max_attempts: int = 5, backoff: float = 2.0,
                    max_backoff: float = 60.0, sleep: Callable[[float], None] = time.sleep) -> EngineResult:
    """``parse_answer(call())``, retried on transport errors, 408/429/5xx and malformed answers only.

    Raises :class:`OpenAIGenerationFailed` (after ``max_attempts``, or at once for any other error).
    """
    if max_attempts < 1:
        raise ValueError(f"max_attempts must be >= 1, got {max_attempts}")
    reason = "no attempt"
    for attempt in range(1, max_attempts + 1):
        try:
            return parse_answer(call())
        except Exception as error:  # noqa: BLE001 -- classified just below
            if not _retryable(error):
                raise OpenAIGenerationFailed(f"{type(error).__name__}: {error}") from error
            reason = f"{type(error).__name__}: {error}"
        if attempt < max_attempts:
            sleep(min(max_backoff, backoff * 2 ** (attempt - 1)))
    raise OpenAIGenerationFailed(f"no valid answer after {max_attempts} attempts; last: {reason}")


def bounded_map(work: Callable[[Any], Any], items: Sequence[Any], *, workers: int) -> Iterator[tuple[Any, Any]]:
    """Yield ``(item, result_or_exception)`` as they finish, at most ``workers`` calls in flight."""
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    with ThreadPoolExecutor(max_workers=workers) as pool:
        pending = {}
        iterator = iter(items)
        for item in iterator:
            pending[pool.submit(work, item)] = item
            if len(pending) >= workers:
                break
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                item = pending.pop(future)
                error = future.exception()
                yield item, (error if error is not None else future.result())
                nxt = next(iterator, None)
                if nxt is not None:
                    pending[pool.submit(work, nxt)] = nxt


def _tokenizer(source: str) -> Any:
    from much_metric.models import load_tokenizer

    try:
        return load_tokenizer(source)
    except Exception as error:  # noqa: BLE001 - any loading failure is the same user error
        raise BuilderError(f"cannot load the tokenizer {source!r} ({type(error).__name__}: {error}); pass "
                           "--tokenizer (folder, hub id, .gguf or tokenizer.json of the served model): the output "
                           "text is decoded from the token ids, EOS included, as the hf engine writes it") from None


def check_server_scale(settings: SamplingSettings, server_logit_scale: float) -> None:
    """Refuse a server whose raw log-probabilities are not ``softmax(logits / T)`` (BuilderError with the fix)."""
    if not math.isclose(server_logit_scale, settings.logit_scale, rel_tol=1e-6):
        scale = settings.logit_scale
        raise BuilderError(
            f"--temperature {settings.temperature:g} with --engine openai needs a server that returns "
            f"softmax(logits / {settings.temperature:g}): start it with --hf-overrides '{{\"logit_scale\": "
            f"{scale!r}}}' and pass --server-logit-scale {scale!r} (it was declared {server_logit_scale!r}); "
            "docs/generation.md")


def reported_dtype(base_url: str, model: str, *, headers: dict[str, str], timeout: float = 10.0) -> str | None:
    """The dtype the server reports for ``model`` (the ``dtype`` field of its card on ``GET {base_url}/models``;
    a single card is taken as the served model's), or None when it reports none, an unknown name ("auto"), or does
    not answer. vLLM's cards carry no dtype: there the maintainer's ``--dtype`` is the only source."""
    import httpx

    try:
        response = httpx.get(base_url.rstrip("/") + "/models", headers=headers, timeout=timeout)
        cards = response.json().get("data") if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError, AttributeError):
        return None
    if not isinstance(cards, list):
        return None
    cards = [c for c in cards if isinstance(c, dict)]
    card = next((c for c in cards if c.get("id") == model), cards[0] if len(cards) == 1 else None)
    name = str((card or {}).get("dtype") or "").removeprefix("torch.")
    return name if name in DTYPES else None


def server_dtype(options: EngineOptions) -> tuple[str | None, str]:
    """The dtype the server computes in, as far as it can be established, and how it was: the server's report and
    the maintainer's ``--dtype`` (``options.dtype``) must agree (:class:`BuilderError` otherwise); either alone is
    taken; with neither the rows record ``dtype: null``, which the caller must say (``verify`` then re-forwards in
    the device default and a server in another dtype fails every row)."""
    if not options.base_url:
        raise BuilderError("--engine openai needs --base-url (e.g. http://127.0.0.1:8000/v1)")
    headers = {"Authorization": f"Bearer {os.environ.get(options.api_key_env) or 'EMPTY'}"}
    reported = reported_dtype(options.base_url, options.model, headers=headers,
                              timeout=min(options.timeout, 30.0))
    declared = options.dtype
    if declared and reported and declared != reported:
        raise BuilderError(f"--dtype {declared} declares the server's dtype, but the server at {options.base_url} "
                           f"reports {reported}: start it with --dtype {declared} or pass --dtype {reported}")
    if declared:
        return declared, "declared by --dtype, confirmed by the server" if reported else \
            "declared by --dtype; the server does not report its dtype"
    if reported:
        return reported, "reported by the server"
    return None, "NOT KNOWN"


class OpenAIEngine:
    """Concurrent chat completions (``options.workers`` in flight) against ``options.base_url``."""

    name = "openai"

    def __init__(self, config: GenerationConfig, settings: SamplingSettings, options: EngineOptions) -> None:
        if not options.base_url:
            raise BuilderError("--engine openai needs --base-url (e.g. http://127.0.0.1:8000/v1)")
        if not (options.timeout > 0 and math.isfinite(options.timeout)):
            raise BuilderError(f"--timeout must be a positive number of seconds, got {options.timeout}")
        if not (options.backoff >= 0 and math.isfinite(options.backoff)):
            raise BuilderError(f"--backoff must be a finite number of seconds >= 0, got {options.backoff}")
        check_server_scale(settings, options.server_logit_scale)
        self.config, self.settings, self.options = config, settings, options
        self.tokenizer = _tokenizer(options.tokenizer or options.model)
        self.version = f"openai-compatible@{options.base_url}"
        self.dtype = options.dtype  # the server's, as far as server_dtype established it (None: not known)
        self.info = EngineInfo("openai", self.version, settings.to_record(), dtype=self.dtype)
        eos_ids, special_ids = stop_tokens(self.tokenizer)
        self.limits = RowLimits(vocab_size=len(self.tokenizer), max_new_tokens=config.max_new_tokens,
                                top_k=settings.top_k, top_p=settings.top_p, eos_ids=eos_ids, special_ids=special_ids)
        self.url = options.base_url.rstrip("/") + "/chat/completions"
        self.headers = {"Authorization": f"Bearer {os.environ.get(options.api_key_env) or 'EMPTY'}"}

    def _one(self, question: dict[str, Any]) -> dict[str, Any]:
        from builder._llm import chat_messages

        body = {"model": self.options.model, "messages": chat_messages(question[schema.PROMPT],
                                                                       brief=self.config.brief),
                **self.settings.openai_body()}
        result = openai_generate(
            lambda: request_json(self.url, body, headers=self.headers, timeout=self.options.timeout),
            max_attempts=self.options.max_attempts, backoff=self.options.backoff)
        # validated before decoding: an id outside the vocabulary is reported as such, not as a decoder error
        check_row(make_record(self.config, question, result, engine=self.info), self.limits)
        text = self.tokenizer.decode(result.tokens, skip_special_tokens=False)
        result = EngineResult(tokens=result.tokens, ids=result.ids, probs=result.probs, output=text,
                              finished=result.finished)
        return make_record(self.config, question, result, engine=self.info)

    def generate(self, questions: Sequence[dict[str, Any]]) -> Iterator[tuple[dict[str, Any], Any]]:
        yield from bounded_map(self._one, questions, workers=self.options.workers)
