"""A fake OpenAI-compatible generation server: chat completions with ``top_logprobs`` as ``token_id:N`` tokens.

Deterministic: the answer to a question depends only on its text and the request's sampler (so an interrupted and
an uninterrupted run give identical rows). Per position the server draws a full 200-token distribution, returns the
``top_logprobs`` largest log-probabilities in vllm serve's order (the sampled token first, the list cut at
``top_logprobs``), and "samples" like the sampler asked (``top_k``, ``top_p``: HF's and vLLM's order): one of the
first three tokens that the sampler allows, and, when it allows any token (top_k off, top_p 1), sometimes (position 3
of answers whose hash is even) a token outside the head. The answer ends with :data:`EOS` (SmolLM2's ``<|im_end|>``:
tests decode with ``--tokenizer smollm2``), which no earlier position samples.
``script`` is a list of behaviours consumed one per request: ``error500``, ``rate_limit``, ``no_logprobs``,
``bad_request``, ``string_tokens``, ``("sleep", seconds)``, ``trickle`` (the answer one byte every 0.5 s), or a
misbehaviour whose data must never be stored (:data:`BAD_DATA`): ``nan``, ``prob_above_1``, ``sum_above_1``,
``oov_id``, ``duplicate_ids``, ``too_many_tokens``, and rows no sampler of the request produces: ``outside_top_k``
(every position samples rank 21), ``outside_top_p`` (a token past the nucleus), ``stop_without_eos``
(``finish_reason: stop``, no EOS), ``eos_in_middle``.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from typing import Any

import numpy as np

from tests.builder.fake_servers import FakeOpenAI, Trickle

VOCAB = 200
EOS = 2
#: behaviour -> the rule the engine must name when it refuses the row
BAD_DATA = {"nan": "NaN", "prob_above_1": "> 1", "sum_above_1": "sum to", "oov_id": "outside the vocabulary",
            "duplicate_ids": "duplicate candidate ids", "too_many_tokens": "more than max_new_tokens",
            "outside_top_k": "outside top_k=20", "outside_top_p": "outside the top_p=0.9 nucleus",
            "stop_without_eos": "is not an EOS", "eos_in_middle": "before the last token"}


def allowed_ranks(lp: np.ndarray, top_k: int = 20, top_p: float = 0.9) -> int:
    """How many of the most probable tokens the sampler may draw: the top ``top_k`` (0/-1: all), then the nucleus
    of their renormalised distribution (the tokens whose preceding mass is below ``top_p``)."""
    probs = np.sort(np.exp(lp))[::-1]
    if top_k > 0:
        probs = probs[:top_k]
    before = np.concatenate([[0.0], np.cumsum(probs / probs.sum())[:-1]])
    return max(1, int((before < top_p).sum()))


def answer(question: str, top: int, *, max_tokens: int = 500, top_k: int = 20,
           top_p: float = 0.9) -> tuple[list[int], list[np.ndarray], str]:
    """The server's deterministic answer: (tokens, per-position log-probabilities over VOCAB, finish_reason)."""
    seed = int.from_bytes(hashlib.sha256(question.encode()).digest()[:8], "little")
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 9))
    tokens, logprobs = [], []
    for position in range(n):
        logits = rng.normal(0, 3, VOCAB)
        if position == n - 1:  # the model ends its answer: EOS is its most probable token
            logits[EOS] = logits.max() + 2.0
        else:  # and no earlier: EOS least probable, so leaving it out of the ranks moves no token out of the sampler
            logits[EOS] = logits.min() - 1.0
        lp = logits - np.logaddexp.reduce(logits)
        order = [int(i) for i in np.argsort(-lp, kind="stable") if i != EOS or position == n - 1]
        allowed = allowed_ranks(lp, top_k, top_p)
        pick = int(rng.integers(0, 3))
        if position == n - 1:
            token = EOS
        elif position == 3 and seed % 2 == 0 and allowed >= top + 6:
            token = order[top + 5]  # outside the head (only an untruncated sampler draws it)
        else:
            token = order[min(pick, allowed - 1)]
        tokens.append(token)
        logprobs.append(lp)
    finish = "stop"
    if len(tokens) > max_tokens:
        tokens, logprobs, finish = tokens[:max_tokens], logprobs[:max_tokens], "length"
    return tokens, logprobs, finish


