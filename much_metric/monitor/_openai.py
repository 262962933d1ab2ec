"""An OpenAI-compatible streaming endpoint (vLLM, llama.cpp server, OpenAI) as a token source of the monitor.

Request ``stream=True, logprobs=True, top_logprobs=20``; every chunk's ``choices[0].logprobs.content`` lists the new
tokens, each with its ``logprob``, its ``bytes`` and its ``top_logprobs`` alternatives.

What 20 alternatives instead of MUCH's 24 change
------------------------------------------------
* At most 20 candidates per token (the APIs' cap): :class:`ClaimMonitor` is built with ``top_k=20``, and a method
  needing more is refused up front -- ``token_entropy_24`` is impossible, Token Entropy needs ``delta <= 20``
  (``token_entropy_20`` renormalises over 20, so its values are not MUCH's ``token_entropy_24``).
* Token Likelihood and Max Likelihood need only the sampled and the top-1 probability: they equal the 24-candidate
  values (up to the float rounding of a logprob round trip). A sampled token outside the 20 is appended to its row
  with its own logprob, as the builder extends a row.
* Probabilities are ``exp(logprob)`` as the server computes them: MUCH's are temperature-scaled over the full
  vocabulary before top-k/top-p (docs/reference-behaviour.md#captured-distribution). vLLM reports raw-model logprobs by
  default, so at temperature 1 they
  agree; other servers may report the post-warping distribution (then only top-k/top-p'd candidates are non-zero).
* The EOS token: vLLM (``vllm serve`` 0.32, checked against the real server by tests/builder/test_vllm_engine.py)
  streams it as the last token of a finished answer (``finish_reason`` ``stop``), with its logprobs and its literal
  text (``<|im_end|>``) as ``token``/``bytes`` -- special tokens map to their ids by that text, so the last claim is
  MUCH's EOS claim (``eos=True``, never flagged), as in the dataset. Servers that do not stream it end the answer
  without it: the last claim is then a content claim (as for Mu-SHROOM outputs) and the 0.3.0 final-punctuation
  merge may apply to it.
* More than 20 alternatives: the OpenAI API caps ``top_logprobs`` at 20; vLLM accepts up to its ``--max-logprobs``.
  For MUCH's 24 candidates (``token_entropy_24``) ask vLLM for 25 (``vllm serve ... --max-logprobs 25``,
  ``much monitor --top-logprobs 25``): ``vllm serve`` 0.32 lists the sampled token first and cuts the list at
  ``top_logprobs``, so with 24 a sampled token ranked below 24 takes the place of the 24th candidate. Each row keeps
  the ``monitor.top_k`` most probable alternatives received (then the sampled token when it is not among them).

Token strings to ids: :mod:`much_metric.monitor._token_ids`.

Incomplete answers
------------------
An answer is complete when its choice carries a ``finish_reason`` (``stop``, ``length`` ...) and, read by
:func:`stream_chat_completion`, when the stream ends with ``data: [DONE]``. A stream that ends before (the server or
the connection died half-way), one without any token, or a non-streaming ``chat.completion`` answer raises
:class:`IncompleteStreamError`; the claims yielded before it stay valid, but the answer is not complete. The
``timeout`` of :func:`stream_chat_completion` is one deadline for the whole answer: keep-alive comments
(``: ping`` lines) do not extend it.
"""

from __future__ import annotations

import contextlib
import json
import math
import socket
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any

from much_metric.monitor._token_ids import TOKEN_ID_PATTERN, cached_token_table, token_bytes_table, token_to_id

__all__ = ["IncompleteStreamError", "token_bytes_table", "token_to_id", "claims_from_stream",
           "stream_chat_completion"]

class IncompleteStreamError(ValueError):
    """The stream did not deliver a complete answer: cut half-way, empty, not a stream, or past its deadline."""


def _as_dict(chunk: Any) -> dict[str, Any]:
    if isinstance(chunk, dict):
        return chunk
    if hasattr(chunk, "model_dump"):  # the openai package's ChatCompletionChunk
        return chunk.model_dump()
    raise TypeError(f"stream chunks must be dicts or openai ChatCompletionChunk objects, got {type(chunk).__name__}")


