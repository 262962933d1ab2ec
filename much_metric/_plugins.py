"""The one plugin registry of the toolkit: named items of one type from three places, loaded once on first use.

The baselines (:mod:`much_metric.baselines.registry`, group ``much.baselines``) and the detector kinds
(:mod:`much_metric.learned`, group ``much.detector_kinds``) are both a :class:`PluginRegistry`: the built-ins (a
callable listing them, called on first use, never at import), the entry points of one group (installed plugins), and
run-time registrations (``register``). A plugin that fails to load, is not of the registry's type or reuses a taken
name is recorded as broken under its name, and its error is raised when that name is asked for; the others load.

Loaded once under a re-entrant lock (as :mod:`much_metric._cache` guards its table): a thread that arrives while
another is loading waits for the whole registry, never reads it half-filled; a module that the loading thread imports
and that uses the registry meanwhile gets what is loaded so far. An entry point whose module is still being imported
when it is loaded (it asked the registry for something at import time) is loaded again on the next use.
"""

from __future__ import annotations

import importlib.metadata
import sys
import threading
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

from much_dataset.params import UnknownNameError

__all__ = ["PluginRegistry"]

Item = TypeVar("Item")


def _initializing(module: str) -> bool:
    """Whether ``module`` (or a parent package) is being imported right now (a partially initialised module)."""
    parts = module.split(".")
    for end in range(1, len(parts) + 1):
        spec = getattr(sys.modules.get(".".join(parts[:end])), "__spec__", None)
        if getattr(spec, "_initializing", False):
            return True
    return False


class PluginRegistry(Generic[Item]):
    """Items of type ``item_type`` by their ``name``: ``builtins()`` (``(item, origin)`` pairs), the entry points of
    ``group`` and :meth:`add`; ``noun`` names an item in messages, ``register`` the public function that adds one.
    Built-ins cannot be removed."""

    def __init__(self, *, group: str, item_type: type, noun: str, register: str,
                 builtins: Callable[[], Iterable[tuple[Item, str]]]) -> None:
        self.group, self.item_type, self.noun, self.register = group, item_type, noun, register
        self._builtins = builtins
        self._items: dict[str, Item] = {}
        self._origin: dict[str, str] = {}
        self._broken: dict[str, str] = {}
        self._fixed: set[str] = set()
        self._pending: list[importlib.metadata.EntryPoint] = []
        self._loaded = False
        self._loading = False
        self._lock = threading.RLock()

    def load(self) -> None:
        """Load the built-ins and the entry points, once (later calls load only the entry points left pending)."""
        if self._loaded and not self._pending:  # the common case, without the lock: loaded is set last
            return
        with self._lock:
            if self._loading:  # this thread is loading, and a module it imports asked: what is there so far
                return
            self._loading = True
            try:
                if not self._loaded:
                    try:
                        self._load_all()
                    except BaseException:  # a failed first load is tried again whole on the next use
                        for table in (self._items, self._origin, self._broken):
                            table.clear()
                        self._fixed.clear()
                        self._pending = []
                        raise
                    self._loaded = True
                pending, self._pending = self._pending, []
                for entry_point in pending:
                    self._load_entry_point(entry_point)
            finally:
                self._loading = False

    def _load_all(self) -> None:
        for item, origin in self._builtins():
            self.add(item, origin=origin)
            self._fixed.add(item.name)
        for entry_point in importlib.metadata.entry_points(group=self.group):
            self._load_entry_point(entry_point)

    def _load_entry_point(self, entry_point: importlib.metadata.EntryPoint) -> None:
        origin = f"entry point {entry_point.name!r} ({entry_point.value})"
        try:
            loaded = entry_point.load()
        except Exception as error:  # recorded, and raised when the plugin's name is asked for
            if _initializing(entry_point.module):
                # The plugin's own module is being imported and asked the registry for something at import time:
                # not broken, only not finished. Loaded again on the next use of the registry.
                self._pending.append(entry_point)
                return
            self._broken[entry_point.name] = f"{origin} failed to load: {type(error).__name__}: {error}"
            return
        items = loaded if isinstance(loaded, Iterable) and not isinstance(loaded, self.item_type | str) else [loaded]
        for item in items:
            if not isinstance(item, self.item_type):
                self._broken[entry_point.name] = f"{origin} is a {type(item).__name__}, not a " \
                                                 f"{self.item_type.__name__}"
            elif item.name in self._items:
                self._broken[item.name] = f"{origin}: a {self.noun} named {item.name!r} is already registered by " \
                                          f"{self._origin[item.name]}"
            else:
                self.add(item, origin=origin)

    def add(self, item: Item, *, origin: str, replace: bool = False) -> None:
        """Add ``item`` under its name (``replace``: over one of that name); ``origin`` says who added it."""
        if not isinstance(item, self.item_type):
            raise TypeError(f"{self.register} takes a {self.item_type.__name__}, got {type(item).__name__}")
        with self._lock:
            if item.name in self._items and not replace:
                raise ValueError(f"a {self.noun} named {item.name!r} is already registered by "
                                 f"{self._origin[item.name]}; pass replace=True to override it")
            self._items[item.name] = item
            self._origin[item.name] = origin

    def remove(self, name: str) -> Item:
        """Remove the item ``name`` (a plugin's or a run-time registration; a built-in stays)."""
        self.load()
        with self._lock:
            if name in self._fixed:
                raise ValueError(f"{name!r} is a built-in {self.noun}")
            if name not in self._items:
                raise UnknownNameError(f"no {self.noun} named {name!r}")
            self._origin.pop(name)
            return self._items.pop(name)

    def items_by_name(self) -> dict[str, Item]:
        """Every item by name (a copy), built-ins first."""
        self.load()
        with self._lock:
            return dict(self._items)

    def broken(self) -> dict[str, str]:
        """Name -> why the plugin of that name did not load."""
        self.load()
        with self._lock:
            return dict(self._broken)

    def origin(self, name: str) -> str:
        """Where ``name`` was registered: its built-in module, ``entry point '<name>' (<value>)`` or the function
        that registered it ("" when unknown)."""
        self.load()
        with self._lock:
            return self._origin.get(name, "")

    def item(self, name: str) -> Any:
        """The item ``name`` (KeyError when there is none)."""
        self.load()
        with self._lock:
            return self._items[name]
