"""generate --engine openai (against a fake server) and the sampling settings that keep MUCH's definition."""

from __future__ import annotations

import math
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builder.cli import main
from builder.generation.rows import candidates_row
from builder.generation.sampling import SamplingSettings, SamplingSettingsError
from builder.store import read_store
from much_dataset import schema
from tests.builder import fake_generation_server as fake
from tests.builder.fake_generation_server import FakeGenerationServer

QUESTIONS = [{"question_id": f"q{i}", "lang": "en", "prompt": f"Question number {i}?",
              "wiki_url": f"https://en.wikipedia.org/wiki/Q{i}"} for i in range(12)]


def _write_questions(out: Path, questions=QUESTIONS) -> None:
    import json

    out.mkdir(parents=True, exist_ok=True)
    (out / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in questions))


def _tokenizer_file() -> str:
    """The packaged SmolLM2 tokenizer: the fake server's EOS (2) is its ``<|im_end|>``."""
    return "smollm2"


def _args(out: Path, server: FakeGenerationServer, *extra: str) -> list[str]:
    return ["generate", "--out", str(out), "--model", "fake-model", "--engine", "openai", "--base-url",
            server.base_url, "--backoff", "0", "--tokenizer", _tokenizer_file(), *extra]


# ------------------------------------------------------------------------------------------------ settings

@pytest.mark.parametrize("field, value, reason", [
    ("min_p", 0.05, "no min-p"), ("repetition_penalty", 1.1, "changes the logits"),
    ("presence_penalty", 0.5, "changes the logits"), ("frequency_penalty", -0.2, "changes the logits"),
    ("logprobs", 20, "MUCH stores 24"), ("temperature", 0.0, "MUCH samples"), ("max_new_tokens", 0, ">= 1"),
    ("top_p", 0.0, r"\(0, 1\]"), ("top_k", -2, "0/-1 for off")])
def test_settings_refuse_what_changes_much_probabilities(field, value, reason):
    with pytest.raises(SamplingSettingsError, match=field) as error:
        SamplingSettings(**{field: value})
    assert re.search(reason, str(error.value))


def test_settings_default_to_much_sampler_and_a_tempered_model():
    s = SamplingSettings(temperature=0.7, seed=3)
    assert (s.top_k, s.top_p) == (20, 0.9)  # MUCH's sampler
    kwargs = s.vllm_kwargs()
    # the served model multiplies its logits by 1/T, the request asks for T = 1: MUCH's truncated softmax(l / T)
    assert kwargs["temperature"] == 1.0 and math.isclose(s.logit_scale, 1 / 0.7)
    assert kwargs["top_k"] == 20 and kwargs["top_p"] == 0.9 and kwargs["seed"] == 3
    body = s.openai_body()
    assert body["temperature"] == 1.0 and body["top_k"] == 20 and body["top_p"] == 0.9


@pytest.mark.parametrize("field, value", [("top_k", "20"), ("temperature", float("nan")), ("seed", 1.5),
                                          ("top_p", True)])
def test_settings_refuse_malformed_values(field, value):
    with pytest.raises(SamplingSettingsError, match=field):
        SamplingSettings(**{field: value})


def test_settings_accept_the_untruncated_sampler_and_set_every_knob():
    s = SamplingSettings(temperature=0.7, top_k=-1, top_p=1.0, logprobs=30)
    kwargs = s.vllm_kwargs()
    assert kwargs["top_k"] == 0 and kwargs["top_p"] == 1.0 and kwargs["min_p"] == 0.0
    assert kwargs["repetition_penalty"] == 1.0 and kwargs["presence_penalty"] == 0.0
    assert kwargs["frequency_penalty"] == 0.0 and kwargs["logprobs"] == 30
    body = s.openai_body()
    assert body["top_logprobs"] == 31 and body["logprobs"] is True and body["return_tokens_as_token_ids"] is True
    assert body["top_k"] == -1
    assert s.to_record()["temperature"] == 0.7


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(24, 40), st.booleans())
def test_candidates_row_matches_a_straightforward_top24(seed, n_returned, sampled_inside):
    rng = np.random.default_rng(seed)
    lp = rng.normal(0, 3, 100)
    lp -= np.logaddexp.reduce(lp)
    order = np.argsort(-lp, kind="stable")
    returned = list(order[:n_returned])
    rng.shuffle(returned)  # engines return a dict: order is not guaranteed
    sampled = int(order[rng.integers(0, 24)]) if sampled_inside else int(order[24 + rng.integers(0, 50)])
    ids, probs = candidates_row(sampled, lp[sampled], [(int(i), lp[i]) for i in returned])
    assert ids[:24] == [int(i) for i in order[:24]]
    np.testing.assert_allclose(probs[:24], np.exp(lp[order[:24]]), rtol=1e-12)
    assert probs[:24] == sorted(probs[:24], reverse=True)
    if sampled_inside:
        assert len(ids) == 24
    else:
        assert ids[24] == sampled and math.isclose(probs[24], math.exp(lp[sampled]))