def claims_from_stream(monitor, chunks: Iterable[Any]) -> Iterator[Any]:
    """Feed the tokens of a streamed chat completion to ``monitor``; yield each claim as soon as it is final.

    ``chunks``: dicts (parsed ``data:`` lines) or openai ``ChatCompletionChunk`` objects of ONE choice. Each
    token's row: the ``top_logprobs`` alternatives sorted by decreasing probability, at most ``monitor.top_k``,
    extended with the sampled token when it is not among them.
    """
    table = cached_token_table(monitor.tokenizer)
    vocabulary = _vocabulary_size(monitor.tokenizer)
    monitor.reset()
    position = 0
    finish_reason = None
    for number, raw_chunk in enumerate(chunks):
        chunk = _as_dict(raw_chunk)
        if chunk.get("error"):
            raise ValueError(f"stream chunk {number}: the server sent an error: {chunk['error']}")
        if chunk.get("object") == "chat.completion" or any("message" in c for c in chunk.get("choices") or []):
            raise IncompleteStreamError(f"stream chunk {number}: the server's answer is not a stream (a "
                                        "chat.completion with a message, not chat.completion.chunk deltas): request "
                                        "stream=True from a server that supports it")
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) != 0:
                raise ValueError(f"stream chunk {number}: choice {choice.get('index')}; monitor one choice (n=1)")
            finish_reason = choice.get("finish_reason") or finish_reason
            content = (choice.get("logprobs") or {}).get("content") or []
            if not content and (choice.get("delta") or {}).get("content"):
                raise ValueError(f"stream chunk {number}: text without logprobs; request logprobs=true and "
                                 "top_logprobs (the server must support them)")
            for entry in content:
                token_id = token_to_id(entry, table)
                if token_id is None and not entry.get("token") and not entry.get("bytes"):
                    raise ValueError(f"stream chunk {number}, token {position}: the server sent the token without "
                                     "text or bytes (a piece of a UTF-8 character split over several tokens), so "
                                     "its id is unknown: request token ids (return_tokens_as_token_ids=True for "
                                     "vLLM/SGLang; much monitor --base-url does unless --no-token-ids)")
                if token_id is None:
                    raise ValueError(f"stream chunk {number}, token {position} ({entry.get('token')!r}): no id of "
                                     "the tokenizer spells these bytes; is it the served model's tokenizer?")
                where = f"stream chunk {number}, token {position} ({entry.get('token')!r})"
                _check_logprob(entry, where)
                _check_id(token_id, vocabulary, where, "sampled token")
                if not isinstance(entry.get("top_logprobs"), list):
                    raise ValueError(f"{where}: top_logprobs is {entry.get('top_logprobs')!r}, not a list of "
                                     "alternatives: request logprobs=true and top_logprobs (a list, [] for none)")
                for alternative in entry["top_logprobs"]:
                    _check_logprob(alternative, where)
                alternatives = sorted(entry["top_logprobs"], key=lambda e: -float(e["logprob"]))
                ids, probs = [], []
                for alternative in alternatives[: monitor.top_k]:
                    alt_id = token_to_id(alternative, table)
                    if alt_id is not None:
                        _check_id(alt_id, vocabulary, where, f"alternative {alternative.get('token')!r}")
                        if alt_id in ids and TOKEN_ID_PATTERN.fullmatch(str(alternative.get("token"))):
                            raise ValueError(f"{where}: the alternative id {alt_id} is listed twice: a candidate row "
                                             "holds each id once (the server's answer is malformed)")
                        if alt_id in ids:  # two pieces spelling the same bytes: the table maps both to one id
                            continue
                    ids.append(-1 if alt_id is None else alt_id)
                    probs.append(math.exp(float(alternative["logprob"])))
                if token_id not in ids:
                    ids.append(token_id)
                    probs.append(math.exp(float(entry["logprob"])))
                position += 1
                yield from monitor.push(token_id, ids, probs)
    if not position:
        raise IncompleteStreamError("the stream held no token: the server sent no generated token with logprobs "
                                    "(an empty answer cannot be monitored)")
    if finish_reason is None:
        raise IncompleteStreamError(f"the stream ended without a finish_reason after {position} tokens: the server "
                                    "or the connection stopped half-way and the answer is incomplete (the claims "
                                    "yielded so far are valid; monitor.finish() closes the rest)")
    yield from monitor.finish()


def _vocabulary_size(tokenizer: Any) -> int | None:
    """The number of ids of ``tokenizer`` (added tokens included), or None when it does not say."""
    try:
        return int(len(tokenizer))
    except TypeError:
        size = getattr(tokenizer, "vocab_size", None)
        return int(size) if isinstance(size, int) else None


