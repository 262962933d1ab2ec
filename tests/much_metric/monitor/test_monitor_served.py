"""What ``vllm serve`` streams (observed on vLLM 0.32, tests/builder/test_vllm_engine.py checks the real server): the
EOS token as the last token with its literal text, empty text/bytes for a piece of a split UTF-8 character, more than
20 alternatives (``--max-logprobs``), listed sampled token first and cut at ``top_logprobs``; and ``much monitor
--base-url`` (fake server on 127.0.0.1 here)."""

from __future__ import annotations

import functools
import json
import math

import numpy as np
import pytest

from tests.builder.fake_servers import _Server

TEXT = "Victor Hugo wrote Les Misérables. It was published in 1862."
EOS_TEXT = "<|im_end|>"


@functools.cache
def _tokenizer():
    from much_metric.models import load_tokenizer

    return load_tokenizer("smollm2")


def _entry(token_id: int, *, token_ids: bool, width: int = 24) -> dict:
    """One logprobs entry as vLLM streams it: the token's text and UTF-8 bytes (special tokens: their literal text),
    or ``token_id:N`` with return_tokens_as_token_ids; ``width`` alternatives with decreasing logprobs."""
    tokenizer = _tokenizer()

    def one(i: int, logprob: float) -> dict:
        text = tokenizer.decode([i])
        return {"token": f"token_id:{i}" if token_ids else text, "logprob": logprob,
                "bytes": list(text.encode("utf-8"))}

    alternatives = [token_id] + [i for i in range(1000, 1000 + width) if i != token_id][: width - 1]
    logprobs = [math.log(0.5)] + [math.log(0.4 / (width - 1))] * (width - 1)
    return {**one(token_id, logprobs[0]), "top_logprobs": [one(i, lp) for i, lp in zip(alternatives, logprobs,
                                                                                          strict=True)]}


def _chunks(ids: list[int], *, token_ids: bool, finish: str = "stop") -> list[dict]:
    chunks = [{"object": "chat.completion.chunk", "choices": [
        {"index": 0, "delta": {"content": "x"}, "logprobs": {"content": [_entry(t, token_ids=token_ids)]},
         "finish_reason": finish if n == len(ids) - 1 else None}]} for n, t in enumerate(ids)]
    return chunks


@pytest.mark.parametrize("token_ids", [False, True])
def test_a_streamed_eos_token_gives_the_eos_claim(token_ids):
    from much_metric import segment
    from much_metric.monitor import ClaimMonitor

    tokenizer = _tokenizer()
    eos = tokenizer.convert_tokens_to_ids(EOS_TEXT)
    ids = list(tokenizer.encode(TEXT, add_special_tokens=False)) + [eos]
    monitor = ClaimMonitor(tokenizer, "token_entropy_24", top_k=24)
    claims = list(monitor.stream_openai(_chunks(ids, token_ids=token_ids)))
    assert monitor.token_ids == ids  # the literal "<|im_end|>" maps to the EOS id, not to text pieces
    assert claims[-1].eos and claims[-1].token_ids == [eos] and not any(c.eos for c in claims[:-1])
    text = tokenizer.decode(ids, skip_special_tokens=False)
    assert [c.token_indices for c in claims] == segment(text, tokenizer, ids)
    assert all(len(row) == 24 for row in monitor.candidates()[0])
    assert all(math.isfinite(c.score) for c in claims)


def test_a_piece_of_a_split_character_without_text_asks_for_token_ids():
    from much_metric.monitor import ClaimMonitor

    tokenizer = _tokenizer()
    ids = list(tokenizer.encode("Tokyo is 東京.", add_special_tokens=False))
    chunks = _chunks(ids, token_ids=False)
    # what vLLM sends for a token that ends inside a UTF-8 character: no text, no bytes
    split = next(n for n, t in enumerate(ids) if "\ufffd" in tokenizer.decode([t]))
    chunks[split]["choices"][0]["logprobs"]["content"][0].update(token="", bytes=[])
    monitor = ClaimMonitor(tokenizer, "max_likelihood", top_k=24)
    with pytest.raises(ValueError, match=rf"chunk {split}, token {split}: .*return_tokens_as_token_ids=True"):
        list(monitor.stream_openai(chunks))
    # with token ids the same answer is monitored exactly
    claims = list(monitor.stream_openai(_chunks(ids, token_ids=True)))
    assert monitor.token_ids == ids and "".join(c.text for c in claims) == tokenizer.decode(ids)


