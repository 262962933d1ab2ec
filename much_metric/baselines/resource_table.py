"""The one table of resources a method may need besides the stored probabilities, and the options object built
from it.

Each :class:`Resource` is one entry of :data:`RESOURCE_TABLE`: its name (what a method's ``requirements`` name, the
keyword its ``compute`` receives, the keyword of :class:`ResourceOptions`), the words a table or an error uses when it
is missing ("needs an NLI model"), the ``much run`` flag that gives it, a cheap ``check`` of a given value (before
anything loads), how it is loaded for the methods that need it, and whether its identity is recorded in the signal
metadata (values of another encoder, samples or reference never mix on resume). Adding a resource is adding one
entry: ``ResourceOptions`` takes it as a keyword, ``resolved`` loads it, ``much run`` grows its flag and notes when
it is given to signals that do not read it, and docs/extending.md lists it (a test compares the page with the table).

The loaders are ``"module:function"`` strings, imported only when a run needs that resource, so reading the table
imports nothing heavy. A loader is called ``loader(value, split)`` with the value given (None when not given) and the
run's split (None for token arrays alone) and returns the loaded resource (or None: not available).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from much_dataset.params import UnknownNameError

__all__ = ["RESOURCE_TABLE", "RESOURCES", "Resource", "ResourceOptions", "records_of", "resource", "unread_options"]


@dataclass(frozen=True)
class Resource:
    """One kind of resource (see the module docstring).

    Attributes
    ----------
    name : str
        What a method's requirements name and the keyword of :class:`ResourceOptions` and of ``compute``.
    missing : str
        How a table or an error names it when a run lacks it: "needs <missing>".
    flag : str or None
        The ``much run`` option that gives it (None: given another way, e.g. ``--nli-model`` into ``NliOptions``).
    help : str
        The flag's help text.
    loader : str or None
        ``"module:function"``, called ``function(value, split)`` when a signal needs the resource; None: used as
        given.
    check : str or None
        ``"module:function"``, called ``function(value)`` for a value given (not None) when the options are built:
        raises ``ValueError`` naming the flag and the value, before anything loads.
    recorded : {"", "own", "alongside"}
        Whether the loaded resource's identity goes into the signal metadata of the signals that use it: ``own``
        always; ``alongside`` only with an ``own`` one (the NLI model of a sampling detector, not of CCP's files).
    repeatable : bool
        The flag may be given several times (a list of values).
    other_use : str
        What the run uses it for besides the signals that need it (the tokenizer times the segmentation): such a
        resource given to signals that do not read it gets no "not used" note.
    metavar : str or None
        The flag's value in ``--help``.
    """

    name: str
    missing: str
    flag: str | None = None
    help: str = ""
    loader: str | None = None
    check: str | None = None
    recorded: str = ""
    repeatable: bool = False
    metavar: str | None = None
    other_use: str = ""

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise ValueError(f"Resource {self.name!r}: the name must be an identifier (a keyword of ResourceOptions)")
        if self.recorded not in ("", "own", "alongside"):
            raise ValueError(f"Resource {self.name!r}: recorded must be '', 'own' or 'alongside', got "
                             f"{self.recorded!r}")
        if self.flag is not None and self.flag != "--" + self.name.replace("_", "-"):
            raise ValueError(f"Resource {self.name!r}: its flag must be --{self.name.replace('_', '-')} (the keyword "
                             f"and the option say the same), got {self.flag!r}")

    def load(self, value: Any, split: Any) -> Any:
        """The resource loaded from ``value`` for ``split`` (``value`` itself when there is no loader)."""
        return value if self.loader is None else _function(self.loader)(value, split)

    def check_value(self, value: Any) -> None:
        """Raise ``ValueError`` naming the flag and ``value`` when the entry's check refuses it (None: not given)."""
        if self.check is not None and value is not None:
            _function(self.check)(value)


def _function(path: str) -> Callable[..., Any]:
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


#: The module of the built-in resources' loaders and checks (named, not imported: the table imports no method).
_HERE = "much_metric.baselines._resource_loaders"

#: Every resource a method may need, in the order ``much run --help`` and the docs list them.
RESOURCE_TABLE: tuple[Resource, ...] = (
    Resource("tokenizer", "the generating LLM's tokenizer", flag="--tokenizer", other_use="the segmentation time",
             help="the generating LLM's tokenizer for every sample: hub id, folder, .gguf file or 'smollm2' (default: "
                  "smollm2 for the sample, the MUCH models for orailix/MUCH)"),
    Resource("nli", "an NLI model", loader=f"{_HERE}:nli_resource", recorded="alongside"),
    Resource("neighbours", "token-neighbour statistics", flag="--neighbours", repeatable=True,
             loader=f"{_HERE}:neighbours_resource",
             help="KTC's token-neighbour statistics (`much neighbours`): a .npz, a folder (one .npz per tokenizer for "
                  "orailix/MUCH), a hub dataset id, or MODEL=PATH|HUB_ID (repeatable); default: the SmolLM2 "
                  "statistics shipped with the sample"),
    Resource("internals", "an internals pack", flag="--internals", loader=f"{_HERE}:internals_resource",
             help="an internals pack (`python -m builder internals`) for the signals that need one: rauq, "
                  "attention_previous, llm_check_attention, probes; a pack of part of the data scores the rows it "
                  "holds (every signal of the table on those rows)"),
    Resource("samples", "samples of every row (python -m builder samples; much run --samples PACK)",
             flag="--samples", loader=f"{_HERE}:samples_resource", recorded="own",
             help="N further answers per row (`python -m builder samples`) for the sampling detectors "
                  "(semantic_isotropy, sample_*, eigenscore); default for --source sample: its own pack"),
    Resource("reference", "the reference articles (python -m builder wiki / context; much run --reference FOLDER)",
             flag="--reference", loader=f"{_HERE}:reference_resource", recorded="own",
             help="the --out folder of `python -m builder wiki` / `context` (wiki.jsonl, context.jsonl) for the "
                  "reference_* detectors"),
    Resource("encoder", "a text encoder (much run --encoder NAME)", flag="--encoder",
             loader=f"{_HERE}:encoder_resource", check=f"{_HERE}:check_encoder_value", recorded="own",
             help="text encoder of the isotropy / cosine detectors: minilm (default: all-MiniLM-L6-v2, the "
                  "'sampling' extra), observer[:MODEL[@LAYER]] (mean-pooled hidden states; default smollm2), or a "
                  "sentence-transformers hub id (owner/name) or folder"),
)

#: name -> its entry.
_BY_NAME: dict[str, Resource] = {entry.name: entry for entry in RESOURCE_TABLE}

#: name -> how a table says it is missing: what ``Baseline`` requirements may name.
RESOURCES: dict[str, str] = {entry.name: entry.missing for entry in RESOURCE_TABLE}


def resource(name: str) -> Resource:
    """The entry named ``name``; :class:`~much_dataset.params.UnknownNameError` listing the known ones."""
    if name not in _BY_NAME:
        raise UnknownNameError(f"no resource named {name!r}; known: {', '.join(_BY_NAME)}")
    return _BY_NAME[name]


class ResourceOptions:
    """The resources of a run besides the data: one keyword per entry of :data:`RESOURCE_TABLE` (``tokenizer``,
    ``nli``, ``neighbours``, ``internals``, ``samples``, ``reference``, ``encoder``), each given by name or path or as
    a loaded object, None when not given; loaded once by :meth:`resolved` for the signals that need it.

    The generating LLM's tokenizer (CCP/SAR); the NLI model (a hub id or folder, or a loaded scorer;
    :func:`~much_metric.benchmark.run_benchmark` takes it from ``NliOptions`` instead); KTC's token-neighbour
    statistics (None: those shipped with the embedded sample); an internals pack (a path is opened once); the samples
    (:func:`much_metric.baselines.samples.open_samples`); the reference folder of ``builder wiki`` / ``context``
    (:func:`much_metric.baselines.reference.open_reference`); the text encoder
    (:func:`much_metric.baselines.encoders.load_encoder`; None: all-MiniLM-L6-v2 of the ``sampling`` extra).
    A value is checked when given (an unknown encoder name is refused here, before any download).

    Examples
    --------
    >>> from much_metric.baselines import ResourceOptions
    >>> options = ResourceOptions(nli="microsoft/deberta-large-mnli")
    >>> options.needs_loading("nli"), options.samples
    (True, None)
    >>> ResourceOptions(encoders="minilm")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    much_dataset.params.UnknownNameError: ResourceOptions: no resource named 'encoders'; known: tokenizer, nli, ...
    """

    __slots__ = ("_values",)

    def __init__(self, **resources: Any) -> None:
        for name, value in resources.items():
            if name not in _BY_NAME:
                raise UnknownNameError(f"ResourceOptions: no resource named {name!r}; known: {', '.join(_BY_NAME)}")
            _BY_NAME[name].check_value(value)
        object.__setattr__(self, "_values", {entry.name: resources.get(entry.name) for entry in RESOURCE_TABLE})

    def __getattr__(self, name: str) -> Any:
        values = object.__getattribute__(self, "_values")
        if name in values:
            return values[name]
        raise AttributeError(f"ResourceOptions has no resource {name!r}; known: {', '.join(values)}")

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("ResourceOptions is immutable: use .replace(name=value)")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ResourceOptions) and all(
            self._values[name] is other._values[name] or self._values[name] == other._values[name]
            for name in _BY_NAME)

    __hash__ = None  # type: ignore[assignment]  # values may be unhashable loaded objects

    def __repr__(self) -> str:
        given = ", ".join(f"{name}={value!r}" for name, value in self._values.items() if value is not None)
        return f"ResourceOptions({given})"

    def __reduce__(self) -> tuple[Any, ...]:  # immutable: rebuilt from its values (a worker process gets a copy)
        return (_rebuilt, (self._values,))

    def replace(self, **changes: Any) -> ResourceOptions:
        """A copy with ``changes`` (resource name -> value)."""
        return ResourceOptions(**{**self._values, **changes})

    def given(self) -> dict[str, Any]:
        """The resources given (not None), by name."""
        return {name: value for name, value in self._values.items() if value is not None}

    def needs_loading(self, need: str) -> bool:
        """Whether the resource ``need`` is still a name or a path (loaded by :meth:`resolved`)."""
        return isinstance(self._values[resource(need).name], str | Path)

    def resolved(self, dataset: Any, needs: Collection[str]) -> ResourceOptions:
        """A copy with each resource in ``needs`` loaded by its table entry's loader (NLI by name, an internals pack
        by path, the sample's neighbour statistics by default, ...)."""
        from much_metric.baselines._arrays import TokenArrays

        split = dataset if not isinstance(dataset, TokenArrays) else None
        changes = {entry.name: entry.load(self._values[entry.name], split) for entry in RESOURCE_TABLE
                   if entry.name in needs and entry.loader is not None}
        return self.replace(**changes) if changes else self

    def as_dict(self) -> dict[str, Any]:
        """``{resource name: value}`` for every entry of the table: what a method's ``compute`` reads."""
        return dict(self._values)