def _check_id(token_id: int, vocabulary: int | None, where: str, what: str) -> None:
    """An id is an integer in ``[0, vocabulary)``: the same rule as the dataset's rows."""
    if token_id < 0 or (vocabulary is not None and token_id >= vocabulary):
        raise ValueError(f"{where}: {what} id {token_id} is outside the tokenizer's vocabulary (0 to "
                         f"{vocabulary - 1 if vocabulary else '?'}): is it the served model's tokenizer?")


def _check_logprob(entry: dict[str, Any], where: str) -> None:
    """A log-probability is <= 0 (up to the rounding tolerance of the stored probabilities); NaN is refused."""
    from much_dataset.validation import PROBABILITY_SUM_TOLERANCE

    value = float(entry["logprob"])
    if not value <= math.log1p(PROBABILITY_SUM_TOLERANCE):
        raise ValueError(f"{where}: log-probability {value!r} of {entry.get('token')!r} is not a log-probability "
                         f"(probability {math.exp(value) if value == value else value} > 1; log-probabilities are "
                         "<= 0): is the server sending logits or scores?")


def stream_chat_completion(base_url: str, model: str, messages: list[dict[str, str]], *, api_key: str | None = None,
                           top_logprobs: int = 20, timeout: float = 60.0, **options: Any) -> Iterator[dict[str, Any]]:
    """POST ``{base_url}/chat/completions`` with ``stream=True, logprobs=True``; yield the parsed chunks.

    Standard library only (``http.client``); ``options`` (``max_tokens``, ``temperature``, ``seed``,
    ``return_tokens_as_token_ids`` for vLLM/SGLang ...) go into the request body. ``top_logprobs`` above 20 only
    for servers that allow it (``vllm serve --max-logprobs 25``). Pass the chunks to :meth:`ClaimMonitor.stream_openai`.

    ``timeout`` (seconds) is one deadline for the whole request, from connecting to ``data: [DONE]``: a server that
    dribbles its answer byte by byte or sends keep-alive comments is cut at it (a watchdog shuts the socket down).

    Raises
    ------
    IncompleteStreamError
        The stream ended without ``data: [DONE]`` (the connection closed, even mid-chunk), the answer is not a stream,
        the bytes are not UTF-8, more than ``max_tokens`` tokens came, or the deadline passed.
    ConnectionError
        The server cannot be reached or answered an HTTP error; the message names the server and the status.
    """
    if isinstance(top_logprobs, bool) or not isinstance(top_logprobs, int) or top_logprobs < 0:
        raise ValueError(f"top_logprobs must be a non-negative integer (the OpenAI API allows at most 20, vLLM up "
                         f"to its --max-logprobs), got {top_logprobs!r}")
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout < math.inf:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    body = {"model": model, "messages": messages, "stream": True, "logprobs": True,
            "top_logprobs": int(top_logprobs), **options}
    headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    max_tokens = options.get("max_tokens", options.get("max_completion_tokens"))
    with _Connection(base_url, timeout) as connection:
        response = connection.post("/chat/completions", json.dumps(body).encode(), headers)
        yield from _read_events(connection, response, max_tokens)


