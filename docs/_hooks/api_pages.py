"""MkDocs hook: ``<!-- api: PACKAGE -->`` becomes one mkdocstrings block per name of ``PACKAGE.__all__``.

The public surface is what ``__all__`` lists at run time. Several packages resolve their names lazily (a module
``__getattr__``, so that ``import much_metric`` stays fast), which static analysis cannot follow; the hook therefore
imports the package, resolves each name to the module that defines it, and emits ``::: defining.module.name``. A name
documented on another API page (``much_metric.score`` is ``much_metric.scoring.score``) is linked there instead of
rendered twice.
"""

from __future__ import annotations

import importlib
import inspect
import posixpath
import re
import sys
import types
from pathlib import Path

_PROJECT = ("much_dataset", "much_metric", "much_leaderboard")
_MARKER = re.compile(r"<!-- api: ([\w.]+) -->")
#: Package -> its API page, in the order of the navigation (a name is rendered on the first page that lists it).
PAGES = {
    "much_dataset": "api/much_dataset.md",
    "much_metric.scoring": "api/scoring.md",
    "much_metric.baselines": "api/baselines.md",
    "much_metric.segmentation": "api/segmentation.md",
    "much_metric.signals": "api/signals.md",
    "much_metric.report": "api/report.md",
    "much_metric.benchmark": "api/benchmark.md",
    "much_metric.monitor": "api/monitor.md",
    "much_metric.conformal": "api/conformal.md",
    "much_metric.learned": "api/learned.md",
    "much_leaderboard": "api/leaderboard.md",
    "much_metric": "api/much_metric.md",
}


def _defining_module_of_constant(package: str, name: str, value: object) -> str:
    """The module of ``package`` whose source assigns ``name`` at top level (and holds the same object)."""
    pattern = re.compile(rf"^{re.escape(name)}\s*(:[^=\n]*)?=", re.M)
    found = []
    for module_name, module in sorted(sys.modules.items()):
        if module_name.split(".")[0] not in _PROJECT or not getattr(module, "__file__", None):
            continue
        if getattr(module, name, None) is value and pattern.search(Path(module.__file__).read_text(encoding="utf-8")):
            found.append(module_name)
    if not found:
        raise RuntimeError(f"api_pages: cannot find where {package}.{name} is defined")
    return found[0]


def _path(package: str, name: str) -> str:
    """The importable path mkdocstrings should render for ``package.name``."""
    value = getattr(importlib.import_module(package), name)
    if isinstance(value, types.ModuleType):
        return value.__name__
    if (inspect.isclass(value) or inspect.isfunction(value)) and "<locals>" not in value.__qualname__:
        return f"{value.__module__}.{value.__qualname__}"
    return f"{_defining_module_of_constant(package, name, value)}.{name}"


_STATIC: dict[str, object] = {}


def _render_path(package: str, name: str) -> str:
    """``package.name`` when static analysis (griffe) sees the name there, else the defining module's path."""
    import griffe

    if package not in _STATIC:
        _STATIC[package] = griffe.load(package, search_paths=["."], resolve_aliases=False)
    member = _STATIC[package].members.get(name)
    value = getattr(importlib.import_module(package), name)
    if member is not None and (member.is_alias or member.is_module == isinstance(value, types.ModuleType)):
        return f"{package}.{name}"
    return _path(package, name)


def _owner_pages() -> dict[str, tuple[str, str]]:
    """Resolved path -> (package, page) of the first page that documents it."""
    owners: dict[str, tuple[str, str]] = {}
    for package, page in PAGES.items():
        for name in importlib.import_module(package).__all__:
            owners.setdefault(_path(package, name), (package, page))
    return owners


def render(package: str, page: str) -> str:
    owners = _owner_pages()
    module = importlib.import_module(package)
    lines = [f"::: {package}", "    options:", "      members: false", "      show_root_heading: false", ""]
    elsewhere = []
    for name in module.__all__:
        path = _path(package, name)
        owner_package, owner_page = owners[path]
        if owner_page != page:
            elsewhere.append((name, owner_package, owner_page, path))
            continue
        lines += [f"::: {_render_path(package, name)}", "    options:", "      show_root_full_path: false",
                  "      heading_level: 2", ""]
    if elsewhere:
        lines += ["## Names documented on other pages", "", "| name | the same object as |", "|---|---|"]
        for name, owner_package, owner_page, _ in elsewhere:
            link = posixpath.relpath(owner_page, posixpath.dirname(page))
            lines.append(f"| `{package}.{name}` | [`{owner_package}.{name}`]({link}) |")
        lines.append("")
    return "\n".join(lines)


def on_page_markdown(markdown: str, page, **kwargs) -> str:
    return _MARKER.sub(lambda match: render(match.group(1), page.file.src_uri), markdown)
