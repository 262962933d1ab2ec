"""The :class:`InternalsEngine` protocol of ``python -m builder internals``, its options, and the engine table.

As :mod:`builder.generation.engine` does for generation: an engine is built from :class:`InternalsEngineOptions`
(never from ``argparse.Namespace``) by :func:`load_engine`, exposes the observer model's text ``config`` and its
``weights`` sha256 (the pack's identity), is started for the pack's :class:`~builder.internals_forward.InternalsOptions`
by :meth:`~InternalsEngine.prepare`, and turns rows into their pack arrays with :meth:`~InternalsEngine.forward`
(one result or exception per row, the run goes on). :data:`ENGINES` names each engine's module and class, imported
only when it is asked for (vLLM is imported by its own module alone).
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from builder.errors import BuilderError
from builder.internals_forward import InternalsOptions

__all__ = ["ENGINES", "EngineEntry", "InternalsEngine", "InternalsEngineOptions", "load_engine"]


@dataclasses.dataclass(frozen=True)
class InternalsEngineOptions:
    """How to reach the observer model; fields an engine does not use are ignored by it."""

    model: str
    device: str | None = None  # transformers (vLLM picks its own)
    dtype: str | None = None  # torch dtype name (default: float32 on CPU, bf16 on GPU; vLLM: "auto")


class InternalsEngine(Protocol):
    """Stored rows in, their pack arrays (or a per-row exception) out."""

    #: The observer model's text config (``num_hidden_layers``, ``num_attention_heads``, ``hidden_size``).
    config: Any
    #: sha256 of the model's weights (part of the pack's identity).
    weights: str

    def prepare(self, options: InternalsOptions) -> None:
        """Start or check what the pass needs for ``options`` (vLLM: the engine built for its layers)."""
        ...

    def forward(self, rows: Sequence[dict[str, Any]], options: InternalsOptions,
                basis: dict[str, np.ndarray] | None = None) -> list[Any]:
        """Per row, in order: ``(arrays, max_abs_diff, hidden errors[, manifest fields])`` or the exception that
        row raised."""
        ...


@dataclasses.dataclass(frozen=True)
class EngineEntry:
    """One ``--engine`` of the internals step: where its class lives and what it can store."""

    module: str
    backend: str
    #: its pass returns attention weights (eager attention); False = hidden states only
    attention: bool


#: ``--engine``: ``transformers`` = one eager-attention forward pass per row (attention and hidden states);
#: ``vllm`` = vLLM's hidden-state extraction, batched (hidden states only: :mod:`builder.internals_vllm`).
ENGINES: dict[str, EngineEntry] = {
    "transformers": EngineEntry("builder.internals_forward", "TransformersInternals", attention=True),
    "vllm": EngineEntry("builder.internals_vllm", "VLLMInternals", attention=False),
}


def load_engine(name: str, options: InternalsEngineOptions) -> InternalsEngine:
    """The engine ``name`` of :data:`ENGINES`, built from ``options`` (its module imported now)."""
    if name not in ENGINES:
        raise BuilderError(f"--engine must be one of {tuple(ENGINES)}, got {name!r}")
    if not isinstance(options, InternalsEngineOptions):
        raise TypeError(f"load_engine: options must be an InternalsEngineOptions, got {type(options).__name__}")
    entry = ENGINES[name]
    return getattr(importlib.import_module(entry.module), entry.backend)(options)