def _rebuilt(values: Mapping[str, Any]) -> ResourceOptions:
    return ResourceOptions(**{name: value for name, value in values.items() if name in _BY_NAME})


def unread_options(resources: ResourceOptions, needs: Collection[str]) -> dict[str, str]:
    """``{flag: note}`` for each resource given with a ``much run`` flag that no asked signal reads (``needs``: the
    union of the asked signals' needs): the option would otherwise be ignored without a word."""
    notes = {}
    for entry in RESOURCE_TABLE:
        value = resources.given().get(entry.name)
        if entry.flag is None or entry.other_use or value is None or entry.name in needs:
            continue
        shown = ", ".join(map(str, value)) if isinstance(value, list | tuple) else str(value)
        absent = [str(v) for v in (value if isinstance(value, list | tuple) else [value])
                  if isinstance(v, str | Path) and _looks_like_path(str(v)) and not Path(v).expanduser().exists()]
        notes[entry.flag] = (f"{entry.flag} {shown} is not used: no asked signal reads {entry.missing.split(' (')[0]}"
                             + (f" (and {', '.join(absent)} does not exist)" if absent else ""))
    return notes


def _looks_like_path(text: str) -> bool:
    """A value written as a path (a separator, a dot, a home), not a bare name such as ``minilm`` or ``smollm2``."""
    return "/" in text or "\\" in text or text.startswith((".", "~"))


def records_of(needs: Collection[str], found: Mapping[str, Any]) -> dict[str, Any]:
    """``{need: record}`` of the recorded resources among ``needs`` (see :attr:`Resource.recorded`)."""
    if not any(_BY_NAME[need].recorded == "own" for need in needs if need in _BY_NAME):
        return {}
    records = {}
    for entry in RESOURCE_TABLE:
        if entry.recorded and entry.name in needs and found.get(entry.name) is not None:
            value = found[entry.name]
            records[entry.name] = value.record() if callable(getattr(value, "record", None)) else \
                {"name": str(getattr(value, "name", None) or type(getattr(value, "scorer", value)).__name__)}
    return records
