"""Sampling settings of the serving engines: MUCH's sampler, and only what keeps the stored values MUCH's.

MUCH stores, for every generated token, ``softmax(logits / T)`` over the FULL vocabulary (the 24 largest values and
their ids, not renormalised), while it samples from that distribution truncated to top_k 20 / top_p 0.9. A serving
engine returns one of two kinds of log-probabilities:

* "processed" (vLLM's ``processed_logprobs``): after temperature AND after top-k/top-p masking and penalties. With
  MUCH's sampler they are the renormalised truncated distribution, not MUCH's values: never used.
* "raw" (vLLM's default ``raw_logprobs``): ``log_softmax`` of the model's logits, before temperature, penalties and
  truncation. At T = 1 these are MUCH's values exactly while the sampler stays MUCH's.

At T != 1 the engines serve a *tempered model*: the model's output logits are multiplied by ``logit_scale = 1 / T``
(vLLM applies a config's ``logit_scale`` inside the model's logits layer; the offline engine sets it with
``hf_overrides``, a server is started with ``--hf-overrides '{"logit_scale": ...}'``). Its raw log-probabilities are
then ``log_softmax(logits / T)`` (MUCH's values, to float rounding) and the request asks for temperature 1, so the
sampler draws from ``softmax(logits / T)`` truncated to top-k/top-p: MUCH's sampler. :attr:`engine_temperature` and
:attr:`logit_scale` say what is sent where.

What stays refused, because it would change the stored values or lose some of them: repetition/presence/frequency
penalties (they change the logits before the softmax, and the raw values would no longer describe what was sampled),
fewer than 24 log-probabilities (MUCH keeps 24), T <= 0 (MUCH samples). ``min_p`` is refused too (MUCH's sampler
has none; it would change the sampled distribution, not the stored values).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from much_dataset import schema

__all__ = ["SamplingSettings", "SamplingSettingsError", "MUCH_TOP_P", "MUCH_TOP_K"]

#: MUCH's sampler (the reference's GenerationConfig defaults).
MUCH_TOP_P = 0.9
MUCH_TOP_K = 20


class SamplingSettingsError(ValueError):
    """A sampling configuration that would change MUCH's stored probabilities (or is malformed)."""


