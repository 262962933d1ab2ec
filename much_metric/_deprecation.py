"""Old public names kept for a while after a rename: reading one warns (``FutureWarning``, shown to end users by
default) and returns the new object. A module installs them with ``__getattr__ = renamed(__name__, {...})``, so
the old name is no definition of its own (tests/test_architecture.py's one-name-per-concept walk does not see it)
and ``from module import *`` no longer exports it."""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["moved", "renamed"]


def renamed(module: str, names: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` resolving each old name of ``names`` (old -> new, both in ``module``) to the new
    object with a ``FutureWarning`` that names both; any other name is the usual ``AttributeError``."""

    def __getattr__(name: str) -> Any:
        if name in names:
            new = names[name]
            warnings.warn(f"{module}.{name} is deprecated and will be removed: use {module}.{new}, the same function "
                          "under a name that says what it does", FutureWarning, stacklevel=2)
            return getattr(sys.modules[module], new)
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__


def moved(module: str, names: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for public names that moved to another module: each old name of ``names`` (name ->
    the module that holds it now) is imported from there, by name (the new module may sit above this one: the import
    runs only when a caller asks for the old name), with a ``FutureWarning`` naming the new place; any other name is
    the usual ``AttributeError``."""

    def __getattr__(name: str) -> Any:
        if name in names:
            import importlib

            warnings.warn(f"{module}.{name} has moved and the old place will be removed: use {names[name]}.{name}",
                          FutureWarning, stacklevel=2)
            return getattr(importlib.import_module(names[name]), name)
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__