class FakeGenerationServer(FakeOpenAI):
    """``dtype``: what ``GET /v1/models`` reports in the served model's card (None: no field, as vllm serve)."""

    def __init__(self, script: list | None = None, *, dtype: str | None = None) -> None:
        super().__init__()
        self.dtype = dtype
        self.gen_script = list(script or [])
        self.in_flight = 0
        self.max_in_flight = 0
        self._count = threading.Lock()

    def handle(self, method: str, path: str, query: dict, body: Any) -> tuple[int, dict, Any]:
        if method == "GET" and path == "/v1/models":
            card = {"id": "fake-model", "object": "model", "owned_by": "vllm", "max_model_len": 2048}
            return 200, {}, {"object": "list", "data": [{**card, "dtype": self.dtype} if self.dtype else card]}
        if method != "POST" or path != "/v1/chat/completions":
            return 404, {}, {"error": {"message": "not found"}}
        with self._count:
            behaviour = self.gen_script.pop(0) if self.gen_script else "ok"
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            return self._answer(body, behaviour)
        finally:
            with self._count:
                self.in_flight -= 1

    def _answer(self, body: dict, behaviour: Any) -> tuple[int, dict, Any]:
        if isinstance(behaviour, tuple) and behaviour[0] == "sleep":
            time.sleep(behaviour[1])
        if behaviour == "error500":
            return 500, {}, {"error": {"message": "server exploded", "type": "server_error"}}
        if behaviour == "rate_limit":
            return 429, {"Retry-After": "0"}, {"error": {"message": "rate limited", "type": "rate_limit"}}
        if behaviour == "bad_request":
            return 400, {}, {"error": {"message": "bad request", "type": "invalid_request_error"}}
        top = int(body["top_logprobs"])
        question = body["messages"][-1]["content"]
        max_tokens = int(body["max_tokens"])
        tokens, logprobs, finish = answer(question, top, max_tokens=max_tokens + 3 * (behaviour == "too_many_tokens"),
                                          top_k=int(body.get("top_k", -1)), top_p=float(body.get("top_p", 1.0)))
        tokens, finish = misplace_tokens(tokens, logprobs, finish, behaviour)

        def name(token: int) -> str:
            return f"tok{token}" if behaviour == "string_tokens" else f"token_id:{token}"

        content = []
        for token, lp in zip(tokens, logprobs, strict=True):
            # as vllm serve 0.32: the sampled token first, then the top ones, the list cut at top_logprobs (a
            # sampled token ranked below the top `top` pushes the last of them out)
            order = [token, *(int(i) for i in np.argsort(-lp, kind="stable")[:top] if int(i) != token)][:top]
            content.append({"token": name(token), "logprob": float(lp[token]), "bytes": None,
                            "top_logprobs": [{"token": name(int(i)), "logprob": float(lp[i]), "bytes": None}
                                             for i in order]})
        _spoil(content, behaviour)
        choice = {"index": 0, "finish_reason": finish,
                  "message": {"role": "assistant", "content": " ".join(f"w{t}" for t in tokens)},
                  "logprobs": None if behaviour == "no_logprobs" else {"content": content}}
        reply = {"id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": body["model"],
                 "choices": [choice],
                 "usage": {"prompt_tokens": 10, "completion_tokens": len(tokens), "total_tokens": 10 + len(tokens)}}
        if behaviour == "trickle":
            return 200, {}, Trickle(json.dumps(reply).encode("utf-8"))
        return 200, {}, reply


def misplace_tokens(tokens: list[int], logprobs: list[np.ndarray], finish: str,
                    behaviour: Any) -> tuple[list[int], str]:
    """Tokens no sampler of the request (MUCH's: top_k 20, top_p 0.9) produces (:data:`BAD_DATA`'s last four); the
    values stay true."""
    tokens = list(tokens)
    orders = [[int(i) for i in np.argsort(-lp, kind="stable") if i != EOS] for lp in logprobs]
    if behaviour == "outside_top_k":
        tokens[:-1] = [order[20] for order in orders[:-1]]
    elif behaviour == "outside_top_p":  # the first token past the nucleus, at the position where it ranks highest
        position = min(range(len(tokens) - 1), key=lambda p: allowed_ranks(logprobs[p]))
        tokens[position] = orders[position][allowed_ranks(logprobs[position]) + 1]
    elif behaviour == "stop_without_eos":  # the most probable word (SmolLM2's ids 0-16 are special tokens)
        tokens[-1] = next(i for i in orders[-1] if i > 16)
        finish = "stop"
    elif behaviour == "eos_in_middle":
        tokens[1] = EOS
    return tokens, finish


def _spoil(content: list[dict[str, Any]], behaviour: Any) -> None:
    """Make position 1 of the answer break one rule (json.dumps writes NaN as the literal ``NaN``)."""
    entry = content[min(1, len(content) - 1)]
    top = entry["top_logprobs"]
    if behaviour == "nan":
        top[3]["logprob"] = float("nan")
    elif behaviour == "prob_above_1":
        top[0]["logprob"] = 0.5
    elif behaviour == "sum_above_1":
        for candidate in top[:5]:
            candidate["logprob"] = -0.1
    elif behaviour == "oov_id":
        top[2]["token"] = "token_id:999999"
    elif behaviour == "duplicate_ids":
        top[4]["token"] = top[5]["token"]
