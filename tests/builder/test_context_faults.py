"""context against a faulty embeddings server: per-item failures, retries with backoff, --timeout, auth stop."""

from __future__ import annotations

import time

import pytest

from builder.cli import main
from builder.store import read_store
from tests import assets
from tests.builder.fake_servers import FakeOpenAI
from tests.builder.test_context import GENERATIONS, PAGES, _write


class _FaultyEmbeddings(FakeOpenAI):
    """``/v1/embeddings`` answers the behaviours of ``faults`` in turn, then normally (``always`` repeats one)."""

    def __init__(self, faults=(), always=None):
        super().__init__()
        self.faults, self.always = list(faults), always

    def handle(self, method, path, query, body):
        if path == "/v1/embeddings":
            fault = self.always or (self.faults.pop(0) if self.faults else None)
            if fault == "500":
                return 500, {}, {"error": {"message": "down"}}
            if fault == "429":
                return 429, {"Retry-After": "0"}, {"error": {"message": "slow down"}}
            if fault == "garbage":
                return 200, {}, b"<html>gateway says hi</html>"
            if fault == "truncated":
                return 200, {}, b'{"object": "list", "data": [{"object": "embedding", "ind'
            if fault == "short":
                return 200, {}, {"object": "list", "data": [], "model": body["model"]}
            if fault == "401":
                return 401, {}, {"error": {"message": "Incorrect API key provided: sk-abc***", "type": "auth"}}
            if fault == "slow":
                time.sleep(1.5)
        return super().handle(method, path, query, body)


def _argv(out, server, *extra):
    return ["context", "--out", str(out), "--embeddings", "openai", "--base-url", server.base_url,
            "--api-key-env", "EMB_KEY", "--chunk-tokens", "40", "--backoff", "0", *extra]


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    assets.require("llama3")
    monkeypatch.setenv("EMB_KEY", "test-key-123456")


def test_a_down_server_records_every_item_and_a_rerun_retries(tmp_path):
    _write(tmp_path, PAGES[:2], GENERATIONS[:3])
    with _FaultyEmbeddings(always="500") as server:
        assert main(_argv(tmp_path, server, "--max-attempts", "2")) == 1
        assert len([r for r in server.requests if r["path"] == "/v1/embeddings"]) == 2 * 2  # 2 pages x 2 attempts
        server.always = None
        failures = {f["generation_id"]: f["reason"] for f in read_store(tmp_path / "context.failures.jsonl")}
        assert set(failures) == {"g1", "g2", "g3"} and all("HTTP 500" in r for r in failures.values())
        assert not list(read_store(tmp_path / "context.jsonl"))
        assert main(_argv(tmp_path, server)) == 0
    assert {r["generation_id"] for r in read_store(tmp_path / "context.jsonl")} == {"g1", "g2", "g3"}


@pytest.mark.parametrize("fault", ["garbage", "truncated", "short", "429", "500"])
def test_transient_faults_and_invalid_bodies_are_retried(tmp_path, fault):
    _write(tmp_path, PAGES[:1], GENERATIONS[:2])
    with _FaultyEmbeddings([fault, fault]) as server:
        assert main(_argv(tmp_path, server, "--max-attempts", "3")) == 0
    assert len(list(read_store(tmp_path / "context.jsonl"))) == 2


def test_timeout_is_ours_not_openais_600_s(tmp_path):
    """The server answers after 1.5 s: only our --timeout 0.3 can fail the row (openai's own is 600 s), so the
    failure and its reason prove it applied; no wall-clock bound needed."""
    _write(tmp_path, PAGES[:1], GENERATIONS[:1])
    with _FaultyEmbeddings(always="slow") as server:
        assert main(_argv(tmp_path, server, "--timeout", "0.3", "--max-attempts", "2")) == 1
    (failure,) = read_store(tmp_path / "context.failures.jsonl")
    assert "Timeout" in failure["reason"]


def test_refused_key_stops_at_once_with_one_message(tmp_path, capsys):
    _write(tmp_path, PAGES[:2], GENERATIONS[:3])
    with _FaultyEmbeddings(always="401") as server:
        assert main(_argv(tmp_path, server, "--max-attempts", "5")) == 2
        assert len([r for r in server.requests if r["path"] == "/v1/embeddings"]) == 1
    err = capsys.readouterr().err
    assert err.count("builder context: error: the embeddings server refused the API key (HTTP 401)") == 1
