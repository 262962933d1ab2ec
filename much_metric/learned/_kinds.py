"""The detector kinds: one record each (:class:`Kind`), in one registry (:data:`KINDS`).

A kind says what it reads (``inputs``, ``input_names``), its hyper-parameters (``defaults``, each checked by a
constraint of :mod:`much_dataset.params` in ``constraints``), how it is trained (``trainer``) and which torch module
it trains (``module``: ``"package.module:ClassName"``, imported only when torch is needed). Everything that depends on
the kind -- the estimator (:func:`~much_metric.learned.estimator_class`; its constructor is generated from the
record, so ``sklearn.base.clone`` works), the training, the folder check, inference, the CLI's choices -- reads the
record, and the module receives every hyper-parameter its constructor names (:meth:`Kind.module_parameters`): a
hyper-parameter that is neither a training setting, nor an input setting, nor a parameter of the module is refused,
never dropped.

Adding a kind is therefore one entry and one module: a :class:`Kind` passed to :func:`register_kind`, or named by an
entry point of the group ``much.detector_kinds`` (:data:`ENTRY_POINT_GROUP`, as methods use ``much.baselines``),
and the ``torch.nn.Module`` it names (docs/extending.md).

Kinds that read an internals pack (``probe``, ``claim_head``; ``needs_internals``) name their inputs from the
observer record of the folder's config (``config["internals"]``: the pack's model, layers, heads, hidden size, and
the hidden layer or attention window read), so one kind serves every observer model.
"""

from __future__ import annotations

import importlib
import inspect
import math
import numbers
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from much_dataset.params import Constraint, Interval, NoneOr, OneOf, UnknownNameError, check_param
from much_metric._plugins import PluginRegistry
from much_metric.learned import internals as _internals
from much_metric.learned.features import FEATURES, SEQUENCE_INPUTS, sequence_inputs, token_features

__all__ = ["BUILTIN_KINDS", "ENTRY_POINT_GROUP", "INPUT_SETTINGS", "KINDS", "MAX_HIDDEN", "TRAINING_SETTINGS", "Kind",
           "kind_of", "register_kind", "unregister_kind"]

#: Entry-point group of third-party detector kinds (each entry point names a :class:`Kind` or a sequence of them).
ENTRY_POINT_GROUP = "much.detector_kinds"
#: Largest GRU / encoder state accepted (a folder asking for more is refused before anything is allocated).
MAX_HIDDEN = 1024

# The hyper-parameters' constraints, declared once. The learning rate is bounded: Adam at 1e300 only overflows.
LEARNING_RATE = Interval(numbers.Real, 0, 10, closed="right")
BATCH_SIZE = Interval(numbers.Integral, 1, 1 << 16)
EPOCHS = Interval(numbers.Integral, 1, 100_000)
HIDDEN = Interval(numbers.Integral, 1, MAX_HIDDEN)
LAYERS = Interval(numbers.Integral, 1, 8)
HEADS = Interval(numbers.Integral, 1, 64)
HIDDEN_LAYER = NoneOr(Interval(numbers.Integral, 0, 4096))
ATTENTION_WINDOW = NoneOr(Interval(numbers.Integral, 0, 4096))
INVERSE_REGULARISATION = Interval(numbers.Real, 0, math.inf, closed="neither")
MAX_ITER = Interval(numbers.Integral, 1, 1_000_000)
CLASS_WEIGHT = NoneOr(OneOf(("balanced",)))
#: The estimators' seed (parameter initialisation and batch order).
SEED = Interval(numbers.Integral, 0, 2**63 - 1)

#: What each trainer reads: ``claims`` (Adam on the claim loss through the aggregator) and ``tokens`` (scikit-learn's
#: logistic regression on the claims' token labels).
TRAINING_SETTINGS: dict[str, tuple[str, ...]] = {
    "claims": ("learning_rate", "batch_size", "max_epochs", "patience"),
    "tokens": ("C", "max_iter", "class_weight"),
}
#: Hyper-parameters that choose the inputs (the pack's hidden layer or attention window), not the module.
INPUT_SETTINGS: tuple[str, ...] = ("layer", "attention_window")
#: A module constructor's parameters that are not hyper-parameters.
_MODULE_ARGUMENTS = ("self", "n_inputs", "rng")


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


