"""Serving engines of ``python -m builder generate --engine vllm|openai`` (``hf``, the reference, is in generate.py).

Both return the same rows as the ``hf`` engine: per generated token the top-24 ``softmax(logits / T)`` values and
ids (the engine's "processed" log-probabilities, exponentiated; :class:`builder.sampling.SamplingSettings` guarantees
that they are MUCH's values), sorted descending, not renormalised. When the sampled token is not among the 24, its
(id, probability) is appended as a 25th candidate: the reference extends the list down to the sampled token, which
an engine cannot do, and the filter step trashes such rows either way (``sampled_outside_top_k``).

Every row also records ``engine``, ``engine_version`` and ``sampling`` (the settings' dict).
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from builder.sampling import SamplingSettings
from much_dataset import schema

__all__ = ["candidates_row", "vllm_generate", "openai_generate", "load_vllm", "OpenAIGenerationFailed"]

_TOKEN_ID = re.compile(r"^token_id:(-?\d+)$")


class OpenAIGenerationFailed(RuntimeError):
    """No valid answer from the server within the allowed attempts (or a non-retryable error)."""


def candidates_row(sampled: int, sampled_logprob: float, top: Sequence[tuple[int, float]], *,
                   top_k: int = schema.TOP_K) -> tuple[list[int], list[float]]:
    """Ids and probabilities of one position from an engine's (id, logprob) candidates.

    Sorted by decreasing probability (ties by id, so the order does not depend on the engine's dict order), the
    first ``top_k`` kept, and ``(sampled, exp(sampled_logprob))`` appended when the sampled id is not among them.
    """
    ordered = sorted(((int(i), float(lp)) for i, lp in top), key=lambda c: (-c[1], c[0]))[:top_k]
    if len(ordered) < top_k:
        raise ValueError(f"the engine returned {len(ordered)} candidates, {top_k} expected")
    ids = [i for i, _ in ordered]
    probs = [math.exp(lp) for _, lp in ordered]
    if int(sampled) not in ids:
        ids.append(int(sampled))
        probs.append(math.exp(float(sampled_logprob)))
    return ids, probs


# ---------------------------------------------------------------------------------------------------------- vLLM

def load_vllm(model: str, *, settings: SamplingSettings, dtype: str = "float32", **engine_kwargs: Any):
    """An offline ``vllm.LLM`` returning processed (post-temperature) log-probabilities, 24 per token.

    ``generation_config="vllm"`` keeps the checkpoint's sampling defaults out; ``engine_kwargs`` go to ``LLM``
    (``tensor_parallel_size``, ``data_parallel_size``, ``gpu_memory_utilization``, ...).
    """
    from vllm import LLM

    return LLM(model=model, dtype=dtype, logprobs_mode="processed_logprobs", max_logprobs=settings.logprobs,
               generation_config="vllm", seed=settings.seed, **engine_kwargs)


def vllm_generate(llm: Any, prompts: Sequence[Sequence[int]], settings: SamplingSettings) -> list[dict[str, Any]]:
    """Generate ``prompts`` (token ids of the chat-formatted prompts, as the ``hf`` engine encodes them: no special
    tokens added) in one batched call.

    Returns, per prompt, ``output_tokens``, ``output`` (decoded with special tokens), ids/probs per token and
    ``finish_reason``.
    """
    from vllm import SamplingParams

    params = SamplingParams(**settings.vllm_kwargs(), skip_special_tokens=False)
    outputs = llm.generate([{"prompt_token_ids": [int(t) for t in p]} for p in prompts], params,
                           use_tqdm=False)
    results = []
    for output in outputs:
        completion = output.outputs[0]
        tokens = [int(t) for t in completion.token_ids]
        ids, probs = [], []
        for token, position in zip(tokens, completion.logprobs, strict=True):
            row_ids, row_probs = candidates_row(token, position[token].logprob,
                                                [(i, lp.logprob) for i, lp in position.items()])
            ids.append(row_ids)
            probs.append(row_probs)
        results.append({"output_tokens": tokens, "output": completion.text, "ids": ids, "probs": probs,
                        "finish_reason": completion.finish_reason})
    return results


# -------------------------------------------------------------------------------------------------------- OpenAI

def _token_id(entry: Any) -> int:
    match = _TOKEN_ID.match(entry.token)
    if match is None:
        raise ValueError(f"token {entry.token!r} is not 'token_id:N': the server must honour "
                         "return_tokens_as_token_ids (vLLM and SGLang do)")
    return int(match.group(1))


def _parse_choice(choice: Any) -> dict[str, Any]:
    content = getattr(choice.logprobs, "content", None) if choice.logprobs is not None else None
    if not content:
        raise ValueError("the answer has no logprobs")
    tokens, ids, probs = [], [], []
    for entry in content:
        token = _token_id(entry)
        row_ids, row_probs = candidates_row(token, entry.logprob,
                                            [(_token_id(c), c.logprob) for c in entry.top_logprobs])
        tokens.append(token)
        ids.append(row_ids)
        probs.append(row_probs)
    return {"output_tokens": tokens, "output": choice.message.content or "", "ids": ids, "probs": probs,
            "finish_reason": choice.finish_reason}


def _retryable(error: Exception) -> bool:
    # The judges' classification: transient server/network trouble and malformed answers are retried.
    import openai

    if isinstance(error, openai.RateLimitError | openai.APITimeoutError | openai.APIConnectionError
                  | openai.InternalServerError | openai.APIResponseValidationError):
        return True
    if isinstance(error, ValueError | AttributeError | TypeError | KeyError) and not isinstance(error, openai.APIError):
        return True
    return isinstance(error, openai.APIStatusError) and error.status_code >= 500


def openai_generate(client: Any, model: str, messages: list[dict[str, str]], settings: SamplingSettings, *,
                    max_attempts: int = 5, backoff: float = 2.0, max_backoff: float = 60.0,
                    sleep: Callable[[float], None] = time.sleep) -> dict[str, Any]:
    """One chat completion with 24 log-probabilities per token; retried like the judges' calls.

    Retries (after ``backoff * 2**k`` seconds, capped at ``max_backoff``) on rate limits, timeouts, connection and
    5xx errors and malformed answers; other errors fail at once. Raises :class:`OpenAIGenerationFailed`.
    """
    if max_attempts < 1:
        raise ValueError(f"max_attempts must be >= 1, got {max_attempts}")
    body = settings.openai_body()
    extra = {key: body.pop(key) for key in ("top_k", "min_p", "repetition_penalty", "return_tokens_as_token_ids",
                                             "skip_special_tokens")}
    reason = "no attempt"
    for attempt in range(1, max_attempts + 1):
        try:
            response = client.chat.completions.create(model=model, messages=messages, extra_body=extra, **body)
            if not response.choices:
                raise ValueError("no choice in the answer")
            return _parse_choice(response.choices[0])
        except Exception as error:  # noqa: BLE001 -- classified just below
            if not _retryable(error):
                raise OpenAIGenerationFailed(f"{type(error).__name__}: {error}") from error
            reason = f"{type(error).__name__}: {error}"
        if attempt < max_attempts:
            sleep(min(max_backoff, backoff * 2 ** (attempt - 1)))
    raise OpenAIGenerationFailed(f"no valid answer after {max_attempts} attempts; last: {reason}")


def openai_map(work: Callable[[Any], Any], items: Sequence[Any], *, workers: int):
    """Yield ``(item, result_or_exception)`` as they finish, at most ``workers`` calls in flight."""
    from concurrent.futures import FIRST_COMPLETED, wait

    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    with ThreadPoolExecutor(max_workers=workers) as pool:
        pending = {}
        iterator = iter(items)
        for item in iterator:
            pending[pool.submit(work, item)] = item
            if len(pending) >= workers:
                break
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                item = pending.pop(future)
                error = future.exception()
                yield item, (error if error is not None else future.result())
                nxt = next(iterator, None)
                if nxt is not None:
                    pending[pool.submit(work, nxt)] = nxt