class _Connection:
    """One HTTP(S) request to ``base_url`` under one deadline: a watchdog timer shuts the socket down when it passes,
    so no read (headers included) can outlive it; every failure names the server."""

    def __init__(self, base_url: str, timeout: float) -> None:
        import urllib.parse

        self.base_url, self.timeout = base_url, timeout
        self.url = urllib.parse.urlsplit(base_url)
        if self.url.scheme not in ("http", "https") or not self.url.hostname:
            raise ValueError(f"base_url must be an http(s) URL such as http://127.0.0.1:8000/v1, got {base_url!r}")
        self.deadline = time.monotonic() + timeout
        self.expired = threading.Event()
        self._connection: Any = None
        self._timer: threading.Timer | None = None

    def __enter__(self) -> _Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self._connection is not None:
            self._connection.close()

    def _expire(self) -> None:
        self.expired.set()
        sock = getattr(self._connection, "sock", None)
        with contextlib.suppress(OSError):
            if sock is not None:
                sock.shutdown(socket.SHUT_RDWR)

    def late(self, tokens: int) -> IncompleteStreamError:
        return IncompleteStreamError(f"no complete answer from {self.base_url} within the {self.timeout:g}s deadline "
                                     f"({tokens} tokens received; keep-alive comments and slow bytes do not extend "
                                     "it): raise timeout= or check the server")

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def post(self, path: str, payload: bytes, headers: dict[str, str]) -> Any:
        import http.client

        kind = http.client.HTTPSConnection if self.url.scheme == "https" else http.client.HTTPConnection
        self._connection = kind(self.url.hostname, self.url.port, timeout=max(self.remaining(), 1e-3))
        self._timer = threading.Timer(max(self.remaining(), 0.0), self._expire)
        self._timer.daemon = True
        try:
            self._connection.connect()
            self._timer.start()
            self._connection.request("POST", self.url.path.rstrip("/") + path, body=payload, headers=headers)
            response = self._connection.getresponse()
        except (OSError, http.client.HTTPException) as error:
            if self.expired.is_set() or isinstance(error, TimeoutError):
                raise self.late(0) from None
            reason = "connection refused: is the server running?" if isinstance(error, ConnectionRefusedError) \
                else f"{type(error).__name__}: {error}"
            raise ConnectionError(f"cannot reach the server {self.base_url} ({self.url.hostname}:"
                                  f"{self.url.port or (443 if self.url.scheme == 'https' else 80)}): {reason}") \
                from None
        if response.status != 200:
            try:
                text = response.read(2000).decode("utf-8", errors="replace")
            except (OSError, http.client.HTTPException):
                text = ""
            hint = {401: " (check the API key; much monitor reads it from the variable --api-key-env names)",
                    403: " (check the API key)",
                    404: " (check the base URL, usually ending with /v1, and the model name)"}.get(response.status, "")
            detail = " ".join(text.split())[:200]
            raise ConnectionError(f"the server {self.base_url} answered HTTP {response.status} {response.reason}"
                                  f"{hint}" + (f": {detail}" if detail else ""))
        return response


def _read_events(connection: _Connection, response: Any, max_tokens: Any) -> Iterator[dict[str, Any]]:
    """The ``data:`` events of ``response`` as parsed chunks, under the connection's deadline (module docstring)."""
    import http.client

    base_url = connection.base_url
    tokens = 0
    other: list[str] = []  # non-SSE lines: a plain JSON answer when the server ignored stream=True
    buffer = b""
    while True:
        if connection.remaining() <= 0 or connection.expired.is_set():
            raise connection.late(tokens)
        try:
            block = response.read1(65536)
        except (OSError, http.client.HTTPException) as error:
            if connection.expired.is_set() or isinstance(error, TimeoutError):
                raise connection.late(tokens) from None
            raise IncompleteStreamError(f"the connection to {base_url} broke after {tokens} tokens "
                                        f"({type(error).__name__}: {error}): the answer is incomplete") from None
        if not block:
            if connection.expired.is_set():
                raise connection.late(tokens)
            lines, buffer = ([buffer] if buffer else []), b""
        else:
            buffer += block
            *lines, buffer = buffer.split(b"\n")
        for raw in lines:
            try:
                line = raw.decode("utf-8").strip()
            except UnicodeDecodeError as error:
                raise IncompleteStreamError(f"the stream from {base_url} sent bytes that are not UTF-8 after {tokens} "
                                            f"tokens ({error.reason} at byte {error.start} of a line): an event "
                                            "stream of JSON is UTF-8; the server or the connection is broken") from None
            if not line.startswith("data:"):
                if line and not line.startswith(":") and len(other) < 1000:
                    other.append(line)
                continue
            data = line[len("data:"):].strip()
            if data == "[DONE]":
                return
            try:
                chunk = json.loads(data)
            except ValueError:
                raise IncompleteStreamError(f"the stream from {base_url} sent an event that is not JSON after "
                                            f"{tokens} tokens: {data[:80]!r}") from None
            choices = chunk.get("choices") if isinstance(chunk, dict) else None
            for choice in choices if isinstance(choices, list) else []:
                tokens += len(((choice or {}).get("logprobs") or {}).get("content") or [])
            if isinstance(max_tokens, int) and tokens > max_tokens:
                raise IncompleteStreamError(f"the stream from {base_url} sent {tokens} tokens, more than the "
                                            f"max_tokens={max_tokens} requested: the server ignores the request")
            yield chunk
        if not block:
            break
    if other:
        try:
            answer = json.loads("\n".join(other))
        except ValueError:
            answer = None
        if isinstance(answer, dict):
            yield answer  # claims_from_stream names a chat.completion or an error
    held = f"after {tokens} tokens" if tokens else "with no token"
    raise IncompleteStreamError(f"the stream from {base_url} ended without data: [DONE] {held}: the server or the "
                                "connection stopped half-way and the answer is incomplete")