def test_candidates_row_refuses_too_few_candidates():
    with pytest.raises(ValueError, match="20 candidates"):
        candidates_row(1, -1.0, [(i, -float(i)) for i in range(20)])


# ------------------------------------------------------------------------------------------------ openai engine

@pytest.mark.parametrize("sampler", ["much", "untruncated"])
def test_openai_engine_rows_follow_the_server_distribution(tmp_path, sampler):
    """MUCH's sampler (every sampled token inside the top 20 and the nucleus), and an untruncated one (top_k off,
    top_p 1), whose sampled tokens may rank below 24: the 25th candidate."""
    _write_questions(tmp_path, QUESTIONS[:6])
    flags = ["--top-k", "0", "--top-p", "1"] if sampler == "untruncated" else []
    with FakeGenerationServer() as server:
        assert main(_args(tmp_path, server, "--workers", "3", *flags)) == 0
        body = server.chat_requests()[0]
    # one more than 24: vllm serve's list order (see SamplingSettings.openai_body)
    top_k, top_p = (20, 0.9) if sampler == "much" else (-1, 1.0)
    assert body["top_logprobs"] == 25 and body["top_p"] == top_p and body["top_k"] == top_k
    assert body["repetition_penalty"] == 1.0 and body["return_tokens_as_token_ids"] is True
    rows = list(read_store(tmp_path / "generations.jsonl"))
    assert sorted(r["question_id"] for r in rows) == [f"q{i}" for i in range(6)]
    from much_metric.models import load_tokenizer

    tokenizer = load_tokenizer(_tokenizer_file())
    outside = 0
    for row in rows:
        prompt = next(q["prompt"] for q in QUESTIONS if q["question_id"] == row["question_id"])
        tokens, logprobs, _ = fake.answer(prompt, int(body["top_logprobs"]), top_k=top_k, top_p=top_p)
        assert row[schema.OUTPUT_TOKENS] == tokens and row["finished"] is True
        assert row[schema.OUTPUT] == tokenizer.decode(tokens, skip_special_tokens=False)
        assert row["engine"] == "openai" and row["sampling"]["logprobs"] == 24
        assert row["sampling"]["top_k"] == max(top_k, 0) and row["sampling"]["top_p"] == top_p
        for token, lp, ids, probs in zip(tokens, logprobs, row[schema.LOGITS_TOKEN_IDS], row[schema.LOGITS_VALUES],
                                         strict=True):
            order = np.argsort(-lp, kind="stable")[:24]
            assert ids[:24] == order.tolist()
            np.testing.assert_allclose(probs[:24], np.exp(lp[order]), rtol=1e-12)
            if token not in ids[:24]:
                outside += 1
                assert ids[24:] == [token]
    # the untruncated sampler draws outside the head for some answers: the 25th entry is tested; MUCH's never does
    assert (outside > 0) == (sampler == "untruncated")


def test_openai_engine_retries_transient_errors_and_bounds_concurrency(tmp_path):
    _write_questions(tmp_path, QUESTIONS[:8])
    script = ["error500", "rate_limit", "no_logprobs"] + [("sleep", 0.2)] * 8
    with FakeGenerationServer(script) as server:
        assert main(_args(tmp_path, server, "--workers", "2")) == 0
        assert server.max_in_flight <= 2 and len(server.chat_requests()) == 8 + 3
    assert len(list(read_store(tmp_path / "generations.jsonl"))) == 8


