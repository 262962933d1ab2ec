"""Renamed command-line flags: the new name maps 1:1 to the keyword it sets; the old one stays as a hidden alias
that still works and says, on stderr, which name replaces it."""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ["add_names_flag", "add_renamed_alias"]


class _RenamedFlag(argparse.Action):
    """Stores the value under the new flag's ``dest`` and prints one deprecation line to stderr."""

    def __init__(self, option_strings: list[str], dest: str, *, new_flag: str, **kwargs: Any) -> None:
        self.new_flag = new_flag
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        print(f"{parser.prog}: warning: {option_string} is deprecated and will be removed; use {self.new_flag} "
              "(same meaning)", file=sys.stderr)
        setattr(namespace, self.dest, values)


def add_renamed_alias(parser: argparse.ArgumentParser, old_flag: str, new_flag: str, *, dest: str,
                      **kwargs: Any) -> None:
    """Accept ``old_flag`` as a hidden (not in ``--help``) alias of ``new_flag``, storing into ``dest``;
    ``kwargs`` (``type``, ``choices``) as the new flag's."""
    parser.add_argument(old_flag, dest=dest, action=_RenamedFlag, new_flag=new_flag, default=argparse.SUPPRESS,
                        help=argparse.SUPPRESS, **kwargs)


class _Names(argparse.Action):
    """Appends every comma-separated name of each use: ``--signals a,b --signals c`` -> ``["a", "b", "c"]``."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        names = list(getattr(namespace, self.dest, None) or [])
        names += [name.strip() for name in str(values).split(",") if name.strip()]
        setattr(namespace, self.dest, names)


def add_names_flag(parser: argparse.ArgumentParser, *flags: str, dest: str, help: str) -> None:
    """A flag naming several things the one way every command accepts: a comma-separated list, the flag repeated,
    or both (``--signals a,b --signals c``); every spelling in ``flags`` is accepted (``--signals``, ``--signal``)."""
    # the first spelling is the visible one and names the keyword (one name per concept); the others are aliases
    parser.add_argument(flags[0], dest=dest, action=_Names, default=None,
                        help=f"{help} (comma-separated and/or repeated)")
    if flags[1:]:
        parser.add_argument(*flags[1:], dest=dest, action=_Names, default=None, help=argparse.SUPPRESS)
