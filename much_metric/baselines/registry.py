"""The baseline registry: every method is one :class:`Baseline`, found by its signal name.

A baseline turns a MUCH split into one score per output token (EOS included), **higher = more uncertain**. The
runner (:func:`much_metric.baselines.compute_signals`), ``much run --signals``, its help text, the result tables and
the signal files read this registry and nothing else, so adding a method touches one place:

* **built-in**: a module of :mod:`much_metric.baselines.methods` that defines ``BASELINES = (Baseline(...), ...)``
  (found by listing that package, no central list to edit);
* **third-party**: a package that declares an entry point in the group ``much.baselines`` whose object is a
  :class:`Baseline` (or a sequence of them)::

      # pyproject.toml of the plugin package
      [project.entry-points."much.baselines"]
      my_method = "my_package.module:MY_BASELINE"

* **at run time** (a notebook): :func:`register`.

Signal names are patterns: ``token_entropy_{delta}`` matches ``token_entropy_24`` with ``delta=24``. A field is an
integer unless the baseline's ``params`` gives its own regular expression (then it is converted to ``int``, then
``float``, else kept as a string).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import pkgutil
import re
import sys
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "ENTRY_POINT_GROUP",
    "METHODS_PACKAGE",
    "RESOURCES",
    "TABLE_GROUPS",
    "Baseline",
    "BaselineSpec",
    "available",
    "display_method",
    "display_name",
    "expand_signals",
    "get",
    "register",
    "resolve",
    "signal_groups",
    "unregister",
]

#: The package whose modules define the built-in baselines (``BASELINES = (...)``), imported on first use.
METHODS_PACKAGE = "much_metric.baselines.methods"
#: Entry-point group of third-party baselines.
ENTRY_POINT_GROUP = "much.baselines"
#: What a baseline may need, passed to ``compute`` as keyword arguments of these names: the generating LLM's
#: tokenizer (or a per-sample decoder), an NLI scorer, KTC's token-neighbour statistics, an internals pack
#: (:func:`much_dataset.load_internals`: attention and hidden states per output token; RAUQ, probes).
RESOURCES = ("tokenizer", "nli", "neighbours", "internals")

_FIELD = re.compile(r"\{(\w+)\}")


@dataclass(frozen=True)
class Baseline:
    """One token-level uncertainty method.

    Parameters
    ----------
    name : str
        Signal name, or a pattern with ``{field}`` parameters (``token_entropy_{delta}``). Signal files and tables
        use the concrete name (``token_entropy_24``).
    compute : callable
        ``compute(arrays, **params, **resources)`` -> float array of shape (N_tokens,) over the split's
        concatenated tokens (or a list of per-sample arrays). ``arrays`` is a
        :class:`much_metric.baselines.TokenArrays` (sample offsets, sampled token ids, top-K candidate ids and
        probabilities); ``params`` are the fields of the name; ``resources`` are those of ``needs``.
        Higher = more uncertain.
    display : str or callable, optional
        Table label, may use the fields (``"Token Entropy-{delta}"``), or a function of the fields returning the
        label; defaults to the name.
    needs : tuple of str
        Among :data:`RESOURCES`.
    description : str
        One line for ``much run --help`` (formula and source).
    params : mapping of str to str
        Regular expressions of fields that are not plain integers.
    defaults : tuple of str
        Concrete signal names run by the group ``all`` (and ``all-probability`` when ``needs`` is empty); a name
        without fields defaults to itself.
    options : tuple of str
        Run-wide options the runner forwards when set (``reference_window`` for CCP/SAR).
    signal_name : callable, optional
        ``signal_name(name, params, resources)`` -> the stored name when it depends on a resource (CCP/SAR add the
        NLI model's suffix).
    order : float, default 100
        Position in tables and help (table 3's rows: CCP 10, SAR 20, Max Likelihood 30, Token Likelihood 40, Token
        Entropy 50); ties keep registration order.
    check : callable, optional
        ``check(params)`` raises ``ValueError`` for parameters out of range; called when a name is resolved, so a
        bad ``--signals`` fails before any work.
    metadata : callable, optional
        ``metadata(params)`` -> a JSON-able mapping stored with the signal (its file's signal metadata). A method
        trained on MUCH rows gives ``training_generation_ids`` (sorted): every evaluation leaves those rows out of
        that signal unless asked to include them (see :mod:`much_metric.signals._training`).
    needs_of : callable, optional
        ``needs_of(params)`` -> the resources (among :data:`RESOURCES`) one instance needs when they depend on its
        parameters (a learned detector folder that reads an internals pack); replaces ``needs`` for that instance.

    Examples
    --------
    A method with one parameter ``k``, scored on the embedded sample (offline). Registering it (:func:`register`
    in a notebook, ``BASELINES = (...)`` in a file of this package, or a ``much.baselines`` entry point) makes
    ``much run --signals top_gap_2`` work; here it is only called:

    >>> import much_dataset
    >>> from much_metric import score
    >>> from much_metric.baselines import Baseline, token_arrays
    >>> def top_gap(arrays, *, k):
    ...     # 1 - (p1 - pk): the top candidate barely ahead of the k-th one = uncertain
    ...     p = arrays.probabilities                     # (N_tokens, 24), by decreasing probability
    ...     return 1.0 - (p[:, 0] - p[:, k - 1])         # one score per token, higher = more uncertain
    >>> gap = Baseline(name="top_gap_{k}", compute=top_gap, display="Top gap-{k}", description="1 - (p1 - pk)")
    >>> gap.match("top_gap_2"), gap.label({"k": 2}), gap.match("token_entropy_24")
    ({'k': 2}, 'Top gap-2', None)
    >>> data = much_dataset.load("sample", split="test")
    >>> arrays = token_arrays(data)
    >>> token_scores = arrays.split(gap.compute(arrays, k=2))
    >>> result = score(token_scores, data["token_chunks"], data["labels"], data["stopword_mask"])
    >>> result.n_claims, 0.5 < result.roc_auc < 1.0
    (10320, True)
    """

    name: str
    compute: Callable[..., Any]
    display: str | Callable[[Mapping[str, Any]], str] | None = None
    needs: tuple[str, ...] = ()
    description: str = ""
    params: Mapping[str, str] = field(default_factory=dict)
    defaults: tuple[str, ...] = ()
    options: tuple[str, ...] = ()
    signal_name: Callable[[str, dict[str, Any], dict[str, Any]], str] | None = None
    check: Callable[[dict[str, Any]], None] | None = None
    order: float = 100.0
    metadata: Callable[[dict[str, Any]], Mapping[str, Any]] | None = None
    needs_of: Callable[[dict[str, Any]], Sequence[str]] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not re.fullmatch(r"[A-Za-z][\w{}.:-]*", self.name):
            raise ValueError(f"Baseline name must be a signal name or pattern like 'token_entropy_{{delta}}', got "
                             f"{self.name!r}")
        if not callable(self.compute):
            raise TypeError(f"Baseline {self.name!r}: compute must be callable, got {type(self.compute).__name__}")
        unknown = set(self.needs) - set(RESOURCES)
        if unknown:
            raise ValueError(f"Baseline {self.name!r}: unknown needs {sorted(unknown)}; choose among {RESOURCES}")
        fields = _FIELD.findall(self.name)
        if set(self.params) - set(fields):
            raise ValueError(f"Baseline {self.name!r}: params {sorted(set(self.params) - set(fields))} are not "
                             "fields of its name")
        object.__setattr__(self, "needs", tuple(self.needs))
        object.__setattr__(self, "defaults", tuple(self.defaults) or (() if fields else (self.name,)))

    @property
    def fields(self) -> tuple[str, ...]:
        return tuple(_FIELD.findall(self.name))

    def match(self, signal: str) -> dict[str, Any] | None:
        """The parameters of ``signal`` if it is an instance of this baseline's name, else None."""
        match = self._pattern().fullmatch(signal)
        if match is None:
            return None
        return {key: _convert(value) for key, value in match.groupdict().items()}

    def _pattern(self) -> re.Pattern[str]:
        parts, last = [], 0
        for found in _FIELD.finditer(self.name):
            parts.append(re.escape(self.name[last:found.start()]))
            key = found.group(1)
            parts.append(f"(?P<{key}>{self.params.get(key, r'[0-9]+')})")
            last = found.end()
        parts.append(re.escape(self.name[last:]))
        return re.compile("".join(parts))

    def label(self, params: Mapping[str, Any]) -> str:
        """The table label of one instance (``Token Entropy-24``)."""
        if callable(self.display):
            return self.display(params)
        return (self.display or self.name).format(**params)


@dataclass(frozen=True)
class BaselineSpec:
    """A resolved signal name: the baseline and its parameters."""

    signal: str
    baseline: Baseline
    params: dict[str, Any]

    @property
    def needs(self) -> tuple[str, ...]:
        if self.baseline.needs_of is None:
            return self.baseline.needs
        needs = tuple(self.baseline.needs_of(dict(self.params)))
        unknown = set(needs) - set(RESOURCES)
        if unknown:
            raise ValueError(f"signal {self.signal!r} needs {sorted(unknown)}, not among {RESOURCES}")
        return needs

    @property
    def display(self) -> str:
        return self.baseline.label(self.params)

    def stored_name(self, resources: Mapping[str, Any]) -> str:
        """The signal name written to files (a baseline may add a resource's suffix, e.g. the NLI model's)."""
        if self.baseline.signal_name is None:
            return self.signal
        return self.baseline.signal_name(self.signal, dict(self.params), dict(resources))

    def signal_metadata(self) -> dict[str, Any]:
        """The metadata stored with this signal ({} for most baselines; a learned one's training rows)."""
        return {} if self.baseline.metadata is None else dict(self.baseline.metadata(dict(self.params)))

    def compute(self, arrays: Any, resources: Mapping[str, Any], options: Mapping[str, Any]) -> np.ndarray:
        """Flat float64 scores (N_tokens,) of this signal; checks the shape the baseline returned."""
        kwargs = {**self.params, **{need: resources.get(need) for need in self.needs}}
        kwargs.update({key: options[key] for key in self.baseline.options if key in options})
        values = self.baseline.compute(arrays, **kwargs)
        if isinstance(values, np.ndarray) and values.ndim == 1:
            flat = values
        elif isinstance(values, Sequence) and len(values) == arrays.n_samples:
            lengths = [len(v) for v in values]
            expected = np.diff(arrays.offsets).tolist()
            for index, (got, want) in enumerate(zip(lengths, expected, strict=True)):
                if got != want:
                    raise ValueError(f"baseline {self.signal!r} returned {got} scores for generation_id="
                                     f"{arrays.generation_ids[index]!r}, which has {want} output tokens")
            flat = np.concatenate([np.asarray(v, dtype=np.float64) for v in values]) if values else np.zeros(0)
        else:
            raise TypeError(f"baseline {self.signal!r} must return a 1-D array of {arrays.n_tokens} token scores or "
                            f"a list of {arrays.n_samples} per-sample arrays, got {type(values).__name__}")
        flat = np.asarray(flat, dtype=np.float64)
        if flat.shape != (arrays.n_tokens,):
            raise ValueError(f"baseline {self.signal!r} returned {flat.shape[0]} token scores for a split of "
                             f"{arrays.n_tokens} output tokens")
        return flat


def _convert(text: str) -> Any:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _initializing(module: str) -> bool:
    """Whether ``module`` (or a parent package) is being imported right now (a partially initialised module)."""
    parts = module.split(".")
    for end in range(1, len(parts) + 1):
        spec = getattr(sys.modules.get(".".join(parts[:end])), "__spec__", None)
        if getattr(spec, "_initializing", False):
            return True
    return False


class _Registry:
    """Built-ins (listed from the package), entry points and run-time registrations, loaded on first use."""

    def __init__(self) -> None:
        self._baselines: dict[str, Baseline] = {}
        self._origin: dict[str, str] = {}
        self._broken: dict[str, str] = {}
        self._pending: list[importlib.metadata.EntryPoint] = []
        self._loaded = False

    def _load(self) -> None:
        """Import the built-in method modules and the entry points, once (on the first use of the registry, never
        when :mod:`much_metric.baselines` is imported)."""
        if self._loaded:
            if self._pending:
                pending, self._pending = self._pending, []
                for entry_point in pending:
                    self._load_entry_point(entry_point)
            return
        self._loaded = True
        package = importlib.import_module(METHODS_PACKAGE)
        for module in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
            if module.name.startswith("_"):
                continue
            for baseline in getattr(importlib.import_module(f"{METHODS_PACKAGE}.{module.name}"), "BASELINES", ()):
                self.add(baseline, origin=f"{METHODS_PACKAGE}.{module.name}")
        for entry_point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            self._load_entry_point(entry_point)

    def _load_entry_point(self, entry_point: importlib.metadata.EntryPoint) -> None:
        origin = f"entry point {entry_point.name!r} ({entry_point.value})"
        try:
            loaded = entry_point.load()
        except Exception as error:  # recorded and raised when the plugin's signal is asked for
            if _initializing(entry_point.module):
                # The plugin's own module is being imported and asked the registry for something at import time:
                # not broken, only not finished. Loaded again on the next use of the registry.
                self._pending.append(entry_point)
                return
            self._broken[entry_point.name] = f"{origin} failed to load: {type(error).__name__}: {error}"
            return
        items = loaded if isinstance(loaded, Iterable) and not isinstance(loaded, Baseline) else [loaded]
        for item in items:
            if not isinstance(item, Baseline):
                self._broken[entry_point.name] = f"{origin} is a {type(item).__name__}, not a Baseline"
                continue
            self.add(item, origin=origin)

    def add(self, baseline: Baseline, *, origin: str, replace: bool = False) -> None:
        if not isinstance(baseline, Baseline):
            raise TypeError(f"register() takes a Baseline, got {type(baseline).__name__}")
        if baseline.name in self._baselines and not replace:
            raise ValueError(f"a baseline named {baseline.name!r} is already registered by "
                             f"{self._origin[baseline.name]}; pass replace=True to override it")
        self._baselines[baseline.name] = baseline
        self._origin[baseline.name] = origin

    def all(self) -> dict[str, Baseline]:
        self._load()
        return dict(sorted(self._baselines.items(), key=lambda item: item[1].order))

    def broken(self) -> dict[str, str]:
        self._load()
        return dict(self._broken)

    def origin(self, name: str) -> str:
        self._load()
        return self._origin[name]


_REGISTRY = _Registry()


def register(baseline: Baseline, *, replace: bool = False) -> Baseline:
    """Add a baseline at run time (also usable as a decorator-free one-liner in a notebook); returns it."""
    _REGISTRY._load()
    _REGISTRY.add(baseline, origin="register()", replace=replace)
    return baseline


def unregister(name: str) -> Baseline:
    """Remove a baseline registered under ``name`` (e.g. one added with :func:`register` in a notebook)."""
    _REGISTRY._load()
    if name not in _REGISTRY._baselines:
        raise KeyError(f"no baseline named {name!r}")
    _REGISTRY._origin.pop(name)
    return _REGISTRY._baselines.pop(name)


def available() -> dict[str, Baseline]:
    """Registered baselines by name pattern, built-ins first (in table 3's family order), then plugins.

    A plugin whose entry point fails to load is left out with a warning (the error is raised when its name is
    asked for, see :func:`resolve`).
    """
    baselines = _REGISTRY.all()
    for message in _REGISTRY.broken().values():
        warnings.warn(message, RuntimeWarning, stacklevel=2)
    return baselines


def get(name: str) -> Baseline:
    """The baseline registered under ``name`` (a pattern such as ``token_entropy_{delta}``)."""
    baselines = _REGISTRY.all()
    if name not in baselines:
        raise KeyError(f"no baseline named {name!r}; registered: {', '.join(baselines)}")
    return baselines[name]


def resolve(signal: str) -> BaselineSpec:
    """The baseline and parameters of a concrete signal name (``token_entropy_24`` -> Token Entropy, delta=24).

    Raises ``ValueError`` naming the registered patterns when no baseline matches, and the plugin's own load error
    when the name is that of a broken entry point.
    """
    signal = str(signal)
    baselines = _REGISTRY.all()
    matches = [(b, p) for b in baselines.values() if (p := b.match(signal)) is not None]
    if not matches:
        broken = _REGISTRY.broken()
        if signal in broken:
            raise ValueError(broken[signal])
        raise ValueError(f"unknown signal {signal!r}; registered baselines: {', '.join(baselines)} "
                         f"(groups: {', '.join(signal_groups())})")
    # The most specific pattern wins (fewest fields: 'ktc' before 'ktc_{config}').
    baseline, params = min(matches, key=lambda item: len(item[0].fields))
    if baseline.check is not None:
        try:
            baseline.check(dict(params))
        except ValueError as error:
            raise ValueError(f"signal {signal!r}: {error}") from error
    return BaselineSpec(signal, baseline, params)


def display_name(signal: str) -> str:
    """The one table label of a signal name, as stored or as asked (``ktc_RYxmoyp1awYParfCjjxgnQ`` and
    ``ktc_nu4_tau0.3`` -> ``KTC-4-0.3``); the name itself when no registered baseline matches it."""
    try:
        return resolve(signal).display
    except (ValueError, KeyError):
        return str(signal)


def display_method(method: str) -> str:
    """:func:`display_name` of a ranked method written ``"<signal name> (<aggregator>)"`` (the aggregator kept)."""
    name, separator, rest = str(method).partition(" (")
    return display_name(name) + separator + rest


#: Named groups of signals: the rows of the paper's tables 3 and 7.
TABLE_GROUPS: dict[str, tuple[str, ...]] = {
    "table3": ("ccp_10_8", "sar_8", "max_likelihood", "token_likelihood", "token_entropy_24"),
    "table7": (*(f"ccp_{d}_{s}" for d in (24, 10) for s in (8, 5, 3)), "sar_8", "sar_5", "sar_3",
               "token_entropy_24", "token_entropy_10", "token_entropy_5", "max_likelihood", "token_likelihood"),
}


def signal_groups() -> dict[str, tuple[str, ...]]:
    """``--signals`` shortcuts: ``table3``, ``table7``, ``all`` (every baseline's defaults) and ``all-probability``
    (the defaults of the baselines that need no model)."""
    baselines = _REGISTRY.all().values()
    return {
        **TABLE_GROUPS,
        # an internals pack is built per model (python -m builder internals): its methods are asked by name
        "all": tuple(name for b in baselines if "internals" not in b.needs for name in b.defaults),
        "all-probability": tuple(name for b in baselines if not b.needs for name in b.defaults),
    }


def expand_signals(values: Iterable[str]) -> list[str]:
    """Comma-separated names and group names -> concrete signal names, de-duplicated in order, each resolved."""
    groups = signal_groups()
    names = [alias for value in values for name in str(value).split(",") if name.strip()
             for alias in groups.get(name.strip(), (name.strip(),))]
    if not names:
        raise ValueError("no signal named")
    names = list(dict.fromkeys(names))
    for name in names:
        resolve(name)
    return names
