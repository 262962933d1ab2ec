"""annotate against a faulty judge server: garbage 200 bodies retried, 401 stops at once, secrets never on disk."""

from __future__ import annotations

import openai
import pytest

from builder import _redact, annotate
from builder.cli import main
from builder.store import JsonlStore, read_store
from tests import assets
from tests.builder.fake_servers import FakeOpenAI, write_sample_artifacts
from tests.builder.test_annotate import _context_rows, _messages

KEY = "sk-live-0123456789abcdef"


class _FaultyJudge(FakeOpenAI):
    def __init__(self, faults=(), always=None):
        super().__init__()
        self.faults, self.always = list(faults), always

    def handle(self, method, path, query, body):
        if path == "/v1/chat/completions":
            fault = self.always or (self.faults.pop(0) if self.faults else None)
            if fault == "truncated":
                return 200, {}, b'{"id": "chatcmpl-x", "object": "chat.completion", "choices": [{"ind'
            if fault == "garbage":
                return 200, {}, b"\x00\xffnot json"
            if fault == "empty":
                return 200, {}, b""
            if fault == "401":
                return 401, {}, {"error": {"message": f"Incorrect API key provided: {KEY}", "type": "auth"}}
            if fault == "403":
                return 403, {}, {"error": {"message": "no access", "type": "permission"}}
            if fault == "echo500":
                return 500, {}, {"error": {"message": f"upstream said Authorization: Bearer {KEY} is odd"}}
        return super().handle(method, path, query, body)


def _client(server):
    return openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0, timeout=10)


@pytest.mark.parametrize("fault", ["truncated", "garbage", "empty"])
def test_garbage_200_bodies_are_retried(fault):
    with _FaultyJudge([fault, fault]) as server:
        result = annotate.call_judge(_client(server), "m", _messages(["a", "b"]), 2, max_attempts=3,
                                     sleep=lambda s: None)
    assert result.attempts == 3 and len(result.labels) == 2


@pytest.fixture(scope="module")
def llama3():
    return assets.llama3_tokenizer()


def _argv(out, server):
    return ["annotate", "--out", str(out), "--tokenizer", str(assets.llama3_tokenizer_json()), "--api-key-env",
            "JUDGE_KEY", "--max-attempts", "3", "--backoff", "0", "--workers", "2", "--base-url", server.base_url]


@pytest.mark.parametrize("status", ["401", "403"])
def test_refused_key_stops_at_once_with_one_message(tmp_path, llama3, monkeypatch, capsys, status):
    monkeypatch.setenv("JUDGE_KEY", KEY)
    _context_rows(tmp_path, write_sample_artifacts(tmp_path, llama3))
    with _FaultyJudge(always=status) as server:
        assert main(_argv(tmp_path, server)) == 2
        calls = len(server.chat_requests())
    assert calls <= 2  # at most the calls already in flight on the 2 workers, not one per sample (10 pairs)
    err = capsys.readouterr().err
    assert err.count("builder annotate: error: the API refused the key") == 1 and f"HTTP {status}" in err
    assert KEY not in err
    assert not (tmp_path / "labels.gpt-4o.failures.jsonl").exists() or KEY not in (
        tmp_path / "labels.gpt-4o.failures.jsonl").read_text()


def test_a_provider_echoing_the_key_never_gets_it_written(tmp_path, llama3, monkeypatch):
    monkeypatch.setenv("JUDGE_KEY", KEY)
    _context_rows(tmp_path, write_sample_artifacts(tmp_path, llama3))
    with _FaultyJudge(always="echo500") as server:
        assert main(_argv(tmp_path, server)) == 1
    text = "".join(p.read_text() for p in tmp_path.glob("*.jsonl"))
    failures = list(read_store(tmp_path / "labels.gpt-4o.failures.jsonl"))
    assert failures and all("[REDACTED]" in f["reason"] for f in failures)
    assert KEY not in text


def test_redact_masks_env_secrets_and_authorization_material(monkeypatch):
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok-abcdefgh1234")
    monkeypatch.setenv("HOME_DIR_NAME", "not-a-secret-value")
    text = ('failed: tok-abcdefgh1234 / {"Authorization": "Bearer xyz987"} api_key=sk-1 '
            'token: "t0k" not-a-secret-value')
    masked = _redact.redact(text)
    assert "tok-abcdefgh1234" not in masked and "xyz987" not in masked and "sk-1" not in masked
    assert "t0k" not in masked and "not-a-secret-value" in masked
    assert _redact.redact("the token = 5", patterns=False) == "the token = 5"


def test_store_masks_secret_values_in_records_and_failures(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    store = JsonlStore(tmp_path / "x.jsonl")
    store.append({"generation_id": "a", "output": f"echo {KEY}; the token = 5"})
    store.record_failure("b", f"HTTP 500: Authorization: Bearer {KEY}")
    assert KEY not in (tmp_path / "x.jsonl").read_text() + (tmp_path / "x.failures.jsonl").read_text()
    assert next(read_store(tmp_path / "x.jsonl"))["output"] == "echo [REDACTED]; the token = 5"


def test_two_overlapping_annotate_runs_store_every_label_once(tmp_path, llama3, monkeypatch):
    import threading

    monkeypatch.setenv("JUDGE_KEY", KEY)
    _context_rows(tmp_path, write_sample_artifacts(tmp_path, llama3))
    with _FaultyJudge() as server:
        codes = []
        runs = [threading.Thread(target=lambda: codes.append(main(_argv(tmp_path, server)))) for _ in range(2)]
        for run in runs:
            run.start()
        for run in runs:
            run.join(timeout=120)
    assert codes == [0, 0]
    for key in ("gpt-4o", "gpt-4.1"):
        ids = [r["generation_id"] for r in read_store(tmp_path / f"labels.{key}.jsonl")]
        assert len(ids) == 5 and len(set(ids)) == 5