def _probability_only(function: Callable[[Any], np.ndarray]) -> Callable[[Any, Any], np.ndarray]:
    def inputs(data: Any, context: Any = None) -> np.ndarray:
        return function(data)

    return inputs


def _heads_divide_hidden(hyper: Mapping[str, Any]) -> None:
    if hyper["hidden"] % hyper["heads"]:
        raise ValueError(f"hidden must be a multiple of {hyper['heads']} (the claim head's attention heads), got "
                         f"{hyper['hidden']!r}")


@dataclass(frozen=True)
class Kind:
    """One detector kind.

    Attributes
    ----------
    name : str
        The kind's name (``much train --detector NAME``, ``config.json``'s ``detector``).
    inputs : callable
        ``inputs(arrays, context)`` -> ``(N_tokens, n_inputs)`` per-token inputs (``context``: an
        :class:`~much_metric.learned.internals.Observed` pack for a kind that reads one, else None).
    input_names : tuple of str, or callable
        The input columns, or a function of the observer record for a kind that reads a pack.
    module : str
        ``"package.module:ClassName"``: the ``torch.nn.Module`` trained, built as ``ClassName(n_inputs, rng=...,
        **module hyper-parameters)``; its constructor's keyword parameters are the kind's module hyper-parameters.
    defaults : mapping
        The estimator's hyper-parameters and their defaults.
    constraints : mapping of str to much_dataset.params.Constraint
        The constraint of every hyper-parameter (``defaults`` and ``fixed``), checked by the estimator and by the
        folder check.
    shapes : callable or None
        ``shapes(n_inputs, hyperparameters)`` -> every parameter's exact shape, to check a folder without torch;
        None: read off the module (torch).
    logits : callable or None
        ``logits(weights, inputs, offsets, hyperparameters, segments)`` -> flat token logits with numpy alone;
        None: the module's forward pass (torch).
    needs_internals, reads : bool, str
        Whether the kind reads an internals pack, and what (``"hidden"`` or ``"attention"``).
    trainer : {"claims", "tokens"}
        ``claims``: Adam on the claim loss through the metric's aggregator; ``tokens``: scikit-learn's logistic
        regression on the claims' token labels (a linear module).
    segmented : bool
        The module attends within claims only (it receives each token's claim id).
    fixed : mapping
        Hyper-parameters recorded in the folder but not set by the estimator.
    check : callable or None
        A rule across hyper-parameters (``ValueError``), e.g. the claim head's heads dividing its width.
    description : str
        The docstring of the estimator generated for a kind without a class of its own.
    """

    name: str
    inputs: Callable[[Any, Any], np.ndarray]
    input_names: tuple[str, ...] | Callable[[Mapping[str, Any]], tuple[str, ...]]
    module: str
    defaults: Mapping[str, Any]
    constraints: Mapping[str, Constraint]
    shapes: Callable[[int, Mapping[str, Any]], dict[str, tuple[int, ...]]] | None = None
    logits: Callable[..., np.ndarray] | None = None
    needs_internals: bool = False
    reads: str = ""
    trainer: str = "claims"
    segmented: bool = False
    fixed: Mapping[str, Any] = field(default_factory=dict)
    check: Callable[[Mapping[str, Any]], None] | None = None
    description: str = ""

    def __post_init__(self) -> None:
        owner = f"Kind {self.name!r}"
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise ValueError(f"{owner}: name must be an identifier (a CLI choice and a folder's 'detector')")
        if self.trainer not in TRAINING_SETTINGS:
            raise ValueError(f"{owner}: trainer must be one of {tuple(TRAINING_SETTINGS)}, got {self.trainer!r}")
        if ":" not in self.module:
            raise ValueError(f"{owner}: module must be 'package.module:ClassName', got {self.module!r}")
        unchecked = sorted(set(self.hyperparameters) - set(self.constraints))
        if unchecked:
            raise ValueError(f"{owner}: hyper-parameter {unchecked[0]!r} has no constraint (constraints=...)")
        for reserved in ("aggregation", "aggregator", "stopword_handling", "random_state"):
            if reserved in self.hyperparameters:
                raise ValueError(f"{owner}: {reserved!r} is every estimator's own parameter, not a hyper-parameter")
        self.check_hyperparameters(self.hyperparameters, owner=owner)

    @property
    def hyperparameters(self) -> dict[str, Any]:
        """Every hyper-parameter recorded in a folder: the estimator's (``defaults``) and the kind's ``fixed`` ones
        (the claim head's batch size, 4 attention heads, and the whole attention window of the pack)."""
        return {**self.fixed, **self.defaults}

    @property
    def needs_torch(self) -> bool:
        """Whether scoring needs torch (the module's forward pass; numpy ``logits`` do not)."""
        return self.logits is None

    def names(self, observer: Mapping[str, Any] | None = None) -> tuple[str, ...]:
        """The input column names (of ``observer``, the config's ``internals`` record, for a kind reading a pack)."""
        if callable(self.input_names):
            if observer is None:
                raise ValueError(f"a {self.name} detector's inputs depend on the internals pack it was trained on")
            return self.input_names(observer)
        return self.input_names

    def check_hyperparameters(self, values: Mapping[str, Any], *, owner: str) -> None:
        """Each value of ``values`` against its constraint, then the kind's rule across them
        (:class:`~much_dataset.params.InvalidParameterError` / ``ValueError`` naming ``owner``)."""
        for name, value in values.items():
            if name in self.constraints:
                check_param(name, value, self.constraints[name], owner=owner)
        if self.check is not None and set(self.hyperparameters) <= {*values, *self.fixed}:
            try:
                self.check({**self.fixed, **values})
            except ValueError as error:
                raise ValueError(f"{owner}: {error}") from None

    def module_class(self) -> type:
        """The ``torch.nn.Module`` class of ``module`` (imports it: torch)."""
        path, _, attribute = self.module.partition(":")
        return getattr(importlib.import_module(path), attribute)

    def module_parameters(self, hyper: Mapping[str, Any]) -> dict[str, Any]:
        """The hyper-parameters of ``hyper`` that the module's constructor takes: every one it names. A
        hyper-parameter of the kind that is neither a training setting of its trainer, nor an input setting, nor a
        parameter of the module would be ignored: ``ValueError`` instead."""
        cls = self.module_class()
        accepted = [name for name, parameter in inspect.signature(cls).parameters.items()
                    if name not in _MODULE_ARGUMENTS and parameter.kind in (parameter.POSITIONAL_OR_KEYWORD,
                                                                            parameter.KEYWORD_ONLY)]
        ignored = sorted(set(self.hyperparameters) - set(accepted) - set(TRAINING_SETTINGS[self.trainer])
                         - set(INPUT_SETTINGS))
        if ignored:
            raise ValueError(f"detector kind {self.name!r}: hyper-parameter {ignored[0]!r} is neither a setting of "
                             f"the {self.trainer!r} trainer {TRAINING_SETTINGS[self.trainer]}, nor an input setting "
                             f"{INPUT_SETTINGS}, nor a parameter of {self.module} ({', '.join(accepted) or 'none'}): "
                             "it would be ignored")
        return {name: hyper[name] for name in accepted if name in hyper}

    def parameter_shapes(self, n_inputs: int, hyper: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
        """Every parameter's exact shape for ``n_inputs`` inputs: ``shapes`` when the kind declares it (no torch),
        else read off the module built with ``hyper``."""
        if self.shapes is not None:
            return self.shapes(n_inputs, hyper)
        from much_metric.learned import _torch  # torch only for a kind without declared shapes

        module = _torch.build(self, n_inputs, random_state=0, hyper=hyper)
        return {name: tuple(value.shape) for name, value in module.state_dict().items()}

    def token_logits(self, weights: Mapping[str, np.ndarray], inputs: np.ndarray, offsets: np.ndarray,
                     hyper: Mapping[str, Any], segments: np.ndarray | None = None) -> np.ndarray:
        """Flat token logits of standardised ``inputs``: ``logits`` (numpy), else the module's forward (torch)."""
        if self.logits is not None:
            return self.logits(weights, inputs, offsets, hyper, segments)
        from much_metric.learned import _torch  # torch only when a torch kind scores

        return _torch.logits_of(self, weights, inputs, (offsets, segments), hyper)


_TORCH = "much_metric.learned._torch"
_CLAIMS_TRAINING = {"learning_rate": LEARNING_RATE, "batch_size": BATCH_SIZE, "max_epochs": EPOCHS, "patience": EPOCHS}

#: The kinds of this toolkit.
BUILTIN_KINDS: dict[str, Kind] = {kind.name: kind for kind in (
    Kind("linear", _probability_only(token_features), FEATURES, f"{_TORCH}:LinearModule",
         {"learning_rate": 0.02, "batch_size": 64, "max_epochs": 60, "patience": 5}, _CLAIMS_TRAINING,
         shapes=_linear_shapes, logits=_linear_logits),
    Kind("sequence", _probability_only(sequence_inputs), SEQUENCE_INPUTS, f"{_TORCH}:SequenceModule",
         {"learning_rate": 0.005, "batch_size": 32, "max_epochs": 15, "patience": 3, "hidden": 32},
         {**_CLAIMS_TRAINING, "hidden": HIDDEN}, shapes=_sequence_shapes),
    Kind("probe", _internals.hidden_inputs, _internals.hidden_names, f"{_TORCH}:LinearModule",
         {"layer": None, "C": 0.05, "max_iter": 500, "class_weight": "balanced"},
         {"layer": HIDDEN_LAYER, "C": INVERSE_REGULARISATION, "max_iter": MAX_ITER, "class_weight": CLASS_WEIGHT},
         shapes=_linear_shapes, logits=_linear_logits, needs_internals=True, reads="hidden", trainer="tokens"),
    Kind("claim_head", _internals.head_inputs, _internals.head_names, f"{_TORCH}:ClaimHeadModule",
         {"learning_rate": 0.002, "max_epochs": 30, "patience": 4, "hidden": 32, "layers": 1},
         {**_CLAIMS_TRAINING, "hidden": HIDDEN, "layers": LAYERS, "heads": HEADS, "attention_window": ATTENTION_WINDOW},
         shapes=_head_shapes, needs_internals=True, reads="attention", segmented=True,
         fixed={"batch_size": 16, "heads": 4, "attention_window": None}, check=_heads_divide_hidden),
)}


class _Kinds(PluginRegistry[Kind], Mapping[str, Kind]):
    """The detector kinds: the toolkit's one plugin registry (:class:`much_metric._plugins.PluginRegistry`: loaded
    once, on first use, under a lock) over :data:`BUILTIN_KINDS` and the entry points of :data:`ENTRY_POINT_GROUP`,
    read as a mapping."""

    def __init__(self) -> None:
        super().__init__(group=ENTRY_POINT_GROUP, item_type=Kind, noun="detector kind", register="register_kind()",
                         builtins=lambda: [(kind, __name__) for kind in BUILTIN_KINDS.values()])

    def __getitem__(self, name: str) -> Kind:
        return self.item(name)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self.items_by_name()))

    def __len__(self) -> int:
        return len(self.items_by_name())

    def __repr__(self) -> str:
        return f"KINDS({', '.join(self)})"


