"""Sampling settings that keep MUCH's definition of the stored probabilities, for the serving engines.

MUCH stores, for every generated token, ``softmax(logits / T)`` over the FULL vocabulary, the 24 largest values and
their ids, not renormalised. Serving engines (vLLM offline or ``vllm serve``, SGLang) return "processed"
log-probabilities: computed after temperature AND after top-k/top-p/min-p masking and repetition/presence/frequency
penalties. Those log-probabilities equal MUCH's values only when no truncation and no penalty is active, so
:class:`SamplingSettings` refuses any configuration that would silently change them, and it sets every knob explicitly
(the checkpoint's own ``generation_config.json`` defaults must not leak in: vLLM is told ``generation_config="vllm"``).

Note: the reference procedure (``--engine hf``) samples with top_p 0.9 / top_k 20 and stores the UNtruncated
probabilities; a serving engine cannot do both at once, so ``vllm``/``openai`` sample from the full tempered
distribution (top_p 1, top_k 0). The recorded probabilities follow MUCH's definition in both cases; the sampled texts
follow a different sampler, which the row's ``sampling`` field records.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from much_dataset import schema

__all__ = ["SamplingSettings", "SamplingSettingsError"]


class SamplingSettingsError(ValueError):
    """A sampling configuration that would change MUCH's probabilities (or is malformed)."""


@dataclasses.dataclass(frozen=True)
class SamplingSettings:
    """Engine-independent sampling settings; every field is checked against MUCH's definition.

    Parameters
    ----------
    temperature : float
        ``T > 0``; the stored values are ``softmax(logits / T)``.
    max_new_tokens : int
        At most this many generated tokens (``>= 1``).
    seed : int
        Per-request seed (engines that accept one).
    logprobs : int
        Candidates returned per token; must be ``>= 24`` (MUCH keeps 24).
    top_k, top_p, min_p : int, float, float
        Must be "off" (0 or -1, 1.0, 0.0): truncation would renormalise the processed log-probabilities.
    repetition_penalty, presence_penalty, frequency_penalty : float
        Must be neutral (1.0, 0.0, 0.0): penalties change the logits before the softmax.
    """

    temperature: float = 1.0
    max_new_tokens: int = 500
    seed: int = 1234
    logprobs: int = schema.TOP_K
    top_k: int = 0
    top_p: float = 1.0
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
        truncating = {"top_k": self.top_k not in (0, -1), "top_p": self.top_p != 1.0, "min_p": self.min_p != 0.0}
        penalised = {"repetition_penalty": self.repetition_penalty != 1.0,
                     "presence_penalty": self.presence_penalty != 0.0,
                     "frequency_penalty": self.frequency_penalty != 0.0}
        for name, active in {**truncating, **penalised}.items():
            if active:
                kind = "truncates the distribution" if name in truncating else "changes the logits"
                raise SamplingSettingsError(
                    f"{name}={getattr(self, name)} {kind}: the engine's processed log-probabilities would no longer "
                    f"be softmax(logits / T) over the full vocabulary (MUCH's definition); leave it off")

    def to_record(self) -> dict[str, Any]:
        """The settings as a JSON-able dict (stored in every row's ``sampling`` field)."""
        return dataclasses.asdict(self)

    def vllm_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of ``vllm.SamplingParams`` (every knob explicit, so no default can leak in)."""
        return {"n": 1, "temperature": self.temperature, "max_tokens": self.max_new_tokens, "seed": self.seed,
                "logprobs": self.logprobs, "top_k": 0 if self.top_k in (0, -1) else self.top_k, "top_p": self.top_p,
                "min_p": self.min_p, "repetition_penalty": self.repetition_penalty,
                "presence_penalty": self.presence_penalty, "frequency_penalty": self.frequency_penalty}

    def openai_body(self) -> dict[str, Any]:
        """Request fields of an OpenAI-compatible ``/v1/chat/completions`` call (vLLM/SGLang extras included).

        ``top_logprobs`` is ``logprobs + 1``: ``vllm serve`` (0.32) lists the sampled token first and cuts the list
        at ``top_logprobs``, so when the sampled token ranks below the top ``logprobs`` a request for exactly
        ``logprobs`` loses the last of them (found by the parity test against the real server). One more keeps them
        all; the server needs ``--max-logprobs logprobs + 1`` (25).
        """
        return {"temperature": self.temperature, "max_tokens": self.max_new_tokens, "seed": self.seed,
                "logprobs": True, "top_logprobs": self.logprobs + 1, "top_p": self.top_p, "top_k": -1,
                "min_p": self.min_p, "repetition_penalty": self.repetition_penalty,
                "presence_penalty": self.presence_penalty, "frequency_penalty": self.frequency_penalty,
                "return_tokens_as_token_ids": True, "skip_special_tokens": False}