def test_openai_engine_records_a_failure_and_a_rerun_completes(tmp_path):
    _write_questions(tmp_path, QUESTIONS[:3])
    with FakeGenerationServer(["bad_request"]) as server:
        assert main(_args(tmp_path, server, "--workers", "1")) == 1
        assert len(list(read_store(tmp_path / "generations.jsonl"))) == 2
        failures = list(read_store(tmp_path / "generations.failures.jsonl"))
        assert len(failures) == 1 and "HTTP 400" in str(failures[0])
        assert main(_args(tmp_path, server, "--workers", "1")) == 0
    assert len(list(read_store(tmp_path / "generations.jsonl"))) == 3


def test_openai_engine_refuses_string_tokens(tmp_path):
    _write_questions(tmp_path, QUESTIONS[:1])
    with FakeGenerationServer(["string_tokens"] * 2) as server:
        assert main(_args(tmp_path, server, "--max-attempts", "2")) == 1
    assert "token_id" in (tmp_path / "generations.failures.jsonl").read_text()


@pytest.mark.parametrize("flags, message", [
    (["--greedy"], "greedy"), ([], "--base-url"), (["--top-k", "-3"], "top_k"),
    (["--temperature", "0.7"], "logit_scale"), (["--temperature", "0.7", "--server-logit-scale", "1"], "logit_scale"),
    (["--timeout", "-1"], "--timeout")])
def test_cli_refuses_configurations_before_any_request(tmp_path, capsys, flags, message):
    _write_questions(tmp_path, QUESTIONS[:1])
    argv = ["generate", "--out", str(tmp_path), "--model", "m", "--engine", "openai", *flags]
    if message != "--base-url":
        argv += ["--base-url", "http://127.0.0.1:9/v1"]
    assert main(argv) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "generations.jsonl").exists()


@pytest.mark.parametrize("behaviour", sorted(fake.BAD_DATA))
def test_openai_engine_never_stores_what_a_misbehaving_server_sends(tmp_path, behaviour):
    """#31: each bad answer becomes a failure naming the rule; the other questions are stored, the run goes on."""
    _write_questions(tmp_path, QUESTIONS[:3])
    extra = ["--max-new-tokens", "2"] if behaviour == "too_many_tokens" else []
    with FakeGenerationServer([behaviour]) as server:
        assert main(_args(tmp_path, server, "--workers", "1", "--max-attempts", "1", *extra)) == 1
    [failure] = list(read_store(tmp_path / "generations.failures.jsonl"))
    assert fake.BAD_DATA[behaviour] in failure["reason"] and next(iter(failure.values())).endswith("/q0")
    stored = {r["question_id"] for r in read_store(tmp_path / "generations.jsonl")}
    assert stored == {"q1", "q2"}


def test_openai_timeout_bounds_the_whole_request(tmp_path):
    """#31: a server trickling its answer one byte every 0.5 s is cut at --timeout, not kept alive by each byte."""
    _write_questions(tmp_path / "ok", QUESTIONS[:1])
    _write_questions(tmp_path / "slow", QUESTIONS[:1])
    with FakeGenerationServer(["ok", "trickle", "trickle"]) as server:
        assert main(_args(tmp_path / "ok", server, "--timeout", "2", "--max-attempts", "2")) == 0
        started = time.monotonic()
        assert main(_args(tmp_path / "slow", server, "--timeout", "2", "--max-attempts", "2")) == 1
        took = time.monotonic() - started
    # The failure's reason says the deadline cut it. The bound is a hang detector only: the trickled answer alone
    # would take more than 1000 s, so any run under 120 s was cut, whatever the machine's load.
    assert "within --timeout 2 s" in (tmp_path / "slow" / "generations.failures.jsonl").read_text()
    assert took < 120, f"{took:.1f} s: the trickled answer was not cut at the deadline"


def test_openai_engine_does_not_retry_a_client_side_error():
    """#32(d): only transport errors, 408/429/5xx and malformed answers are retried; a bug fails at once."""
    from builder.generation.openai import MalformedAnswer, OpenAIGenerationFailed, RetryableHTTPError, openai_generate

    calls = []

    def broken():
        calls.append(1)
        raise AttributeError("'NoneType' object has no attribute 'post'")

    with pytest.raises(OpenAIGenerationFailed, match="AttributeError"):
        openai_generate(broken, max_attempts=5, backoff=0)
    assert len(calls) == 1
    for error in (RetryableHTTPError("HTTP 503"), MalformedAnswer("no logprobs")):
        calls.clear()

        def flaky(error=error):
            calls.append(1)
            raise error

        with pytest.raises(OpenAIGenerationFailed, match="after 3 attempts"):
            openai_generate(flaky, max_attempts=3, backoff=0)
        assert len(calls) == 3


