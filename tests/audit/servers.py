"""Misbehaving OpenAI-compatible servers on 127.0.0.1 for ``tests/audit/audit_bad_inputs.py``.

The answer itself is the deterministic one of ``tests/builder/fake_generation_server.answer`` (``token_id:N`` tokens,
the sampled token first in ``top_logprobs``); a *mode* then spoils it the way issue #31 describes. One server serves
both a plain ``chat.completion`` (``builder generate --engine openai``) and an SSE stream (``much monitor
--base-url``), whichever the request asks for.
"""

from __future__ import annotations

import json
import math
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: the modes a case can name
MODES = ("ok", "nan", "prob_gt1", "sum_gt1", "oov", "dup_ids", "too_many_tokens", "null_top_logprobs", "non_utf8",
         "drip", "http500", "http401", "http404", "closed_mid_chunk", "non_streamed",
         # rows no sampler of the request produces (issue #44): tests/builder/fake_generation_server's behaviours
         "outside_top_k", "outside_top_p", "stop_without_eos", "eos_in_middle")
_SAMPLER_MODES = MODES[-4:]
_BAD_BYTES_MARK = "@@NOT-UTF8@@"


def _answer(body: dict[str, Any], mode: str) -> tuple[list[int], list[Any], str]:
    """The fake server's answer to ``body`` (sampled as the request asks), with a sampler ``mode``'s tokens."""
    from tests.builder.fake_generation_server import answer, misplace_tokens

    tokens, logprobs, finish = answer(str(body["messages"][-1]["content"]), int(body.get("top_logprobs") or 5),
                                      max_tokens=10_000, top_k=int(body.get("top_k", -1)),
                                      top_p=float(body.get("top_p", 1.0)))
    if mode in _SAMPLER_MODES:
        tokens, finish = misplace_tokens(tokens, logprobs, finish, mode)
    return tokens, logprobs, finish


def _entries(body: dict[str, Any], mode: str) -> tuple[list[dict[str, Any]], str]:
    """The answer's ``logprobs.content`` entries, spoiled by ``mode``, and its finish_reason."""
    top = int(body.get("top_logprobs") or 5)
    max_tokens = int(body.get("max_tokens") or 16)
    tokens, logprobs, finish = _answer(body, mode)
    if mode == "too_many_tokens":  # ignore max_tokens: three times as many tokens as asked
        while len(tokens) < 3 * max_tokens + 3:
            tokens, logprobs = tokens + tokens, logprobs + logprobs
        tokens, logprobs, finish = tokens[: 3 * max_tokens + 3], logprobs[: 3 * max_tokens + 3], "length"
    elif len(tokens) > max_tokens:
        tokens, logprobs, finish = tokens[:max_tokens], logprobs[:max_tokens], "length"
    entries = []
    for token, lp in zip(tokens, logprobs, strict=True):
        order = sorted(range(len(lp)), key=lambda i: -lp[i])[:top]
        order = [token, *(i for i in order if i != token)][:top]
        entries.append({"token": f"token_id:{token}", "logprob": float(lp[token]), "bytes": None,
                        "top_logprobs": [{"token": f"token_id:{i}", "logprob": float(lp[i]), "bytes": None}
                                         for i in order]})
    spoiled = entries[min(1, len(entries) - 1)]
    if mode == "nan":
        spoiled["logprob"] = math.nan
        spoiled["top_logprobs"][0]["logprob"] = math.nan
    elif mode == "prob_gt1":
        spoiled["logprob"] = 1.0  # probability e
        spoiled["top_logprobs"][0]["logprob"] = 1.0
    elif mode == "sum_gt1":
        for alternative in spoiled["top_logprobs"]:
            alternative["logprob"] = math.log(0.6)  # each valid, together far above 1
        spoiled["logprob"] = math.log(0.6)
    elif mode == "oov":
        spoiled["token"] = "token_id:999999"
        spoiled["top_logprobs"][0]["token"] = "token_id:999999"
    elif mode == "dup_ids":
        spoiled["top_logprobs"][1] = dict(spoiled["top_logprobs"][0])
    elif mode == "null_top_logprobs":
        spoiled["top_logprobs"] = None
    return entries, finish


def _text(entry: dict[str, Any], position: int, mode: str) -> str:
    """The text of one token; ``non_utf8``: bytes that are not UTF-8 in the second token's text."""
    return _BAD_BYTES_MARK if mode == "non_utf8" and position == 1 else f" w{entry['token'].rsplit(':', 1)[-1]}"


def _encode(obj: Any) -> bytes:
    return json.dumps(obj).encode("utf-8").replace(_BAD_BYTES_MARK.encode(), b"\xff\xfe\xc3(")


def _completion(body: dict[str, Any], mode: str) -> bytes:
    entries, finish = _entries(body, mode)
    text = "".join(_text(e, position, mode) for position, e in enumerate(entries))
    choice = {"index": 0, "finish_reason": finish, "message": {"role": "assistant", "content": text},
              "logprobs": {"content": entries}}
    return _encode({"id": "chatcmpl-audit", "object": "chat.completion", "created": 0,
                    "model": body.get("model", "m"), "choices": [choice],
                    "usage": {"prompt_tokens": 10, "completion_tokens": len(entries),
                              "total_tokens": 10 + len(entries)}})


def _stream(body: dict[str, Any], mode: str) -> bytes:
    entries, finish = _entries(body, mode)
    parts = []
    for position, entry in enumerate(entries):
        last = position == len(entries) - 1
        chunk = {"id": "chatcmpl-audit", "object": "chat.completion.chunk", "created": 0,
                 "model": body.get("model", "m"),
                 "choices": [{"index": 0, "delta": {"content": _text(entry, position, mode)},
                              "logprobs": {"content": [entry]},
                              "finish_reason": finish if last else None}]}
        parts.append(b"data: " + _encode(chunk) + b"\n\n")
    parts.append(b"data: [DONE]\n\n")
    return b"".join(parts)


class MisbehavingServer:
    """``/v1/chat/completions`` on 127.0.0.1:<free port>, answering as ``mode`` says; a ``with`` block runs it."""

    def __init__(self, mode: str) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown server mode {mode!r}; one of {MODES}")
        self.mode = mode
        self.requests = 0
        self._stop = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 -- http.server's naming
                self._status(404, "not found")

            def _status(self, code: int, message: str) -> None:
                data = json.dumps({"error": {"message": message, "type": "audit", "code": code}}).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:  # noqa: N802
                outer.requests += 1
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except ValueError:
                    body = {}
                mode = outer.mode
                if mode in ("http500", "http401", "http404"):
                    self._status(int(mode[4:]), {"http500": "internal error", "http401": "invalid api key",
                                                 "http404": "no such model"}[mode])
                    return
                streamed = bool(body.get("stream")) and mode != "non_streamed"
                payload = _stream(body, mode) if streamed else _completion(body, mode)
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream" if streamed else "application/json")
                if mode == "closed_mid_chunk":
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    half = payload[: len(payload) // 2]
                    self.wfile.write(f"{len(payload):x}\r\n".encode() + half)  # promises more than it sends
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if mode == "drip":  # one byte every 0.5 s
                    for index in range(len(payload)):
                        if outer._stop.is_set():
                            return
                        try:
                            self.wfile.write(payload[index:index + 1])
                            self.wfile.flush()
                        except OSError:
                            return
                        time.sleep(0.5)
                    return
                self.wfile.write(payload)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)

    def __enter__(self) -> MisbehavingServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
