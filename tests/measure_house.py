"""Measure the house (issue 32's table): arrows back up / circles of the import graph, the largest public signature,
functions over 80 lines, names in package ``__all__``s, and ruff's PLR0913 / C901 / RUF100 counts.

    python -m tests.measure_house [ROOT]        # ROOT: a checkout (default: this one); prints one table row each

The graph and signature counts use tests/test_architecture.py's own walkers (one definition of the rules), run on
ROOT's files; hence it lives under tests/ (no script imports ``tests``). Run it from the root of this checkout.
The per-package counts (:func:`public_names`, :func:`long_functions`) are the gates of tests/test_house_ceilings.py.
Ruff counts run ``ruff check --select <rule> --exit-zero`` on ROOT's much_dataset, much_metric and builder (PLR0913
at ruff's default of 5 arguments, C901 at complexity 10).
"""

from __future__ import annotations

import argparse
import ast
import json
import shutil
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
PACKAGES = ("much_dataset", "much_metric", "builder")


def _architecture(root: Path):
    """tests/test_architecture.py of THIS checkout, pointed at ``root``."""
    import tests.test_architecture as arch

    arch.REPO = root
    return arch


def functions_over(root: Path, lines: int = 80, packages: tuple[str, ...] = PACKAGES) -> list[str]:
    """``path:line name`` of every function of ``packages`` longer than ``lines`` lines (decorators excluded)."""
    found = []
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and \
                        node.end_lineno - node.lineno + 1 > lines:
                    found.append(f"{path.relative_to(root)}:{node.lineno} {node.name}")
    return found


def _all_names(init: Path) -> int:
    """Names in the ``__all__`` of one ``__init__.py`` (a list/tuple literal; ``*_LAZY`` spreads and
    ``list(_LAZY)`` are resolved against the module's dict literal of that name)."""
    total = 0
    tree = ast.parse(init.read_text(encoding="utf-8"))
    dicts = {t.id: node.value for node in tree.body if isinstance(node, ast.Assign)
             for t in node.targets if isinstance(t, ast.Name) and isinstance(node.value, ast.Dict)}
    for node in tree.body:
        value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, ast.AnnAssign) else []
        if value is None or not any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            continue
        if isinstance(value, ast.Call) and value.args and isinstance(value.args[0], ast.Name):
            value = ast.List(elts=[ast.Starred(value=value.args[0])])  # list(_LAZY) / sorted(_LAZY)
        for element in getattr(value, "elts", []):
            if isinstance(element, ast.Starred) and isinstance(element.value, ast.Name) \
                    and element.value.id in dicts:
                total += len(dicts[element.value.id].keys)
            elif isinstance(element, ast.Constant):
                total += 1
    return total


def public_names(root: Path, packages: tuple[str, ...] = PACKAGES) -> dict[str, int]:
    """Per package, the names listed in the ``__all__`` of every ``__init__.py`` in it (the package and its
    subpackages: what a user imports from a package)."""
    return {package: sum(_all_names(init) for init in sorted((root / package).rglob("__init__.py")))
            for package in packages}


def names_in_all(root: Path) -> int:
    """Names in the package ``__all__``s of much_dataset, much_metric and builder (issue 32's row)."""
    return sum(public_names(root).values())


def long_functions(root: Path, packages: tuple[str, ...] = PACKAGES, lines: int = 80) -> dict[str, int]:
    """Per package, how many functions are longer than ``lines`` lines."""
    return {package: len(functions_over(root, lines, (package,))) for package in packages}


def ruff_count(root: Path, rule: str) -> int | None:
    """Violations of ``rule`` under ROOT's own ruff configuration plus ``rule`` (so RUF100 judges the ``noqa``
    comments against the rules the project selects). None without ruff."""
    ruff = shutil.which("ruff")
    if ruff is None:
        return None
    out = subprocess.run([ruff, "check", "--extend-select", rule, "--exit-zero", "--output-format", "json",
                          *[str(root / p) for p in PACKAGES]], capture_output=True, text=True, check=True, cwd=root)
    return sum(1 for hit in json.loads(out.stdout or "[]") if hit["code"] == rule)


def measure(root: Path) -> dict[str, object]:
    arch = _architecture(root)
    graph = arch.import_graph()
    arrows = arch.upward_arrows(graph)
    circles = arch.circles(graph)
    signatures = arch.public_signatures()
    largest = sorted(signatures.items(), key=lambda item: -item[1])[:5]
    return {
        "arrows back up": len(arrows),
        "circles": len(circles),
        "circles (modules)": circles,
        "largest public signatures": largest,
        "public signatures over 8": sum(n > 8 for n in signatures.values()),
        "functions over 80 lines": len(functions_over(root)),
        "names in package __all__s": names_in_all(root),
        "ruff PLR0913": ruff_count(root, "PLR0913"),
        "ruff C901": ruff_count(root, "C901"),
        "ruff RUF100": ruff_count(root, "RUF100"),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", nargs="?", default=str(HERE))
    args = parser.parse_args(argv)
    for key, value in measure(Path(args.root).resolve()).items():
        print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