# ------------------------------------------------------------------------------------------------ kills

def _rows(path: Path) -> dict[str, dict]:
    rows = list(read_store(path)) if path.exists() else []
    ids = [r["question_id"] for r in rows]
    assert len(ids) == len(set(ids)), "duplicated rows"
    return {r["question_id"]: r for r in rows}


def test_random_kills_lose_and_duplicate_nothing(tmp_path):
    questions = [{**QUESTIONS[0], "question_id": f"k{i}", "prompt": f"Kill question {i}?"} for i in range(200)]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    rng = random.Random(7)
    with FakeGenerationServer([("sleep", 0.1)] * 10_000) as server:
        reference = tmp_path / "reference"
        _write_questions(reference, questions)
        assert main(_args(reference, server, "--workers", "2")) == 0
        killed = tmp_path / "killed"
        _write_questions(killed, questions)
        cmd = [sys.executable, "-m", "builder", *_args(killed, server, "--workers", "2")]
        kills = 0
        for _ in range(40):
            process = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(rng.uniform(0.4, 1.2))
            if process.poll() is not None:
                break
            process.send_signal(signal.SIGKILL if kills % 2 else signal.SIGTERM)
            process.wait()
            kills += 1
            _rows(killed / "generations.jsonl")  # no duplicate after any kill
        assert kills >= 10, f"only {kills} kills: the run finished too early"
        assert subprocess.run(cmd, env=env, capture_output=True).returncode == 0
    want, got = _rows(reference / "generations.jsonl"), _rows(killed / "generations.jsonl")
    assert set(got) == set(want)
    for key, row in want.items():
        assert got[key][schema.GENERATION_ID] == row[schema.GENERATION_ID]


# ------------------------------------------------------------------------------------------------ vllm parsing

def test_vllm_generate_parses_logprob_dicts_and_appends_an_outside_token(monkeypatch):
    """vllm_generate on a stand-in ``vllm`` module (real vLLM: tests/builder/test_vllm_engine.py)."""
    import types

    captured = {}

    class SamplingParams:
        def __init__(self, **kwargs):
            captured.update(kwargs)

    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(SamplingParams=SamplingParams))
    from builder.generation.vllm import vllm_generate

    rng = np.random.default_rng(0)
    lps = [rng.normal(0, 3, 100) for _ in range(3)]
    lps = [lp - np.logaddexp.reduce(lp) for lp in lps]
    orders = [np.argsort(-lp, kind="stable") for lp in lps]
    tokens = [int(orders[0][0]), int(orders[1][40]), int(orders[2][5])]  # the second ranks 41st

    def position(lp, order, token):
        keep = {int(i): types.SimpleNamespace(logprob=float(lp[i])) for i in order[:24]}
        keep[token] = types.SimpleNamespace(logprob=float(lp[token]))  # vLLM adds the sampled token
        return dict(reversed(list(keep.items())))

    positions = [position(lp, o, t) for lp, o, t in zip(lps, orders, tokens, strict=True)]
    completion = types.SimpleNamespace(
        index=0, token_ids=tokens, text="x", finish_reason="length", logprobs=positions
    )

    class FakeLLM:
        def generate(self, prompts, params, use_tqdm):
            captured["prompts"] = prompts
            return [types.SimpleNamespace(outputs=[completion])]

    [result] = vllm_generate(FakeLLM(), [[1, 2, 3]], SamplingSettings(temperature=0.9, max_new_tokens=3))
    assert captured["prompts"] == [{"prompt_token_ids": [1, 2, 3]}]
    # MUCH's sampler on a model tempered by logit_scale = 1/T: the request itself asks for T = 1
    assert captured["logprobs"] == 24 and captured["top_k"] == 20 and captured["temperature"] == 1.0
    assert result.tokens == tokens and result.finished is False
    for lp, order, ids, probs in zip(lps, orders, result.ids, result.probs, strict=True):
        assert ids[:24] == order[:24].tolist()
        np.testing.assert_allclose(probs[:24], np.exp(lp[order[:24]]), rtol=1e-12)
    assert len(result.ids[0]) == 24 and len(result.ids[2]) == 24
    assert result.ids[1][24:] == [tokens[1]]