#: Every detector kind by name: the built-ins, then the entry points and run-time registrations.
KINDS = _Kinds()


def register_kind(kind: Kind, *, replace: bool = False) -> Kind:
    """Add a detector kind at run time (as an entry point of :data:`ENTRY_POINT_GROUP` does when installed);
    returns it. Its estimator is :func:`~much_metric.learned.estimator_class`\\ ``(kind.name)``."""
    KINDS.load()
    KINDS.add(kind, origin="register_kind()", replace=replace)
    return kind


def unregister_kind(name: str) -> Kind:
    """Remove a kind added with :func:`register_kind` (a built-in stays)."""
    return KINDS.remove(name)


def kind_of(name: Any) -> Kind:
    """The :class:`Kind` named ``name``; :class:`~much_dataset.params.UnknownNameError` (a ``ValueError`` and a
    ``KeyError``) naming the known kinds otherwise, or the load error of a broken entry point."""
    if isinstance(name, str) and name in KINDS:
        return KINDS[name]
    broken = KINDS.broken()
    if isinstance(name, str) and name in broken:
        raise ValueError(broken[name])
    for message in broken.values():
        warnings.warn(message, RuntimeWarning, stacklevel=2)
    raise UnknownNameError(f"detector kind must be one of {sorted(KINDS)}, got {name!r}")