@dataclasses.dataclass(frozen=True)
class SamplingSettings:
    """Engine-independent sampling settings; every field is checked against MUCH's definition.

    Parameters
    ----------
    temperature : float
        ``T > 0``; the stored values are ``softmax(logits / T)``, the sampler draws from it.
    max_new_tokens : int
        At most this many generated tokens (``>= 1``).
    seed : int
        Per-request seed (engines that accept one).
    logprobs : int
        Candidates returned per token; must be ``>= 24`` (MUCH keeps 24).
    top_k : int
        Sampler truncation, MUCH's 20 by default (0 or -1: off). Any value keeps the stored (raw) values MUCH's;
        with top_k <= 24 every sampled token is inside the stored 24 by construction.
    top_p : float
        Sampler nucleus, MUCH's 0.9 by default, in (0, 1].
    min_p : float
        Must be 0 (MUCH's sampler has none).
    repetition_penalty, presence_penalty, frequency_penalty : float
        Must be neutral (1.0, 0.0, 0.0): penalties change the logits before the softmax.

    Examples
    --------
    MUCH's sampler by default; the temperature goes into the model (``logit_scale = 1 / T``), the engine samples at
    1.0, so the stored probabilities are the tempered softmax:

    >>> from builder.generation.sampling import SamplingSettings, SamplingSettingsError
    >>> s = SamplingSettings(temperature=0.7, seed=1)
    >>> (s.top_k, s.top_p, s.engine_temperature, round(s.logit_scale, 6))
    (20, 0.9, 1.0, 1.428571)

    A setting that would make the stored values differ from MUCH's cannot be built at all:

    >>> SamplingSettings(repetition_penalty=1.1)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    builder.generation.sampling.SamplingSettingsError: repetition_penalty=1.1 changes the logits before the softmax: ...
    >>> try:
    ...     SamplingSettings(logprobs=5)
    ... except SamplingSettingsError as error:
    ...     print(error)
    logprobs=5: MUCH stores 24 probabilities per token, ask for at least 24
    """

    temperature: float = 1.0
    max_new_tokens: int = 500
    seed: int = 1234
    logprobs: int = schema.TOP_K
    top_k: int = MUCH_TOP_K
    top_p: float = MUCH_TOP_P
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0

    def __post_init__(self) -> None:
        for name in ("temperature", "top_p", "min_p", "repetition_penalty", "presence_penalty", "frequency_penalty"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                raise SamplingSettingsError(f"{name} must be a finite number, got {value!r}")
            object.__setattr__(self, name, float(value))
        for name in ("max_new_tokens", "seed", "logprobs", "top_k"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise SamplingSettingsError(f"{name} must be an int, got {value!r}")
        if self.temperature <= 0:
            raise SamplingSettingsError(f"temperature must be > 0 (MUCH samples), got {self.temperature}")
        if self.max_new_tokens < 1:
            raise SamplingSettingsError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if self.logprobs < schema.TOP_K:
            raise SamplingSettingsError(f"logprobs={self.logprobs}: MUCH stores {schema.TOP_K} probabilities per "
                                        f"token, ask for at least {schema.TOP_K}")
        if self.top_k < -1:
            raise SamplingSettingsError(f"top_k must be >= 1, or 0/-1 for off, got {self.top_k}")
        if not 0 < self.top_p <= 1:
            raise SamplingSettingsError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.min_p != 0.0:
            raise SamplingSettingsError(f"min_p={self.min_p}: MUCH's sampler has no min-p (top_k and top_p only); "
                                        "leave it 0")
        for name, neutral in (("repetition_penalty", 1.0), ("presence_penalty", 0.0), ("frequency_penalty", 0.0)):
            if getattr(self, name) != neutral:
                raise SamplingSettingsError(
                    f"{name}={getattr(self, name)} changes the logits before the softmax: the stored values would no "
                    "longer be softmax(logits / T) of the model that sampled; leave it neutral")

    @property
    def logit_scale(self) -> float:
        """What the served model multiplies its logits by (``1 / T``): its raw log-probabilities are MUCH's values."""
        return 1.0 / self.temperature

    @property
    def engine_temperature(self) -> float:
        """The temperature sent with each request: 1, since the served model is already tempered."""
        return 1.0

    def to_record(self) -> dict[str, Any]:
        """The settings as a JSON-able dict (stored in every row's ``sampling`` field)."""
        return dataclasses.asdict(self)

    def vllm_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of ``vllm.SamplingParams`` for a model served with :attr:`logit_scale` (every knob
        explicit, so no default can leak in)."""
        return {"n": 1, "temperature": self.engine_temperature, "max_tokens": self.max_new_tokens, "seed": self.seed,
                "logprobs": self.logprobs, "top_k": 0 if self.top_k in (0, -1) else self.top_k, "top_p": self.top_p,
                "min_p": 0.0, "repetition_penalty": 1.0, "presence_penalty": 0.0, "frequency_penalty": 0.0}

    def openai_body(self) -> dict[str, Any]:
        """Request fields of an OpenAI-compatible ``/v1/chat/completions`` call to a server started with
        :attr:`logit_scale` (vLLM/SGLang extras included).

        ``top_logprobs`` is ``logprobs + 1``: ``vllm serve`` (0.32) lists the sampled token first and cuts the list
        at ``top_logprobs``, so when the sampled token ranks below the top ``logprobs`` a request for exactly
        ``logprobs`` loses the last of them (found by the parity test against the real server). One more keeps them
        all; the server needs ``--max-logprobs logprobs + 1`` (25).
        """
        return {"temperature": self.engine_temperature, "max_tokens": self.max_new_tokens, "seed": self.seed,
                "logprobs": True, "top_logprobs": self.logprobs + 1, "top_p": self.top_p,
                "top_k": -1 if self.top_k in (0, -1) else self.top_k, "min_p": 0.0, "repetition_penalty": 1.0,
                "presence_penalty": 0.0, "frequency_penalty": 0.0, "return_tokens_as_token_ids": True,
                "skip_special_tokens": False}
