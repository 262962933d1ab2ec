"""annotate: prompt, answer validation, retries, cost, and the step against a fake OpenAI-compatible server."""

from __future__ import annotations

import json

import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builder import _judge_prompt as jp
from builder import annotate
from builder.cli import main
from builder.store import read_store
from tests import assets
from tests.builder.fake_servers import FakeOpenAI, default_truth, write_sample_artifacts


def _client(server: FakeOpenAI):
    return openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0, timeout=10)


def _messages(segments):
    return jp.build_messages(question="Capital of Australia?", output="The capital is Sydney.<|eot_id|>",
                             segments=segments, infobox={"name": "Canberra"}, context_chunks=["Canberra is ..."])


# ------------------------------------------------------------------------------------------------ prompt / parsing

def test_prompt_holds_guidelines_question_segments_and_reference():
    text = jp.build_user_prompt(question="Q?", output="  The answer.\n<eos>  ", segments=["The", " answer\nhere."],
                                infobox={"capital": "Canberra", "pop": "453,558"},
                                context_chunks=["chunk A", "chunk B"])
    assert jp.GUIDELINES in text
    assert "# Question\n\nQ?" in text
    assert "# Model Output\n\nThe answer.\n<eos>\n" in text  # stripped, EOS text kept
    assert "# Segmented Output\n\n# 0 : The\n# 1 :  answer here." in text  # newline -> space, index on 2 chars
    assert '"capital": "Canberra"' in text and "chunk A\n\nchunk B" in text
    assert text.index("# Question") < text.index("# Segmented Output") < text.index("# Reference Knowledge")


def test_format_segments_right_aligns_two_digit_indices():
    lines = jp.format_segments([f"c{i}" for i in range(11)]).splitlines()
    assert lines[0] == "# 0 : c0" and lines[10] == "#10 : c10"


def test_response_format_is_strict_schema_with_one_enum_field_per_claim():
    fmt = jp.response_format(3)
    schema = fmt["json_schema"]["schema"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
    assert schema["required"] == ["score_chunk_0", "score_chunk_1", "score_chunk_2"]
    assert all(p == {"type": "integer", "enum": [-1, 1]} for p in schema["properties"].values())


@settings(deadline=None, max_examples=50)
@given(st.lists(st.sampled_from([-1, 1]), min_size=0, max_size=30))
def test_parse_labels_round_trips_valid_answers_in_claim_order(labels):
    # keys written in reverse order: the parser must order by index, not by position in the JSON
    content = json.dumps({f"score_chunk_{i}": labels[i] for i in reversed(range(len(labels)))})
    assert jp.parse_labels(content, len(labels)) == labels


@pytest.mark.parametrize("content, n, message", [
    ('{"score_chunk_0": 1}', 2, "expected 2"),
    ('{"score_chunk_0": 1, "score_chunk_1": 1, "score_chunk_2": 1}', 2, "expected 2"),
    ('{"score_chunk_0": 0, "score_chunk_1": 1}', 2, "-1 or 1"),
    ('{"score_chunk_0": 2, "score_chunk_1": 1}', 2, "-1 or 1"),
    ('{"score_chunk_0": true, "score_chunk_1": 1}', 2, "-1 or 1"),
    ('{"score_chunk_0": "1", "score_chunk_1": 1}', 2, "-1 or 1"),
    ('{"score_chunk_0": 1.0, "score_chunk_1": 1}', 2, "-1 or 1"),
    ("[1, 1]", 2, "JSON object"),
    ("1, 1", 2, "not JSON"),
    ("", 2, "empty"),
])
def test_parse_labels_rejects_invalid_answers(content, n, message):
    with pytest.raises(jp.InvalidAnswer, match=message):
        jp.parse_labels(content, n)


def test_judge_key_and_cost():
    assert annotate.judge_key("gpt-4o-2024-11-20") == "gpt-4o"
    assert annotate.judge_key("gpt-4.1-2025-04-14") == "gpt-4.1"
    assert annotate.judge_key("Qwen/Qwen2.5-72B-Instruct") == "Qwen2.5-72B-Instruct"
    usage = {"prompt_tokens": 1_000_000, "completion_tokens": 500_000}
    assert annotate.cost_usd(usage, (2.5, 10.0)) == pytest.approx(7.5)
    assert annotate.cost_usd(usage, None) is None


# -------------------------------------------------------------------------------------------- call_judge (real HTTP)

def test_call_judge_retries_errors_and_invalid_answers_until_valid():
    segments = ["The capital", " is Sydney."]
    script = {"m": ["error500", "rate_limit", "wrong_length", "out_of_range", "not_json", "correct"]}
    delays = []
    with FakeOpenAI(script) as server:
        result = annotate.call_judge(_client(server), "m", _messages(segments), 2, max_attempts=6, backoff=0.001,
                                     sleep=delays.append)
        bodies = server.chat_requests("m")
    assert result.labels == default_truth(segments) == [1, -1]
    assert result.attempts == 6 and result.usage["calls"] == 6
    # tokens of every answered call are billed, invalid answers included (4 answered calls)
    words = sum(len(m["content"].split()) for m in _messages(segments))
    assert result.usage["prompt_tokens"] == 4 * words
    assert result.usage["completion_tokens"] == 5 * (3 + 2 + 2 + 2)
    assert delays == pytest.approx([0.001 * 2**k for k in range(5)])  # exponential backoff between the 6 calls
    assert all(b["temperature"] == 0 and b["seed"] == 0 for b in bodies)
    assert all(b["response_format"]["type"] == "json_schema" for b in bodies)


def test_a_timed_out_call_is_unmetered_not_free():
    """A call cut at the client's deadline was computed by the server: its tokens are unknown, so the usage says so
    and the cost is None (unknown), never 0 tokens / USD 0 as if known."""
    segments = ["The capital", " is Sydney."]
    with FakeOpenAI({"m": ["slow", "correct"]}) as server:
        server.slow_seconds = 1.0
        client = openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0, timeout=0.3)
        result = annotate.call_judge(client, "m", _messages(segments), 2, max_attempts=2, sleep=lambda s: None)
    assert result.labels == [1, -1] and result.usage["calls"] == 2
    assert result.usage["unmetered_calls"] == 1 and result.usage["prompt_tokens"] > 0  # the answered call's
    assert annotate.cost_usd(result.usage, (2.5, 10.0)) is None
    assert annotate.cost_usd({**result.usage, "unmetered_calls": 0}, (2.5, 10.0)) > 0


