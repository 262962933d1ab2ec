"""Issue #31, the monitor against a misbehaving OpenAI-compatible server: one deadline for the whole request (a
server dribbling bytes is cut at it), the per-token checks of the engines' rows (null ``top_logprobs``, ids outside
the vocabulary, duplicated ids, more tokens than ``max_tokens``), non-UTF-8 bytes, a connection closed mid-chunk,
HTTP errors and a refused connection: each is a clear error naming the server, never a traceback or stored data."""

from __future__ import annotations

import json
import socket
import time

import pytest

from much_metric.monitor import IncompleteStreamError
from tests.much_metric.monitor.test_monitor_stream_faults import (
    _chunk,
    _events,
    _final,
    _ids,
    _monitor,
    _RawServer,
    _send,
    _stream,
)


def _valid_payload() -> bytes:
    return _events([_chunk(t) for t in _ids()] + [_final()])


def test_a_server_dribbling_one_byte_every_half_second_is_cut_at_the_deadline():
    def dribble(handler, stop):
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.end_headers()
        for byte in _valid_payload():
            if stop.wait(0.5):
                return
            handler.wfile.write(bytes([byte]))
            handler.wfile.flush()

    monitor, _ = _monitor(), _valid_payload()  # the tokenizer loads outside the timed part
    with _RawServer(dribble) as server:
        started = time.monotonic()
        with pytest.raises(IncompleteStreamError, match=r"127\.0\.0\.1.*within the 2s deadline"):
            list(monitor.stream_openai(_stream(server, timeout=2.0)))
        # hang detector only: the dribbled payload takes minutes; the message names the deadline that cut it
        assert time.monotonic() - started < 60


def test_headers_dribbled_byte_by_byte_are_cut_at_the_deadline_too():
    def dribble(handler, stop):  # about 3 minutes of headers, a byte every 0.5 s
        for byte in b"HTTP/1.0 200 OK\r\nContent-Type: text/event-stream\r\nX-Pad: " + b"p" * 300 + b"\r\n\r\n":
            if stop.wait(0.5):
                return
            handler.wfile.write(bytes([byte]))
            handler.wfile.flush()

    monitor = _monitor()
    with _RawServer(dribble) as server:
        started = time.monotonic()
        with pytest.raises(IncompleteStreamError, match="deadline"):
            list(monitor.stream_openai(_stream(server, timeout=2.0)))
        assert time.monotonic() - started < 60  # hang detector only (see above)


def _chunks_with(change) -> list[dict]:
    chunks = [_chunk(t) for t in _ids()] + [_final()]
    change(chunks[2]["choices"][0]["logprobs"]["content"][0])
    return chunks


@pytest.mark.parametrize(("change", "message"), [
    (lambda e: e.update(top_logprobs=None), "top_logprobs is None, not a list"),
    (lambda e: e.pop("top_logprobs"), "top_logprobs is None, not a list"),
    (lambda e: e.update(token="token_id:999999"), "sampled token id 999999 is outside the tokenizer's vocabulary"),
    (lambda e: e["top_logprobs"].append({"token": "token_id:999999", "logprob": -5.0}),
     "id 999999 is outside the tokenizer's vocabulary"),
    (lambda e: e["top_logprobs"].append({"token": "token_id:5", "logprob": -5.0})
     or e["top_logprobs"].append({"token": "token_id:5", "logprob": -6.0}), "alternative id 5 is listed twice"),
    (lambda e: e.update(token="x", bytes=[300]), "bytes must be a list of integers 0-255"),
])
def test_each_bad_token_is_refused_naming_the_chunk(change, message):
    with pytest.raises(ValueError, match=r"chunk 2.*" + message if "bytes" not in message else message):
        list(_monitor().stream_openai(_chunks_with(change)))


def test_non_utf8_bytes_in_the_stream_are_refused():
    payload = _valid_payload().replace(b'"x"', b'"\xff\xfe"', 1)
    with _RawServer(lambda h, stop: _send(h, payload)) as server:
        with pytest.raises(IncompleteStreamError, match=r"not UTF-8"):
            list(_monitor().stream_openai(_stream(server)))


def test_more_tokens_than_max_tokens_are_refused():
    with _RawServer(lambda h, stop: _send(h, _valid_payload())) as server:
        with pytest.raises(IncompleteStreamError, match="more than the max_tokens=3"):
            list(_monitor().stream_openai(_stream(server, max_tokens=3)))


def _chunked(handler, stop):
    """HTTP/1.1 chunked answer whose second chunk announces 4096 bytes and closes after 20."""
    first = _events([_chunk(_ids()[0])], done=False)
    handler.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
    handler.wfile.write(f"{len(first):x}\r\n".encode() + first + b"\r\n")
    handler.wfile.write(b"1000\r\n" + b"data: {" * 3)
    handler.wfile.flush()
    handler.connection.shutdown(socket.SHUT_RDWR)


def test_a_connection_closed_mid_chunk_is_a_clear_error():
    with _RawServer(_chunked) as server:
        with pytest.raises(IncompleteStreamError, match=r"connection to http://127\.0\.0\.1:\d+/v1 broke after 1 "
                                                        r"tokens.*incomplete"):
            list(_monitor().stream_openai(_stream(server)))


@pytest.mark.parametrize(("status", "hint"), [(500, "Internal Server Error"), (401, "API key"), (404, "base URL")])
def test_http_errors_name_the_server_and_the_status(status, hint):
    def error(handler, stop):
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.end_headers()
        handler.wfile.write(json.dumps({"error": {"message": "nope"}}).encode())

    with _RawServer(error) as server:
        with pytest.raises(ConnectionError, match=rf"server {server.base_url} answered HTTP {status}.*{hint}"):
            list(_stream(server))


def test_a_refused_connection_names_the_server():
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    from much_metric.monitor._openai import stream_chat_completion

    with pytest.raises(ConnectionError, match=rf"server http://127\.0\.0\.1:{port}/v1 .*connection refused"):
        list(stream_chat_completion(f"http://127.0.0.1:{port}/v1", "m", [{"role": "user", "content": "q"}]))


def test_a_non_streamed_answer_with_a_length_over_http_1_1_is_named():
    answer = json.dumps({"object": "chat.completion", "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "Hi"}, "finish_reason": "stop"}]}).encode()

    def keep_alive_json(handler, stop):
        handler.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: keep-alive\r\n"
                            + f"Content-Length: {len(answer)}\r\n\r\n".encode() + answer)
        handler.wfile.flush()
        stop.wait(5)

    with _RawServer(keep_alive_json) as server:
        with pytest.raises(IncompleteStreamError, match="not a stream"):
            list(_monitor().stream_openai(_stream(server, timeout=3.0)))
