"""Generation configs and the reference's identifiers (docs/reference-behaviour.md#config-ids, #question-id,
#generation-configs).

``GenerationConfig.id`` reproduces the reference's config IDs bit for bit: every field (defaults included), sorted by
name, rendered as ``name=str(value)\\n`` lines, MD5, URL-safe base64, first 22 characters. The eight MUCH configs and
the twelve Mu-SHROOM configs of the reference are listed as constants so the SLURM script and the tests can check
them.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import math
import numbers
from typing import Any

from much_dataset.params import BOOL, POSITIVE_INT, Interval, check_params

__all__ = [
    "GenerationConfig",
    "hash_id",
    "question_id",
    "MUCH_CONFIGS",
    "MUCH_CONFIG_IDS",
    "MUSHROOM_LANG_SEED",
    "MUSHROOM_SKIPPED_MODELS",
    "MUSHROOM_MODEL_MAP",
]


def hash_id(text: str) -> str:
    """MD5 of the UTF-8 bytes, URL-safe base64, first 22 characters (the reference's ID function)."""
    return base64.urlsafe_b64encode(hashlib.md5(text.encode("utf-8")).digest()).decode("ascii")[:22]


_FINITE = Interval(numbers.Real, -math.inf, math.inf, closed="neither")
#: Every field but ``model_name`` and its constraint (``temperature`` > 0 unless greedy is checked after).
_CONSTRAINTS = {"eager": BOOL, "brief": BOOL, "greedy": BOOL, "seed": Interval(numbers.Integral, None, None),
                "temperature": _FINITE, "top_p": Interval(numbers.Real, 0, 1, closed="right"),
                "top_k": Interval(numbers.Integral, 0, None), "max_new_tokens": POSITIVE_INT}


@dataclasses.dataclass(frozen=True)
class GenerationConfig:
    """The reference's ``GenerationConfig`` (docs/reference-behaviour.md#generation-config-defaults); field names and
    defaults are part of the ID."""

    model_name: str = "meta-llama/Llama-3.2-3B-Instruct"
    eager: bool = False
    brief: bool = True
    greedy: bool = False
    seed: int = 1234
    temperature: float = 1.0
    top_p: float = 0.9
    top_k: int = 20
    max_new_tokens: int = 500

    def __post_init__(self) -> None:
        if not isinstance(self.model_name, str) or not self.model_name:
            raise ValueError(f"model_name must be a non-empty string, got {self.model_name!r}")
        # each field alone, by its constraint: the message names the one that is wrong
        check_params({f.name: getattr(self, f.name) for f in dataclasses.fields(self)}, _CONSTRAINTS,
                     owner="GenerationConfig")
        # str() of the value enters the hash: 1 and 1.0 would give different IDs, so normalise the float fields.
        for name in ("temperature", "top_p"):
            object.__setattr__(self, name, float(getattr(self, name)))
        if self.temperature <= 0 and not self.greedy:
            raise ValueError(f"temperature must be > 0 for sampling, got {self.temperature}")

    @property
    def id(self) -> str:
        """The reference config ID (docs/reference-behaviour.md#config-ids)."""
        fields = sorted(dataclasses.asdict(self).items())
        return hash_id("".join(f"{name}={value}\n" for name, value in fields))

    def to_record(self) -> dict[str, Any]:
        """A ``configs.jsonl`` / ``MUCH-configs`` row: the fields plus ``generation_config`` (the ID)."""
        return {**dataclasses.asdict(self), "generation_config": self.id}

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> GenerationConfig:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in record.items() if k in names})


def question_id(lang: str, prompt: str, wiki_url: str) -> str:
    """Question ID (docs/reference-behaviour.md#question-id): hash of the pydantic JSON of ``{lang, prompt, wiki_url}``
    in that order.

    pydantic's ``model_dump_json`` is compact and keeps non-ASCII characters, as ``json.dumps`` does with these
    options (for strings the two agree).
    """
    payload = json.dumps({"lang": lang, "prompt": prompt, "wiki_url": wiki_url}, ensure_ascii=False,
                         separators=(",", ":"))
    return hash_id(payload)


_MODELS = (
    "meta-llama/Llama-3.2-3B-Instruct",
    "meta-llama/Llama-3.1-8B-Instruct",
    "mistralai/Ministral-8B-Instruct-2410",
    "google/gemma-3-4b-it",
)
#: The 8 MUCH configs (docs/reference-behaviour.md#generation-configs), in the order of the reference's config table.
MUCH_CONFIGS: tuple[GenerationConfig, ...] = tuple(
    GenerationConfig(model_name=model, temperature=temperature) for model in _MODELS for temperature in (1.0, 0.7)
)
#: Their reference IDs, same order (docs/reference-behaviour.md#generation-configs; checked by
#: tests/builder/test_configs.py).
MUCH_CONFIG_IDS: tuple[str, ...] = (
    "iNPhBxMXcn6uNgZtdDG7xQ", "bESSWQcqIaYZslTy7sy1Hg", "HmRDWrH188fefK4uXNC_ew", "h_RExrbMa9DSQoKjgXVAmw",
    "YRYI5VveUmgxhdPi8apIgA", "ErZg41d6uehYNo-QcoCVAQ", "Q6U-toJrtxVpeYhI11BKiQ", "XRKCmRjxLGlxWmIyqYQVCA",
)

#: Mu-SHROOM configs encode the language in ``seed`` (docs/reference-behaviour.md#generation-configs).
MUSHROOM_LANG_SEED: dict[str, int] = {"en": 0, "fr": 1, "es": 2, "de": 3}
#: Models the reference's ``import-mushroom`` skips (docs/reference-behaviour.md#mushroom-import).
MUSHROOM_SKIPPED_MODELS: frozenset[str] = frozenset({"TheBloke/SauerkrautLM-7B-v1-GGUF",
                                                     "bofenghuang/vigogne-2-13b-chat"})
#: Model ids the reference maps to another hub id before loading (docs/reference-behaviour.md#mushroom-import).
MUSHROOM_MODEL_MAP: dict[str, str] = {"TheBloke/Mistral-7B-Instruct-v0.2-GGUF": "mistralai/Mistral-7B-Instruct-v0.2"}
