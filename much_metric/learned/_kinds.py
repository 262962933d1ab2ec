"""The detector kinds, in one table: what each kind reads, its default hyper-parameters, the exact shape of each
of its parameters, how it is trained, and how it turns standardised inputs into token logits.

Every place that depends on the kind (features, training, the folder check, inference, the CLI's choices) reads
:data:`KINDS`; adding a kind is adding one entry here and, for a torch kind, its module in
:mod:`much_metric.learned._torch`.

Kinds that read an internals pack (``probe``, ``claim_head``; ``needs_internals``) name their inputs from the
observer record of the folder's config (``config["internals"]``: the pack's model, layers, heads, hidden size, and
the hidden layer or attention window read), so one kind serves every observer model.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from much_metric.learned import internals as _internals
from much_metric.learned.features import FEATURES, SEQUENCE_INPUTS, sequence_inputs, token_features

__all__ = ["KINDS", "MAX_HIDDEN", "Kind", "kind_of"]

#: Largest GRU / encoder state accepted (a folder asking for more is refused before anything is allocated).
MAX_HIDDEN = 1024


def _linear_shapes(n_inputs: int, hyper: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
    return {"linear.weight": (1, n_inputs), "linear.bias": (1,)}


def _sequence_shapes(n_inputs: int, hyper: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
    hidden = int(hyper["hidden"])
    return {"gru.weight_ih_l0": (3 * hidden, n_inputs), "gru.weight_hh_l0": (3 * hidden, hidden),
            "gru.bias_ih_l0": (3 * hidden,), "gru.bias_hh_l0": (3 * hidden,),
            "read_out.weight": (1, hidden), "read_out.bias": (1,)}


def _head_shapes(n_inputs: int, hyper: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
    """The claim head: input projection, ``layers`` transformer encoder layers (feed-forward 2 x hidden), read-out
    (the names of :class:`much_metric.learned._torch.ClaimHeadModule`'s ``state_dict``)."""
    h = int(hyper["hidden"])
    shapes = {"project.weight": (h, n_inputs), "project.bias": (h,)}
    for index in range(int(hyper["layers"])):
        prefix = f"encoder.{index}."
        shapes.update({prefix + "self_attn.in_proj_weight": (3 * h, h), prefix + "self_attn.in_proj_bias": (3 * h,),
                       prefix + "self_attn.out_proj.weight": (h, h), prefix + "self_attn.out_proj.bias": (h,),
                       prefix + "linear1.weight": (2 * h, h), prefix + "linear1.bias": (2 * h,),
                       prefix + "linear2.weight": (h, 2 * h), prefix + "linear2.bias": (h,),
                       prefix + "norm1.weight": (h,), prefix + "norm1.bias": (h,),
                       prefix + "norm2.weight": (h,), prefix + "norm2.bias": (h,)})
    shapes.update({"read_out.weight": (1, h), "read_out.bias": (1,)})
    return shapes


def _linear_logits(weights: Mapping[str, np.ndarray], inputs: np.ndarray, offsets: np.ndarray,
                   hyper: Mapping[str, Any], segments: np.ndarray | None = None) -> np.ndarray:
    """``w . x + b`` per token, numpy only (float64)."""
    return inputs.astype(np.float64) @ weights["linear.weight"][0].astype(np.float64) + float(weights["linear.bias"][0])


def _torch_logits(module: str) -> Callable[..., np.ndarray]:
    def logits(weights: Mapping[str, np.ndarray], inputs: np.ndarray, offsets: np.ndarray, hyper: Mapping[str, Any],
               segments: np.ndarray | None = None) -> np.ndarray:
        from much_metric.learned import _torch  # torch only when a torch kind scores

        return _torch.logits_of(module, weights, inputs, (offsets, segments), hyper)

    return logits


def _probability_only(function: Callable[[Any], np.ndarray]) -> Callable[[Any, Any], np.ndarray]:
    def inputs(data: Any, context: Any = None) -> np.ndarray:
        return function(data)

    return inputs


@dataclass(frozen=True)
class Kind:
    """One detector kind.

    ``inputs(data, context)`` -> ``(N_tokens, n_inputs)`` per-token inputs (``context``: an
    :class:`~much_metric.learned.internals.Observed` for the kinds that read a pack, else None); ``input_names``:
    the column names, or a function of the observer record for the kinds that read a pack; ``defaults``:
    hyper-parameters of the estimator; ``shapes(n_inputs, hyperparameters)``: every parameter's exact shape;
    ``logits(weights, inputs, offsets, hyperparameters, segments)``: flat token logits of standardised inputs;
    ``module``: the class name in :mod:`much_metric.learned._torch`; ``needs_torch``: whether scoring needs torch;
    ``needs_internals``: whether it reads an internals pack (``reads``: ``"hidden"`` or ``"attention"``);
    ``trainer``: ``"claims"`` (Adam on the claim loss through the aggregator) or ``"tokens"`` (scikit-learn's
    logistic regression on the claims' token labels); ``segmented``: the module attends within claims only;
    ``fixed``: hyper-parameters recorded in the folder but not set by the estimator.
    """

    name: str
    inputs: Callable[[Any, Any], np.ndarray]
    input_names: tuple[str, ...] | Callable[[Mapping[str, Any]], tuple[str, ...]]
    defaults: Mapping[str, Any]
    shapes: Callable[[int, Mapping[str, Any]], dict[str, tuple[int, ...]]]
    logits: Callable[..., np.ndarray]
    module: str
    needs_torch: bool
    needs_internals: bool = False
    reads: str = ""
    trainer: str = "claims"
    segmented: bool = False
    fixed: Mapping[str, Any] = field(default_factory=dict)

    @property
    def hyperparameters(self) -> dict[str, Any]:
        """Every hyper-parameter recorded in a folder: the estimator's (``defaults``) and the kind's ``fixed`` ones
        (the claim head's batch size, 4 attention heads, and the whole attention window of the pack)."""
        return {**self.fixed, **self.defaults}

    def names(self, observer: Mapping[str, Any] | None = None) -> tuple[str, ...]:
        """The input column names (of ``observer``, the config's ``internals`` record, for a kind reading a pack)."""
        if callable(self.input_names):
            if observer is None:
                raise ValueError(f"a {self.name} detector's inputs depend on the internals pack it was trained on")
            return self.input_names(observer)
        return self.input_names


KINDS: dict[str, Kind] = {
    "linear": Kind("linear", _probability_only(token_features), FEATURES,
                   {"learning_rate": 0.02, "batch_size": 64, "max_epochs": 60, "patience": 5},
                   _linear_shapes, _linear_logits, "LinearModule", needs_torch=False),
    "sequence": Kind("sequence", _probability_only(sequence_inputs), SEQUENCE_INPUTS,
                     {"learning_rate": 0.005, "batch_size": 32, "max_epochs": 15, "patience": 3, "hidden": 32},
                     _sequence_shapes, _torch_logits("SequenceModule"), "SequenceModule", needs_torch=True),
    "probe": Kind("probe", _internals.hidden_inputs, _internals.hidden_names,
                  {"layer": None, "C": 0.05, "max_iter": 500, "class_weight": "balanced"},
                  _linear_shapes, _linear_logits, "LinearModule", needs_torch=False, needs_internals=True,
                  reads="hidden", trainer="tokens"),
    "claim_head": Kind("claim_head", _internals.head_inputs, _internals.head_names,
                       {"learning_rate": 0.002, "max_epochs": 30, "patience": 4, "hidden": 32, "layers": 1},
                       _head_shapes, _torch_logits("ClaimHeadModule"), "ClaimHeadModule", needs_torch=True,
                       needs_internals=True, reads="attention", segmented=True,
                       fixed={"batch_size": 16, "heads": 4, "attention_window": None}),
}


def kind_of(name: Any) -> Kind:
    """The :class:`Kind` named ``name``; ``ValueError`` naming the known kinds otherwise."""
    if not isinstance(name, str) or name not in KINDS:
        raise ValueError(f"detector kind must be one of {sorted(KINDS)}, got {name!r}")
    return KINDS[name]