def test_call_judge_gives_up_with_the_last_reason():
    with FakeOpenAI({"m": ["wrong_length"] * 3}) as server:
        with pytest.raises(annotate.JudgeFailed, match="after 3 attempts.*expected 2") as info:
            annotate.call_judge(_client(server), "m", _messages(["a", "b"]), 2, max_attempts=3, sleep=lambda s: None)
        assert len(server.chat_requests()) == 3
    assert info.value.usage["calls"] == 3 and info.value.usage["completion_tokens"] == 3 * 15


def test_call_judge_does_not_retry_a_bad_request():
    with FakeOpenAI({"m": ["bad_request"]}) as server:
        with pytest.raises(annotate.JudgeFailed, match="BadRequestError"):
            annotate.call_judge(_client(server), "m", _messages(["a"]), 1, max_attempts=5, sleep=lambda s: None)
        assert len(server.chat_requests()) == 1


# ------------------------------------------------------------------------------------------------ the step

@pytest.fixture(scope="module")
def llama3():
    return assets.llama3_tokenizer()


def _context_rows(out, generations):
    rows = [{"generation_id": g["generation_id"], "wiki_url": g["wiki_url"], "status": "ok",
             "chunks": ["Canberra is the capital city of Australia."], "scores": [0.9]} for g in generations]
    (out / "context.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (out / "wiki.jsonl").write_text(json.dumps({"wiki_url": "https://en.wikipedia.org/wiki/Canberra",
                                                "status": "ok", "infobox": {"name": "Canberra"}}) + "\n")


