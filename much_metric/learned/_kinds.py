"""The detector kinds, in one table: what each kind reads, its default hyper-parameters, the exact shape of each
of its parameters, and how it turns standardised inputs into token logits.

Every place that depends on the kind (features, training, the folder check, inference, the CLI's choices) reads
:data:`KINDS`; adding a kind is adding one entry here and its torch module in :mod:`much_metric.learned._torch`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from much_metric.learned.features import FEATURES, SEQUENCE_INPUTS, sequence_inputs, token_features

__all__ = ["KINDS", "MAX_HIDDEN", "Kind", "kind_of"]

#: Largest GRU state accepted (a folder asking for more is refused before anything is allocated).
MAX_HIDDEN = 1024


def _linear_shapes(n_inputs: int, hidden: int) -> dict[str, tuple[int, ...]]:
    return {"linear.weight": (1, n_inputs), "linear.bias": (1,)}


def _sequence_shapes(n_inputs: int, hidden: int) -> dict[str, tuple[int, ...]]:
    return {"gru.weight_ih_l0": (3 * hidden, n_inputs), "gru.weight_hh_l0": (3 * hidden, hidden),
            "gru.bias_ih_l0": (3 * hidden,), "gru.bias_hh_l0": (3 * hidden,),
            "read_out.weight": (1, hidden), "read_out.bias": (1,)}


def _linear_logits(weights: Mapping[str, np.ndarray], inputs: np.ndarray, offsets: np.ndarray,
                   hidden: int) -> np.ndarray:
    """``w . x + b`` per token, numpy only (float64)."""
    return inputs.astype(np.float64) @ weights["linear.weight"][0].astype(np.float64) + float(weights["linear.bias"][0])


def _torch_logits(module: str) -> Callable[..., np.ndarray]:
    def logits(weights: Mapping[str, np.ndarray], inputs: np.ndarray, offsets: np.ndarray, hidden: int) -> np.ndarray:
        from much_metric.learned import _torch  # torch only when a torch kind scores

        return _torch.logits_of(module, weights, inputs, offsets, hidden=hidden)

    return logits


@dataclass(frozen=True)
class Kind:
    """One detector kind.

    ``inputs(data)`` -> ``(N_tokens, len(input_names))`` per-token inputs; ``defaults``: hyper-parameters of the
    estimator; ``shapes(n_inputs, hidden)``: every parameter's exact shape; ``logits(weights, inputs, offsets,
    hidden)``: flat token logits of standardised inputs; ``module``: the class name in
    :mod:`much_metric.learned._torch`; ``needs_torch``: whether scoring needs torch.
    """

    name: str
    inputs: Callable[[Any], np.ndarray]
    input_names: tuple[str, ...]
    defaults: Mapping[str, Any]
    shapes: Callable[[int, int], dict[str, tuple[int, ...]]]
    logits: Callable[..., np.ndarray]
    module: str
    needs_torch: bool


KINDS: dict[str, Kind] = {
    "linear": Kind("linear", token_features, FEATURES,
                   {"learning_rate": 0.02, "batch_size": 64, "max_epochs": 60, "patience": 5},
                   _linear_shapes, _linear_logits, "LinearModule", needs_torch=False),
    "sequence": Kind("sequence", sequence_inputs, SEQUENCE_INPUTS,
                     {"learning_rate": 0.005, "batch_size": 32, "max_epochs": 15, "patience": 3, "hidden": 32},
                     _sequence_shapes, _torch_logits("SequenceModule"), "SequenceModule", needs_torch=True),
}


def kind_of(name: Any) -> Kind:
    """The :class:`Kind` named ``name``; ``ValueError`` naming the known kinds otherwise."""
    if not isinstance(name, str) or name not in KINDS:
        raise ValueError(f"detector kind must be one of {sorted(KINDS)}, got {name!r}")
    return KINDS[name]
