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
import pkgutil
import warnings
from collections.abc import Iterable

from much_dataset.params import UnknownNameError, unknown_name
from much_metric._plugins import PluginRegistry
from much_metric.baselines._baseline import RESOURCES, Baseline, BaselineSpec, Requirements

__all__ = [
    "ENTRY_POINT_GROUP",
    "METHODS_PACKAGE",
    "RESOURCES",
    "TABLE_GROUPS",
    "Requirements",
    "Baseline",
    "BaselineSpec",
    "available",
    "display_method",
    "display_name",
    "expand_signals",
    "get",
    "origin",
    "register",
    "resolve",
    "signal_groups",
    "stored_signal_name",
    "unregister",
]

#: The package whose modules define the built-in baselines (``BASELINES = (...)``), imported on first use.
METHODS_PACKAGE = "much_metric.baselines.methods"
#: Entry-point group of third-party baselines.
ENTRY_POINT_GROUP = "much.baselines"
def _builtin_baselines() -> list[tuple[Baseline, str]]:
    """``(baseline, module)`` of every ``BASELINES`` of the modules of :data:`METHODS_PACKAGE` (imported here)."""
    package = importlib.import_module(METHODS_PACKAGE)
    found = []
    for module in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        if not module.name.startswith("_"):
            name = f"{METHODS_PACKAGE}.{module.name}"
            found += [(baseline, name) for baseline in getattr(importlib.import_module(name), "BASELINES", ())]
    return found


class _Registry(PluginRegistry[Baseline]):
    """The baselines: the toolkit's one plugin registry (:class:`much_metric._plugins.PluginRegistry`: loaded once,
    on first use, under a lock) over the methods package and the ``much.baselines`` entry points."""

    def __init__(self) -> None:
        super().__init__(group=ENTRY_POINT_GROUP, item_type=Baseline, noun="baseline", register="register()",
                         builtins=_builtin_baselines)

    def all(self) -> dict[str, Baseline]:
        """Every baseline by name pattern, in table order."""
        return dict(sorted(self.items_by_name().items(), key=lambda item: item[1].order))


_REGISTRY = _Registry()


def register(baseline: Baseline, *, replace: bool = False) -> Baseline:
    """Add a baseline at run time (also usable as a decorator-free one-liner in a notebook); returns it."""
    _REGISTRY.load()
    _REGISTRY.add(baseline, origin="register()", replace=replace)
    return baseline


def unregister(name: str) -> Baseline:
    """Remove a baseline registered under ``name`` (e.g. one added with :func:`register` in a notebook; a built-in
    stays)."""
    return _REGISTRY.remove(name)


def available() -> dict[str, Baseline]:
    """Registered baselines by name pattern, built-ins first (in table 3's family order), then plugins.

    A plugin whose entry point fails to load is left out with a warning (the error is raised when its name is
    asked for, see :func:`resolve`).
    """
    baselines = _REGISTRY.all()
    for message in _REGISTRY.broken().values():
        warnings.warn(message, RuntimeWarning, stacklevel=2)
    return baselines


#: Signal prefixes of the peers' plugin (``plugins/much-peers``) and how to install it, for an unknown signal.
PEER_PLUGIN = {"prefixes": ("lmpolygraph:", "uqlm:", "lmpolygraph_", "uqlm_"), "package": "much-peers",
               "install": "from the toolkit's checkout: pip install -c plugins/much-peers/constraints.txt -e "
                          "plugins/much-peers (docs/peers.md)"}


def origin(name: str) -> str:
    """Where the baseline ``name`` was registered: its built-in module or ``entry point '<name>' (<value>)``."""
    return _REGISTRY.origin(name)


def get(name: str) -> Baseline:
    """The baseline registered under ``name`` (a pattern such as ``token_entropy_{delta}``)."""
    baselines = _REGISTRY.all()
    if name not in baselines:
        raise UnknownNameError(f"no baseline named {name!r}; registered: {', '.join(baselines)}")
    return baselines[name]


def resolve(signal: str) -> BaselineSpec:
    """The baseline and parameters of a concrete signal name (``token_entropy_24`` -> Token Entropy, delta=24).

    Raises ``ValueError`` naming the registered patterns when no baseline matches, and the plugin's own load error
    when the name is that of a broken entry point. A claim-level method's stored name (``sample_rouge1@claim``)
    resolves to it too; a token-level one's name with ``@claim`` is an error.
    """
    from much_metric.signals import CLAIM_SUFFIX

    signal = str(signal)
    baselines = _REGISTRY.all()
    bare = signal.removesuffix(CLAIM_SUFFIX)
    matches = [(b, p) for b in baselines.values() if (p := b.match(bare)) is not None
               and (bare == signal or b.level == "claim")]
    if not matches and bare != signal and any(b.match(bare) is not None for b in baselines.values()):
        raise ValueError(f"signal {signal!r}: {bare!r} is a token-level method (one value per output token); "
                         f"{CLAIM_SUFFIX!r} names a claim-level one's signal")
    if not matches:
        broken = _REGISTRY.broken()
        if signal in broken:
            raise ValueError(broken[signal])
        if signal.lower().startswith(PEER_PLUGIN["prefixes"]):
            raise ValueError(f"unknown signal {signal!r}: the peers' estimators (LM-Polygraph, UQLM) come with the "
                             f"{PEER_PLUGIN['package']} plugin, which is not installed; {PEER_PLUGIN['install']}")
        groups = signal_groups()  # concrete names first: what a typo is closest to ('token_entropy_24')
        known = [*dict.fromkeys(n for names in groups.values() for n in names), *baselines, *groups]
        raise unknown_name("signal", signal, known,
                           hint=f"; groups: {', '.join(groups)}; `much run --help` lists every baseline")
    # The most specific pattern wins (fewest fields: 'ktc' before 'ktc_{config}').
    baseline, params = min(matches, key=lambda item: len(item[0].fields))
    if baseline.check is not None:
        try:
            baseline.check(dict(params))
        except ValueError as error:
            raise ValueError(f"signal {signal!r}: {error}") from error
    return BaselineSpec(signal, baseline, params, origin=origin(baseline.name))


def display_name(signal: str) -> str:
    """The one table label of a signal name, as stored or as asked (``ktc_RYxmoyp1awYParfCjjxgnQ`` and
    ``ktc_nu4_tau0.3`` -> ``KTC-4-0.3``); the name itself when no registered baseline matches it."""
    try:
        return resolve(signal).display
    except (ValueError, KeyError):
        return str(signal)


def stored_signal_name(signal: str) -> str:
    """The name ``much run --signals SIGNAL`` stores its file under where no resource decides it (``ktc`` ->
    ``ktc_RYxmoyp1awYParfCjjxgnQ``); the name itself when unknown or when a resource decides it (an NLI model's
    suffix)."""
    try:
        return resolve(signal).stored_name({})
    except (ValueError, KeyError, TypeError):
        return str(signal)


def display_method(method: str) -> str:
    """:func:`display_name` of a ranked method written ``"<signal name> (<aggregator>)"`` (the aggregator kept)."""
    name, separator, rest = str(method).partition(" (")
    return display_name(name) + separator + rest


#: Resources a run has only when given (built by a builder step): their methods are not in the group ``all``.
ASKED_BY_NAME = frozenset({"internals", "samples", "reference"})

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
        # an internals pack is built per model (python -m builder internals), samples and references by builder
        # steps: their methods are asked by name
        "all": tuple(name for b in baselines if not set(b.needs) & ASKED_BY_NAME for name in b.defaults),
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
