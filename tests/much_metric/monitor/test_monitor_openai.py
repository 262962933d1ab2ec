"""ClaimMonitor on an OpenAI-compatible stream: a fake server on 127.0.0.1 streams a real SmolLM2 generation (its
tokens and top-20 logprobs, EOS not streamed, as servers do), read with urllib and with the openai client."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from tests.builder.fake_servers import _Server
from tests.much_metric._monitor_helpers import monitored_runs


def _raw_bytes(tokenizer, token_id: int) -> bytes:
    # Independent oracle: transformers' own GPT-2 byte map (the monitor has its own implementation).
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    inverse = {c: b for b, c in bytes_to_unicode().items()}
    return bytes(inverse[ch] for ch in tokenizer.convert_ids_to_tokens(token_id))


class FakeStreamingOpenAI(_Server):
    """``/v1/chat/completions`` with ``stream=True``: SSE chunks of one token each, with logprobs."""

    def __init__(self, tokenizer, tokens, candidates, probabilities) -> None:
        super().__init__()
        self.tokenizer, self.tokens, self.candidates, self.probabilities = tokenizer, tokens, candidates, probabilities

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def _entry(self, token_id: int, p: float) -> dict:
        raw = _raw_bytes(self.tokenizer, token_id)
        return {"token": raw.decode("utf-8", errors="replace"), "logprob": math.log(p), "bytes": list(raw)}

    def handle(self, method, path, query, body):
        assert body["stream"] and body["logprobs"]
        k = body["top_logprobs"]
        events = []
        for i, token in enumerate(self.tokens):
            row = dict(zip(self.candidates[i], self.probabilities[i], strict=True))
            entry = self._entry(token, row[token])
            entry["top_logprobs"] = [self._entry(c, p) for c, p in zip(self.candidates[i][:k],
                                                                       self.probabilities[i][:k], strict=True)]
            chunk = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0, "model": body["model"],
                     "choices": [{"index": 0, "delta": {"content": self.tokenizer.decode([token])},
                                  "logprobs": {"content": [entry]}, "finish_reason": None}]}
            events.append(chunk)
        events.append({"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0, "model": body["model"],
                       "choices": [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": "stop"}]})
        payload = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
        return 200, {"Content-Type": "text/event-stream"}, payload.encode()


@pytest.fixture(scope="module")
def recorded():
    llm, results = monitored_runs()
    _, monitor, _, _, _ = results[0]
    ids, probs = monitor.candidates()
    tokens = monitor.token_ids
    assert tokens[-1] == llm.tokenizer.eos_token_id
    return llm.tokenizer, tokens[:-1], ids[:-1], probs[:-1], monitor


def test_byte_table_maps_every_vocabulary_id_back(recorded):
    from much_metric.monitor._openai import token_bytes_table, token_to_id

    tokenizer = recorded[0]
    table = token_bytes_table(tokenizer)
    special = set(tokenizer.all_special_ids)
    wrong = [i for i in range(len(tokenizer)) if i not in special
             and token_to_id({"token": "?", "bytes": list(_raw_bytes(tokenizer, i))}, table) != i]
    assert wrong == []
    assert token_to_id({"token": "token_id:123"}, table) == 123


@pytest.mark.parametrize("client", ["urllib", "openai"])
def test_stream_gives_the_offline_claims_and_scores(recorded, client):
    from much_dataset.stopwords import stopword_mask
    from much_metric import Aggregation, aggregate_claims, segment
    from much_metric.baselines import resolve, token_arrays
    from much_metric.monitor import ClaimMonitor
    from much_metric.monitor._openai import stream_chat_completion

    tokenizer, tokens, ids, probs, hf_monitor = recorded
    messages = [{"role": "user", "content": "Who wrote Les Misérables?"}]
    with FakeStreamingOpenAI(tokenizer, tokens, ids, probs) as server:
        monitor = ClaimMonitor(tokenizer, "token_likelihood", top_k=20, threshold=0.5)
        if client == "urllib":
            chunks = stream_chat_completion(server.base_url, "smollm2", messages, max_tokens=64)
        else:
            import openai

            api = openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0)
            chunks = api.chat.completions.create(model="smollm2", messages=messages, stream=True, logprobs=True,
                                                 top_logprobs=20)
        claims = list(monitor.stream_openai(chunks))
    assert monitor.token_ids == tokens
    text = tokenizer.decode(tokens)
    assert [c.token_indices for c in claims] == segment(text, tokenizer, tokens)
    assert "".join(c.text for c in claims) == text and not claims[-1].eos  # no EOS streamed
    stream_ids, stream_probs = monitor.candidates()
    assert [row[:20] for row in ids] == [row[:20] for row in stream_ids]
    np.testing.assert_allclose([row[:20] for row in stream_probs], [row[:20] for row in probs], rtol=1e-6)
    rows = [{"generation_id": "s", "output_tokens": tokens, "logits_token_ids": stream_ids,
             "logits_values": stream_probs}]
    offline = resolve("token_likelihood").compute(token_arrays(rows), {}, {})
    np.testing.assert_array_equal(np.concatenate([c.token_scores for c in claims]), offline)
    expected = aggregate_claims([offline], [[c.token_indices for c in claims]],
                                [stopword_mask(tokens, tokenizer)], aggregation=Aggregation(drop_last_chunk=False))[0]
    np.testing.assert_array_equal([c.score for c in claims], expected)
    # Token Likelihood needs only the sampled token's probability: same as with the 24 HF candidates.
    hf_tl = resolve("token_likelihood").compute(token_arrays(
        [{"generation_id": "h", "output_tokens": hf_monitor.token_ids, "logits_token_ids": hf_monitor.candidates()[0],
          "logits_values": hf_monitor.candidates()[1]}]), {}, {})
    np.testing.assert_allclose(offline, hf_tl[:-1], atol=1e-6)


def test_stream_errors_are_clear(recorded):
    from much_metric.monitor import ClaimMonitor

    tokenizer = recorded[0]
    monitor = ClaimMonitor(tokenizer, "max_likelihood", top_k=20)
    no_logprobs = [{"choices": [{"index": 0, "delta": {"content": "Hi"}, "logprobs": None}]}]
    with pytest.raises(ValueError, match="without logprobs"):
        list(monitor.stream_openai(no_logprobs))
    unknown = [{"choices": [{"index": 0, "logprobs": {"content": [
        {"token": "\ufffd", "bytes": [0xff, 0xfe, 0xfd], "logprob": -0.1, "top_logprobs": []}]}}]}]
    with pytest.raises(ValueError, match="chunk 0, token 0"):
        list(monitor.stream_openai(unknown))


def test_the_cached_token_table_follows_a_grown_vocabulary():
    """The table is cached per tokenizer; a tokenizer that gains a token must not be served the old table."""
    from much_metric.models import load_tokenizer
    from much_metric.monitor._token_ids import cached_token_table

    tokenizer = load_tokenizer("smollm2")
    before = cached_token_table(tokenizer)
    assert cached_token_table(tokenizer) is before  # built once
    assert b"<much_claim>" not in before
    tokenizer.add_special_tokens({"additional_special_tokens": ["<much_claim>"]})
    after = cached_token_table(tokenizer)
    assert after[b"<much_claim>"] == tokenizer.convert_tokens_to_ids("<much_claim>") == len(tokenizer) - 1