def test_annotate_step_writes_validated_labels_usage_and_cost_and_resumes(tmp_path, llama3, monkeypatch):
    generations = write_sample_artifacts(tmp_path, llama3)
    _context_rows(tmp_path, generations)
    tokenizer_json = str(assets.llama3_tokenizer_json())
    monkeypatch.setenv("FAKE_KEY", "sk-secret-value")
    # gpt-4.1 answers gen00 with a wrong length first; gen02 always fails for gpt-4o (server errors)
    script = {"gpt-4.1-2025-04-14": ["wrong_length"], "gpt-4o-2024-11-20": ["correct", "correct"] + ["error500"] * 3}
    argv = ["annotate", "--out", str(tmp_path), "--tokenizer", tokenizer_json, "--api-key-env", "FAKE_KEY",
            "--max-attempts", "3", "--backoff", "0", "--workers", "1"]
    with FakeOpenAI(script) as server:
        rc = main([*argv, "--base-url", server.base_url])
        first_calls = len(server.chat_requests())
        headers = [{k.lower(): v for k, v in r["headers"].items()} for r in server.requests]
    assert rc == 1  # one (sample, judge) failed and was recorded
    assert all(h.get("authorization") == "Bearer sk-secret-value" for h in headers)
    by_judge = {key: {r["generation_id"]: r for r in read_store(tmp_path / f"labels.{key}.jsonl")}
                for key in ("gpt-4o", "gpt-4.1")}
    usable = {"gen00", "gen01", "gen02", "gen03", "gen06"}  # gen04 (no EOS) and gen05 (outside top 24) not sent
    assert set(by_judge["gpt-4.1"]) == usable
    assert set(by_judge["gpt-4o"]) == usable - {"gen02"}
    segments = {r["generation_id"]: r["token_chunks"] for r in read_store(tmp_path / "segments.jsonl")}
    for key, rows in by_judge.items():
        for gid, row in rows.items():
            assert row["judge"] == key and len(row["labels"]) == len(segments[gid]) and row["labels"][-1] == 1
            price = annotate.DEFAULT_PRICES[row["model"]]
            assert row["cost_usd"] == pytest.approx((row["usage"]["prompt_tokens"] * price[0]
                                                     + row["usage"]["completion_tokens"] * price[1]) / 1e6)
    assert by_judge["gpt-4.1"]["gen01"]["labels"][:-1].count(-1) == 1  # "Sydney" claim flagged by the fake judge
    assert by_judge["gpt-4.1"]["gen00"]["attempts"] == 2 and by_judge["gpt-4.1"]["gen01"]["attempts"] == 1
    failures = [r for r in read_store(tmp_path / "labels.gpt-4o.failures.jsonl")]
    assert [f["generation_id"] for f in failures] == ["gen02"] and "InternalServerError" in failures[0]["reason"]
    assert "sk-secret-value" not in (tmp_path / "labels.gpt-4o.failures.jsonl").read_text()

    # rerun: only the failed (gen02, gpt-4o) pair is asked again, nothing is duplicated
    with FakeOpenAI() as server:
        assert main([*argv, "--base-url", server.base_url]) == 0
        assert [b["model"] for b in server.chat_requests()] == ["gpt-4o-2024-11-20"]
    assert first_calls == 2 * 5 + 1 + 2  # 5 samples x 2 judges + 1 retry (gpt-4.1) + 2 more retries (gpt-4o gen02)
    ids = [r["generation_id"] for r in read_store(tmp_path / "labels.gpt-4o.jsonl")]
    assert sorted(ids) == sorted(usable) and len(ids) == len(set(ids))


def test_annotate_records_a_failure_when_context_is_missing(tmp_path, llama3):
    write_sample_artifacts(tmp_path, llama3)
    with FakeOpenAI() as server:
        rc = main(["annotate", "--out", str(tmp_path), "--tokenizer", str(assets.llama3_tokenizer_json()),
                   "--judge", "judge-a=a", "--judge", "judge-b=b", "--base-url", server.base_url, "--limit", "1"])
        assert server.chat_requests() == []
    assert rc == 1
    failure = next(read_store(tmp_path / "labels.a.failures.jsonl"))
    assert failure["generation_id"] == "gen00" and "context.jsonl" in failure["reason"]


def test_build_judge_messages_rejects_misaligned_chunks():
    generation = {"generation_id": "g7", "output_tokens": [1, 2, 3], "prompt": "?", "output": "abc"}
    decode = lambda ids: "".join(chr(96 + i) for i in ids)  # noqa: E731
    messages, n = annotate.build_judge_messages(generation, {"token_chunks": [[0, 1], [2]]}, {}, {}, decode)
    assert n == 1 and "# 0 : ab" in messages[1]["content"] and "# 1 :" not in messages[1]["content"]
    for chunks in ([[0, 1]], [[0], [2], [1]], [], [[0, 1, 2], []]):
        with pytest.raises(ValueError, match="generation_id='g7'.*token_chunks"):
            annotate.build_judge_messages(generation, {"token_chunks": chunks}, {}, {}, decode)


def test_eos_only_sample_is_labelled_without_a_call(tmp_path, llama3):
    answers = (("en", "Capital?", "https://en.wikipedia.org/wiki/Canberra", "", None),)
    generations = write_sample_artifacts(tmp_path, llama3, answers)
    assert generations[0]["output_tokens"] == [128009]
    _context_rows(tmp_path, generations)
    with FakeOpenAI() as server:
        assert main(["annotate", "--out", str(tmp_path), "--tokenizer", str(assets.llama3_tokenizer_json()),
                     "--base-url", server.base_url]) == 0
        assert server.chat_requests() == []
    row = next(read_store(tmp_path / "labels.gpt-4o.jsonl"))
    assert row["labels"] == [1] and row["usage"]["calls"] == 0 and row["cost_usd"] == 0