def test_25_alternatives_in_vllm_order_give_the_true_top_24_and_the_sampled_token_25th():
    # vllm serve lists the sampled token first and cuts at top_logprobs: with 25 requested and the sampled token
    # ranked 30th, the list is the sampled token + the top 24; the monitor keeps the 24 most probable, then appends it
    from much_metric.monitor import ClaimMonitor

    tokenizer = _tokenizer()
    ids = list(tokenizer.encode(TEXT, add_special_tokens=False))
    probs = np.sort(np.random.default_rng(0).dirichlet(np.full(40, 0.3)))[::-1]
    candidates = [1000 + i for i in range(40)]
    sampled_rank = 29
    chunks = _chunks(ids, token_ids=True)
    entry = chunks[1]["choices"][0]["logprobs"]["content"][0]
    candidates[sampled_rank] = ids[1]
    listed = [sampled_rank, *range(24)]  # vLLM's order, 25 entries
    entry.update(logprob=math.log(probs[sampled_rank]), top_logprobs=[
        {"token": f"token_id:{candidates[r]}", "logprob": math.log(probs[r])} for r in listed])
    monitor = ClaimMonitor(tokenizer, "token_entropy_24", top_k=24)
    list(monitor.stream_openai(chunks))
    row_ids, row_probs = monitor.candidates()
    assert row_ids[1] == [*candidates[:24], ids[1]]
    np.testing.assert_allclose(row_probs[1], [*probs[:24], probs[sampled_rank]], rtol=1e-12)


class _FakeVllm(_Server):
    """``/v1/chat/completions`` streaming a fixed answer, vLLM-style (EOS streamed, ids when asked)."""

    def __init__(self, ids: list[int]) -> None:
        super().__init__()
        self.ids = ids

    def handle(self, method, path, query, body):
        chunks = _chunks(self.ids, token_ids=bool(body.get("return_tokens_as_token_ids")))
        for chunk in chunks:
            for entry in chunk["choices"][0]["logprobs"]["content"]:
                entry["top_logprobs"] = entry["top_logprobs"][: body["top_logprobs"]]
        payload = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
        return 200, {}, payload.encode()


def test_stream_chat_completion_allows_24_alternatives_and_refuses_bad_counts():
    from much_metric.monitor._openai import stream_chat_completion

    ids = list(_tokenizer().encode(TEXT, add_special_tokens=False))
    with _FakeVllm(ids) as server:
        chunks = list(stream_chat_completion(f"http://127.0.0.1:{server.port}/v1", "m",
                                             [{"role": "user", "content": "q"}], top_logprobs=24))
        assert server.requests[-1]["body"]["top_logprobs"] == 24
    assert len(chunks) == len(ids)
    for bad in (-1, True, 2.5):
        with pytest.raises(ValueError, match="top_logprobs must be a non-negative integer"):
            next(stream_chat_completion("http://127.0.0.1:9/v1", "m", [], top_logprobs=bad))


def test_much_monitor_base_url(capsys):
    from much_metric.cli import main

    tokenizer = _tokenizer()
    eos = tokenizer.convert_tokens_to_ids(EOS_TEXT)
    ids = list(tokenizer.encode(TEXT, add_special_tokens=False)) + [eos]
    with _FakeVllm(ids) as server:
        url = f"http://127.0.0.1:{server.port}/v1"
        rc = main(["monitor", "--base-url", url, "--model", "served-name", "--tokenizer", "smollm2", "--prompt",
                   "Who wrote Les Misérables?", "--top-logprobs", "25", "--json", "--temperature", "0.8"])
        out = capsys.readouterr().out
        assert rc == 0
        body = server.requests[-1]["body"]
        assert body["model"] == "served-name" and body["stream"] and body["logprobs"]
        assert body["top_logprobs"] == 25 and body["return_tokens_as_token_ids"] is True
        assert body["temperature"] == 0.8 and body["top_p"] == 1.0 and body["max_tokens"] == 128
        assert [m["role"] for m in body["messages"]] == ["system", "user"]
        records = [json.loads(line) for line in out.splitlines()]
        assert "".join(r["text"] for r in records) == tokenizer.decode(ids, skip_special_tokens=False)
        assert records[-1]["eos"] and all(0 <= r["score"] <= 1 for r in records)

        assert main(["monitor", "--base-url", url, "--model", "m", "--tokenizer", "smollm2", "--prompt", "q",
                     "--method", "max_likelihood", "--no-token-ids", "--raw"]) == 0
        body = server.requests[-1]["body"]
        assert "return_tokens_as_token_ids" not in body and body["temperature"] == 0.0
        assert body["top_logprobs"] == 20 and [m["role"] for m in body["messages"]] == ["user"]
        capsys.readouterr()

        # token_entropy_24 (the default method) on 20 alternatives: refused before any request, saying what to do
        n_requests = len(server.requests)
        assert main(["monitor", "--base-url", url, "--model", "m", "--tokenizer", "smollm2", "--prompt", "q"]) == 2
        assert "--max-logprobs 25" in capsys.readouterr().err and len(server.requests) == n_requests
    assert main(["monitor", "--model", "smollm2", "--tokenizer", "smollm2", "--prompt", "q"]) == 2
    assert "go with --base-url" in capsys.readouterr().err
