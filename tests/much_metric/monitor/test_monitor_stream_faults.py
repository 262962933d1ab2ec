"""Faulty OpenAI-compatible streams: a server that stops half-way, sends nothing, answers without streaming or only
sends keep-alive comments must give a clear error, never claims that look like a complete answer."""

from __future__ import annotations

import functools
import json
import math
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

TEXT = "Victor Hugo wrote Les Misérables. It was published in 1862."


@functools.cache
def _tokenizer():
    from much_metric.models import load_tokenizer

    return load_tokenizer("smollm2")


def _chunk(token_id: int, *, finish: str | None = None, logprob: float = math.log(0.9)) -> dict:
    entry = {"token": f"token_id:{token_id}", "logprob": logprob,
             "top_logprobs": [{"token": f"token_id:{token_id}", "logprob": logprob}]}
    return {"object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": {"content": "x"}, "logprobs": {"content": [entry]},
                         "finish_reason": finish}]}


def _final() -> dict:
    return {"object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": "stop"}]}


def _events(chunks: list[dict], *, done: bool = True) -> bytes:
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + ("data: [DONE]\n\n" if done else "")
    return body.encode()


class _RawServer:
    """127.0.0.1 server whose POST answer is written by ``write(handler)`` (headers included)."""

    def __init__(self, write) -> None:
        self.stop = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def do_POST(self) -> None:  # noqa: N802 -- http.server's naming
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    write(self, outer.stop)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def log_message(self, *args) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)


def _send(handler, payload: bytes, content_type: str = "text/event-stream") -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", content_type)
    handler.end_headers()
    handler.wfile.write(payload)
    handler.wfile.flush()


def _monitor():
    from much_metric.monitor import ClaimMonitor

    return ClaimMonitor(_tokenizer(), "max_likelihood", top_k=20)


def _stream(server, **options):
    from much_metric.monitor._openai import stream_chat_completion

    return stream_chat_completion(server.base_url, "m", [{"role": "user", "content": "q"}], **options)


def _ids() -> list[int]:
    return list(_tokenizer().encode(TEXT, add_special_tokens=False))


def test_a_complete_stream_still_gives_every_claim():
    ids = _ids()
    payload = _events([_chunk(t) for t in ids] + [_final()])
    with _RawServer(lambda h, stop: _send(h, payload)) as server:
        monitor = _monitor()
        claims = list(monitor.stream_openai(_stream(server)))
    assert monitor.token_ids == ids
    assert "".join(c.text for c in claims) == _tokenizer().decode(ids)


def test_a_stream_closed_half_way_is_an_error_not_a_complete_answer():
    from much_metric.monitor import IncompleteStreamError

    ids = _ids()
    payload = _events([_chunk(t) for t in ids[:6]], done=False)  # the server dies: no finish chunk, no [DONE]
    with _RawServer(lambda h, stop: _send(h, payload)) as server:
        with pytest.raises(IncompleteStreamError, match=r"without data: \[DONE\].*6 tokens"):
            list(_monitor().stream_openai(_stream(server)))


def test_chunks_without_a_finish_reason_are_incomplete():
    # The same truncation seen through any client (the openai package ends its iterator silently).
    from much_metric.monitor import IncompleteStreamError

    chunks = [_chunk(t) for t in _ids()[:6]]
    with pytest.raises(IncompleteStreamError, match="finish_reason.*6 tokens"):
        list(_monitor().stream_openai(chunks))


@pytest.mark.parametrize("payload", [b"", b"data: [DONE]\n\n", _events([_final()])])
def test_an_empty_stream_is_an_error(payload):
    from much_metric.monitor import IncompleteStreamError

    with _RawServer(lambda h, stop: _send(h, payload)) as server:
        with pytest.raises(IncompleteStreamError, match="no token"):
            list(_monitor().stream_openai(_stream(server)))


def test_a_non_streaming_answer_is_an_error():
    from much_metric.monitor import IncompleteStreamError

    answer = {"object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi"},
                                                         "finish_reason": "stop"}]}
    with _RawServer(lambda h, stop: _send(h, json.dumps(answer).encode(), "application/json")) as server:
        with pytest.raises(IncompleteStreamError, match="not a stream"):
            list(_monitor().stream_openai(_stream(server)))
    # and the same answer passed as a chunk (a client that ignored stream=True)
    with pytest.raises(IncompleteStreamError, match="not a stream"):
        list(_monitor().stream_openai([answer]))


def test_keep_alive_comments_do_not_escape_the_overall_deadline():
    def keep_alive(handler, stop):
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.end_headers()
        while not stop.is_set():
            handler.wfile.write(b": keep-alive\n\n")
            handler.wfile.flush()
            time.sleep(0.05)

    from much_metric.monitor import IncompleteStreamError

    with _RawServer(keep_alive) as server:
        started = time.monotonic()
        with pytest.raises(IncompleteStreamError, match=r"1(\.0)?s"):
            list(_monitor().stream_openai(_stream(server, timeout=1.0)))
        # hang detector only (the keep-alive stream never ends; the message names the 1 s deadline that cut it)
        assert time.monotonic() - started < 60


def test_a_silent_server_is_timed_out_by_the_same_deadline():
    def silent(handler, stop):
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.end_headers()
        handler.wfile.write(_events([_chunk(_ids()[0])], done=False))
        handler.wfile.flush()
        stop.wait(300)

    from much_metric.monitor import IncompleteStreamError

    with _RawServer(silent) as server:
        started = time.monotonic()
        with pytest.raises(IncompleteStreamError, match="deadline"):
            list(_monitor().stream_openai(_stream(server, timeout=1.0)))
        # hang detector only (the server stays silent for 300 s; the message says the deadline cut it)
        assert time.monotonic() - started < 60


@pytest.mark.parametrize(("where", "logprob"), [("sampled", 0.5), ("alternative", 0.5), ("sampled", float("nan"))])
def test_stream_log_probabilities_above_0_are_refused(where, logprob):
    ids = _ids()
    chunks = [_chunk(t) for t in ids] + [_final()]
    entry = chunks[3]["choices"][0]["logprobs"]["content"][0]
    if where == "sampled":
        entry["logprob"] = logprob
        entry["top_logprobs"] = []
    else:
        entry["top_logprobs"] = [{"token": "token_id:5", "logprob": logprob}, *entry["top_logprobs"]]
    with pytest.raises(ValueError, match=r"chunk 3, token 3.*log-probability .* is not a log-probability"):
        list(_monitor().stream_openai(chunks))


def test_push_refuses_values_that_are_not_probabilities():
    from much_metric.monitor import ClaimMonitor

    monitor = ClaimMonitor(_tokenizer(), "max_likelihood", top_k=4)
    token = _ids()[0]
    with pytest.raises(ValueError, match=r"token 0: candidate probabilities sum to 1\.8"):
        monitor.push(token, [token, 1, 2], [0.9, 0.6, 0.3])
    for bad in (1.5, -0.1, float("nan")):
        with pytest.raises(ValueError, match="token 0: candidate probability .* not in"):
            monitor.push(token, [token, 1], [bad, 0.0])
    assert monitor.token_ids == []  # nothing was pushed
    monitor.push(token, [token, 1], [1.0 + 5e-5, 0.0])  # float rounding within the tolerance is fine
