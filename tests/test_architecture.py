"""The layout rules of the design: stage packages, no import cycle, no reaching into other packages' private
modules, no process-wide side effects in library code, and the version gates' public fallbacks. The import-graph
rules also hold for the code on top of the packages: the scripts (benchmarks/, scripts/, app.py) and the plugins
(plugins/)."""

from __future__ import annotations

import ast
import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("much_dataset", "much_metric", "builder", "much_leaderboard")
STAGES = ("segmentation", "scoring", "baselines", "signals", "report", "benchmark", "monitor", "cli")
#: Plugin packages (distributions of their own under plugins/): package -> the folder that holds it.
PLUGINS = {"much_peers": "plugins/much-peers"}
#: Scripts: each folder is a flat namespace (a script imports a sibling by its file name: the script's own folder is
#: on ``sys.path``); module names are the paths with dots (``benchmarks.nli_reference``, ``app``).
SCRIPT_FOLDERS = ("benchmarks", "scripts", "scripts/data", "scripts/tools")
SCRIPT_FILES = ("app.py",)
_SCRIPT_TOPS = {path.split("/")[0].removesuffix(".py") for path in (*SCRIPT_FOLDERS, *SCRIPT_FILES)}


def _root_of(package: str) -> Path:
    return REPO / PLUGINS[package] if package in PLUGINS else REPO


def _modules(package: str):
    for path in sorted((_root_of(package) / package).rglob("*.py")):
        yield path, ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _is_script(path: Path) -> bool:
    return path.parent.relative_to(REPO).as_posix() in SCRIPT_FOLDERS if REPO in path.parents else False


def _sibling(path: Path, name: str) -> bool:
    """``name`` (``nli_reference.tiny_nli``) starts with the file name of a script beside the script ``path``."""
    return _is_script(path) and (path.parent / f"{name.split('.')[0]}.py").is_file()


def _scripts():
    """(path, tree) of every script: the ``*.py`` files of :data:`SCRIPT_FOLDERS` and :data:`SCRIPT_FILES`."""
    paths = [path for folder in SCRIPT_FOLDERS for path in sorted((REPO / folder).glob("*.py"))]
    for path in [*paths, *(REPO / name for name in SCRIPT_FILES)]:
        yield path, ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _imported(tree: ast.AST) -> list[str]:
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
            names += [f"{node.module}.{alias.name}" for alias in node.names]
    return names


def test_much_dataset_imports_nothing_from_much_metric():
    offenders = [(path.name, name) for path, tree in _modules("much_dataset") for name in _imported(tree)
                 if name.split(".")[0] == "much_metric"]
    assert offenders == []


#: The web application lives in its own package: the metric never imports it nor a web framework, not even inside a
#: function.
_WEB = ("much_leaderboard", "gradio", "fastapi", "uvicorn", "starlette", "playwright")


def test_much_metric_imports_no_web_server_anywhere():
    offenders = [(str(path.relative_to(REPO)), name) for package in ("much_dataset", "much_metric", "builder")
                 for path, tree in _modules(package) for name in _imported(tree) if name.split(".")[0] in _WEB]
    assert offenders == []
    code = ("import sys, much_metric, much_metric.signals, much_metric.cli; much_metric.cli.build_parser(); "
            f"print(sorted(m for m in sys.modules if m.split('.')[0] in {_WEB!r}))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_loading_the_sample_does_not_import_much_metric():
    code = ("import sys, much_dataset; much_dataset.load('sample', split='test'); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'much_metric'))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def _stage_of(path: Path) -> str | None:
    parts = path.relative_to(REPO).parts
    return parts[1] if len(parts) > 2 and parts[0] == "much_metric" and parts[1] in STAGES else None


def test_no_module_imports_another_stage_private_module():
    offenders = []
    for package in PACKAGES:
        for path, tree in _modules(package):
            own = _stage_of(path)
            for name in _imported(tree):
                parts = name.split(".")
                if len(parts) >= 3 and parts[0] == "much_metric" and parts[1] in STAGES and parts[2].startswith("_"):
                    if parts[1] != own:
                        offenders.append((str(path.relative_to(REPO)), name))
    assert offenders == []


def _module_file(name: str) -> Path | None:
    """The file of one of our modules (``much_metric.scoring._api``, ``much_peers._claims``), or None when ``name`` is
    not a module of ours."""
    top = name.split(".")[0]
    if top not in PACKAGES and top not in PLUGINS and top not in _SCRIPT_TOPS:
        return None
    base = _root_of(top).joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _module_of(path: Path) -> str:
    """The dotted name of a file of ours: a package module, a plugin module or a script (``benchmarks.bench_ktc``)."""
    root = next((REPO / folder for folder in PLUGINS.values() if (REPO / folder) in path.parents), REPO)
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_name_uses(path: Path, tree: ast.AST) -> list[tuple[str, int, str]]:
    """``from x import _name`` and ``x._name`` where ``x`` is another module of ours and ``_name`` is not a module
    (private modules are governed by the stage rule above): a helper that other modules use needs a public name."""
    own = _module_of(path)
    package = own if path.name == "__init__.py" else own.rpartition(".")[0]
    modules: dict[str, str] = {}  # local name -> module it is bound to
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _module_file(alias.name):
                    modules[alias.asname or alias.name] = alias.name
        elif isinstance(node, ast.ImportFrom):
            source = node.module or ""
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                source = ".".join([*base, *([source] if source else [])])
            if source == own or _module_file(source) is None:
                continue
            for alias in node.names:
                if _module_file(f"{source}.{alias.name}"):
                    modules[alias.asname or alias.name] = f"{source}.{alias.name}"
                elif _private(alias.name):
                    found.append((str(path.relative_to(REPO)), node.lineno, f"from {source} import {alias.name}"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr) and not _module_file(
                f"{modules.get(ast.unparse(node.value), ast.unparse(node.value))}.{node.attr}"):
            target = modules.get(ast.unparse(node.value)) or (
                ast.unparse(node.value) if _module_file(ast.unparse(node.value)) else None)
            if target is not None and target != own:
                found.append((str(path.relative_to(REPO)), node.lineno, f"{target}.{node.attr}"))
    return found


def test_library_code_uses_no_other_module_private_names():
    """Library code (not tests: a test may reach into the module it tests) never imports or reads another module's
    ``_private`` names."""
    offenders = [hit for package in PACKAGES for path, tree in _modules(package)
                 for hit in private_name_uses(path, tree)]
    assert offenders == []


def private_imports_on_top(path: Path, tree: ast.AST) -> list[tuple[str, int, str]]:
    """What a script or a plugin module may not import: ``tests`` (a script runs without the test suite), a private
    module of a package (``much_metric.scoring._bootstrap``; a plugin's own private modules are its business), a
    private name of one (``from much_metric.x import _y``, ``x._y``), or a sibling script's private name."""
    own = _module_of(path)
    found = []
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            # the module, and each imported name that is a module (``from much_metric.scoring import _bootstrap``)
            # or a sibling script's name
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names
                                     if _module_file(f"{node.module}.{alias.name}") or _sibling(path, node.module)]
        for name in names:
            parts = name.split(".")
            ours = parts[0] in PACKAGES or (parts[0] in PLUGINS and parts[0] != own.split(".")[0]) \
                or _sibling(path, name)
            if parts[0] == "tests" or (ours and any(_private(part) for part in parts[1:])):
                found.append((str(path.relative_to(REPO)), node.lineno, name))
    found += private_name_uses(path, tree)
    return found


def test_scripts_and_plugins_import_no_tests_and_no_private_module_or_name():
    """Benchmarks, tools, data makers, app.py and the plugins use the packages' public surface only: a helper they
    need gets a public name (e.g. ``much_metric.scoring.engine``, ``builder.models``) or lives beside them."""
    files = [*_scripts(), *(item for plugin in PLUGINS for item in _modules(plugin))]
    offenders = [hit for path, tree in files for hit in private_imports_on_top(path, tree)]
    assert offenders == []


#: An import statement alone on a line of a string (a ``python -c`` program, a subprocess's code).
_IMPORT_LINE = re.compile(r"^\s*(?:import\s+[\w., ]+|from\s+[\w.]+\s+import\s+[\w., ()]+?)\s*$")


def string_imports(tree: ast.AST) -> ast.Module:
    """The import statements written inside string literals of ``tree`` (code generated for another process; an
    f-string's fields count as ``_``), as one module whose nodes carry the string's line number."""
    body = []
    inside_fstrings = {id(part) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for part in node.values}
    for node in ast.walk(tree):
        if id(node) in inside_fstrings:
            continue
        if isinstance(node, ast.JoinedStr):
            text = "".join(part.value if isinstance(part, ast.Constant) else "_" for part in node.values)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "import" in node.value:
            text = node.value
        else:
            continue
        for line in text.replace(";", "\n").splitlines():
            if _IMPORT_LINE.match(line):
                try:
                    statement = ast.parse(line.strip()).body[0]
                except SyntaxError:
                    continue
                for inner in ast.walk(statement):
                    inner.lineno = node.lineno
                body.append(statement)
    return ast.Module(body=body, type_ignores=[])


def test_no_code_string_imports_a_private_module_or_name():
    """Code written for another process (``python -c``, a subprocess's program) keeps the script rule: the
    packages' public surface only, no ``tests`` (tests themselves may reach into what they test)."""
    files = [*(item for package in (*PACKAGES, *PLUGINS) for item in _modules(package)), *_scripts()]
    offenders = [hit for path, tree in files for hit in private_imports_on_top(path, string_imports(tree))]
    assert offenders == []


def test_the_string_scan_finds_imports_in_plain_and_formatted_code():
    code = ('code = ("import sys\\n" "from builder._llm import load_model\\n" f"rows = {1}\\n")\n'
            'cmd = ["python", "-c", "import much_metric; from much_metric.scoring import _api"]\n'
            'text = "the words import and from in prose are not code"\n')
    hits = private_imports_on_top(REPO / "benchmarks" / "bench_example.py", string_imports(ast.parse(code)))
    assert [(hit[1], hit[2]) for hit in hits] == [(1, "builder._llm"), (2, "much_metric.scoring._api")]


def test_the_script_check_catches_tests_private_modules_and_sibling_private_names():
    code = ("from tests import assets\nfrom much_metric.scoring._bootstrap import resample_counts\n"
            "from nli_reference import _tiny, tiny_nli\nimport much_metric.baselines._ktc_kernels\n"
            "from much_metric.baselines.methods.ktc import _ktc_flat, ktc\nfrom much_peers._claims import to_unit\n")
    hits = [hit[2] for hit in private_imports_on_top(REPO / "benchmarks" / "bench_example.py", ast.parse(code))]
    assert hits == ["tests", "much_metric.scoring._bootstrap", "nli_reference._tiny",
                    "much_metric.baselines._ktc_kernels", "much_peers._claims",
                    "from much_metric.baselines.methods.ktc import _ktc_flat"]
    inside = REPO / PLUGINS["much_peers"] / "much_peers" / "baselines.py"
    assert private_imports_on_top(inside, ast.parse("from much_peers._claims import to_unit\n")) == []


def test_the_private_name_check_catches_both_forms():
    code = ("from much_metric.baselines.methods.probability import _check_delta, token_entropy\n"
            "import much_metric.scoring._api as api\n"
            "from much_metric.scoring import _calibration\n"
            "from much_metric import _compat\n"
            "import builder._locks\n"
            "api._check_inputs\n_calibration._fit_isotonic\nbuilder._locks._is_free\n_compat.tested_version\n"
            "self._private\n")
    path = REPO / "much_metric" / "example_module.py"
    hits = [hit[2] for hit in private_name_uses(path, ast.parse(code))]
    assert hits == ["from much_metric.baselines.methods.probability import _check_delta",
                    "much_metric.scoring._api._check_inputs", "much_metric.scoring._calibration._fit_isotonic",
                    "builder._locks._is_free"]


def test_stage_packages_are_imported_through_their_declared_surface():
    """``from much_metric.<stage> import name`` in another stage names only what the stage's ``__all__`` lists."""
    import importlib

    offenders = []
    for package in PACKAGES:
        for path, tree in _modules(package):
            own = _stage_of(path)
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                        and node.module.startswith("much_metric.") and node.module.split(".")[1] in STAGES \
                        and node.module.count(".") == 1 and node.module.split(".")[1] != own:
                    module = importlib.import_module(node.module)
                    public = getattr(module, "__all__", None)  # without __all__: every name not starting with _
                    offenders += [(str(path.relative_to(REPO)), node.module, alias.name) for alias in node.names
                                  if (alias.name not in public if public is not None else _private(alias.name))
                                  and not _module_file(f"{node.module}.{alias.name}")]
    assert offenders == []


# --- the import graph is a DAG that runs down the layers ------------------------------------------------------------

#: The layers of the house, bottom first: a module imports only modules of its own layer or below
#: (docs/decisions.md#layers). Every module of ``PACKAGES``, of the plugins and every script must fall into one (a
#: new package gets a place here first).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("much_dataset",),
    # shared helpers with no stage of their own (the root package only re-exports lazily, by name)
    ("much_metric.__init__", "much_metric._lazy", "much_metric._compat", "much_metric.fileio", "much_metric.models",
     "much_metric.capture", "much_metric.mushroom", "much_metric._deprecation", "much_metric._progress",
     "much_metric.commands", "much_metric._cache", "much_metric._plugins"),
    ("much_metric.segmentation", "much_metric.scoring"),
    ("much_metric.evaluate_module", "much_metric.much_metric"),  # the `evaluate` module over the scoring
    ("much_metric.signals",),  # the file format
    ("much_metric.report",),  # evaluation, ranking, calibration, spans and the HTML report over the files
    ("much_metric.baselines",),
    ("much_metric.learned",),
    ("much_metric.benchmark",),
    ("much_metric.monitor",),
    ("builder",),
    ("much_metric.cli", "much_metric.__main__"),
    ("much_metric.leaderboard", "much_leaderboard"),
    ("much_peers",),  # plugins: on top of the packages, below the scripts
    ("app", "benchmarks", "scripts"),  # the scripts: nothing imports them
)

def _resolve_from(package: str, node: ast.ImportFrom) -> str:
    source = node.module or ""
    if node.level:
        base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
        source = ".".join([*base, *([source] if source else [])])
    return source


def _edges(path: Path, tree: ast.AST) -> dict[str, int]:
    """{imported module of ours: first line} of one file; a script's bare import of a sibling file
    (``import nli_reference`` in benchmarks/) names that sibling (``benchmarks.nli_reference``)."""
    own = _module_of(path)
    package = own if path.name == "__init__.py" else own.rpartition(".")[0]
    edges: dict[str, int] = {}
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            source = _resolve_from(package, node)
            targets = [f"{source}.{alias.name}" if _module_file(f"{source}.{alias.name}") else source
                       for alias in node.names]
        for target in targets:
            if _sibling(path, target) and _module_file(target) is None:
                edges.setdefault(f"{package}.{target.split('.')[0]}", node.lineno)  # a sibling script
                continue
            while target and not _module_file(target):  # ``import a.b.c`` of ours: the deepest module
                target = target.rpartition(".")[0]
            if target and target != own:
                edges.setdefault(target, node.lineno)
    return edges


def import_graph(packages: tuple[str, ...] = PACKAGES, *, scripts: bool = False) -> dict[str, dict[str, int]]:
    """Module -> {imported module of ours: first line}, from EVERY import statement of the module: top-level, inside
    functions and methods, under ``if TYPE_CHECKING`` -- a function-level import hides a cycle from Python's import
    machinery, not from this graph. ``from package import name`` counts as an import of ``package.name`` when that is
    a module, else of ``package``. ``scripts=True`` adds the plugins' modules and the scripts."""
    files = [item for package in packages for item in _modules(package)]
    if scripts:
        files += [item for plugin in PLUGINS for item in _modules(plugin)] + list(_scripts())
    return {_module_of(path): _edges(path, tree) for path, tree in files}


def layer_of(module: str) -> int:
    """Index in :data:`LAYERS` of the longest prefix naming ``module`` (the root ``much_metric`` is
    ``much_metric.__init__``); ValueError for a module no layer places."""
    name = "much_metric.__init__" if module == "much_metric" else module
    best, found = -1, None
    for index, layer in enumerate(LAYERS):
        for prefix in layer:
            if (name == prefix or name.startswith(prefix + ".")) and len(prefix) > best:
                best, found = len(prefix), index
    if found is None:
        raise ValueError(f"{module} is in no layer of LAYERS")
    return found


def upward_arrows(graph: dict[str, dict[str, int]]) -> set[tuple[str, str]]:
    return {(source, target) for source, edges in graph.items() for target in edges
            if layer_of(target) > layer_of(source)}


def circles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, {}))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, {})))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_every_module_has_a_layer():
    assert [m for m in import_graph(scripts=True) if not any(m == p or m.startswith(p + ".") or (m == "much_metric")
                                                             for layer in LAYERS for p in layer)] == []


def test_no_import_runs_back_up_the_layers():
    """Over the packages, the plugins and the scripts: nothing imports a plugin or a script but what sits above."""
    arrows = upward_arrows(import_graph(scripts=True))
    assert sorted(arrows) == [], "imports from a lower layer into a higher one"


def test_the_import_graph_has_no_circle():
    """Over modules (every import, function-level included; the plugins and the scripts too) and over layers'
    packages."""
    graph = import_graph(scripts=True)
    assert circles(graph) == []
    packages: dict[str, dict[str, int]] = {}
    for source, edges in graph.items():
        for target in edges:
            a, b = LAYERS[layer_of(source)], LAYERS[layer_of(target)]
            if a != b:
                packages.setdefault(" ".join(a), {})[" ".join(b)] = 0
    assert circles(packages) == []


def test_the_graph_checks_catch_what_they_claim():
    """A function-level import that closes a cycle, and an arrow from scoring up to the baselines, are both found;
    so are a script's sibling import and a library module importing a script."""
    graph = {"much_metric.scoring._a": {"much_metric.scoring._b": 1},
             "much_metric.scoring._b": {"much_metric.scoring._a": 9, "much_metric.baselines.registry": 3},
             "much_metric.baselines.registry": {"much_metric.scoring._a": 1}}
    assert circles(graph) == [["much_metric.baselines.registry", "much_metric.scoring._a", "much_metric.scoring._b"]]
    assert upward_arrows(graph) == {("much_metric.scoring._b", "much_metric.baselines.registry")}
    code = "def f():\n    from much_metric.baselines import registry\n"
    path = REPO / "much_metric" / "scoring" / "_example.py"
    tree = ast.parse(code)
    own = _module_of(path)
    found = [_resolve_from(own.rpartition(".")[0], node) for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
    assert found == ["much_metric.baselines"]
    assert layer_of("much_metric.scoring._example") < layer_of("much_metric.baselines.registry")
    with pytest.raises(ValueError, match="in no layer"):
        layer_of("somewhere.else")
    script = REPO / "benchmarks" / "bench_example.py"
    assert _edges(script, ast.parse("def f():\n    from nli_reference import tiny_nli\n    import much_peers\n")) \
        == {"benchmarks.nli_reference": 2, "much_peers": 3}
    assert upward_arrows({"much_metric.scoring._a": {"benchmarks.nli_reference": 1},
                          "much_peers.baselines": {"much_metric.baselines": 1}}) \
        == {("much_metric.scoring._a", "benchmarks.nli_reference")}


# --- short signatures ---------------------------------------------------------------------------------------------

#: The most parameters a public function or method of much_metric / much_dataset takes (self and cls not counted).
MAX_PARAMETERS = 8


def parameter_count(node: ast.FunctionDef | ast.AsyncFunctionDef, *, method: bool) -> int:
    """Positional-only, positional and keyword-only parameters (``*args``/``**kwargs`` not counted), less ``self``
    or ``cls`` for a method."""
    names = [a.arg for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs)]
    return len(names) - (1 if method and names and names[0] in ("self", "cls") else 0)


def public_signatures(packages: tuple[str, ...] = ("much_dataset", "much_metric")) -> dict[str, int]:
    """``module.function`` / ``module.Class.method`` -> number of parameters, for every public function and public
    method (``__init__`` included) of every module, private modules included (their names are re-exported)."""
    found: dict[str, int] = {}
    for package in packages:
        for path, tree in _modules(package):
            module = _module_of(path)
            for node in tree.body:
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and not _private(node.name):
                    found[f"{module}.{node.name}"] = parameter_count(node, method=False)
                elif isinstance(node, ast.ClassDef) and not _private(node.name):
                    for item in node.body:
                        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) \
                                and (not _private(item.name) or item.name == "__init__"):
                            found[f"{module}.{node.name}.{item.name}"] = parameter_count(item, method=True)
    return found


def test_no_public_signature_is_longer_than_eight():
    long = {name: n for name, n in public_signatures().items() if n > MAX_PARAMETERS}
    assert sorted(long) == [], "group options into a frozen dataclass"


# --- one name per concept: no two public functions share a name with different definitions ---------------------

#: The interface every subcommand module implements (``much <command>``, ``python -m builder <step>``): one meaning,
#: one definition per command module, like ``fit`` on every estimator.
COMMAND_PROTOCOL = frozenset({"add_arguments", "register", "run", "build_parser", "main"})


def _is_command_module(module: str) -> bool:
    return module.startswith(("much_metric.cli", "builder"))


def public_functions(root: Path = REPO, packages: tuple[str, ...] = ("much_dataset", "much_metric", "builder"),
                     ) -> dict[str, set[tuple[str, str]]]:
    """Public name -> the definitions (defining module, function name) a user reaches under that name: the functions
    of every public module (its ``__all__``, or its public ``def``s and lazy names without one), imports followed to
    their ``def``. A deprecated alias (a module ``__getattr__``, much_metric/_deprecation.py) defines nothing, so it
    is not counted; the subcommand protocol's functions in command modules are not either."""
    info: dict[str, dict] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            parts = path.relative_to(root).with_suffix("").parts
            module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            base_package = module if path.name == "__init__.py" else module.rpartition(".")[0]
            entry: dict = {"defs": set(), "imports": {}, "all": None, "lazy": {}}
            for node in tree.body:
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    entry["defs"].add(node.name)
                elif isinstance(node, ast.ImportFrom):
                    source = _resolve_from(base_package, node)
                    entry["imports"].update({alias.asname or alias.name: (source, alias.name) for alias in node.names})
                elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                    target, value = node.targets[0].id, node.value
                    if target == "__all__" and isinstance(value, ast.List | ast.Tuple):
                        entry["all"] = [e.value for e in value.elts if isinstance(e, ast.Constant)]
                    elif target == "_LAZY" and isinstance(value, ast.Dict):
                        entry["lazy"] = {k.value: v.value for k, v in zip(value.keys, value.values, strict=True)
                                         if isinstance(k, ast.Constant) and isinstance(v, ast.Constant)}
            info[module] = entry

    def resolve(module: str, name: str, depth: int = 0) -> tuple[str, str] | None:
        entry = info.get(module)
        if entry is None or depth > 20:
            return None
        if name in entry["defs"]:
            return module, name
        if name in entry["imports"]:
            return resolve(*entry["imports"][name], depth + 1)
        if name in entry["lazy"]:
            return resolve(entry["lazy"][name], name, depth + 1)
        return None

    found: dict[str, set[tuple[str, str]]] = {}
    for module, entry in info.items():
        if any(_private(part) for part in module.split(".")):
            continue
        names = entry["all"] if entry["all"] is not None else [*entry["defs"], *entry["lazy"]]
        for name in names:
            definition = None if _private(name) else resolve(module, name)
            if definition is None or (name in COMMAND_PROTOCOL and _is_command_module(definition[0])):
                continue
            found.setdefault(name, set()).add(definition)
    return found


def test_no_two_public_functions_share_a_name_with_different_definitions():
    duplicates = {name: sorted(found) for name, found in public_functions().items() if len(found) > 1}
    assert duplicates == {}


def test_the_name_walk_sees_reexports_and_ignores_aliases(tmp_path):
    files = {
        "pkg_a/__init__.py": "from pkg_a._core import score\n__all__ = ['score']\n",
        "pkg_a/_core.py": "def score(x):\n    return x\n",
        "pkg_a/reuse.py": "from pkg_a._core import score\n__all__ = ['score']\n",  # the same function: fine
        "pkg_b/__init__.py": "_LAZY = {'score': 'pkg_b.spans'}\n",
        "pkg_b/spans.py": "def score(spans):\n    return spans\n\ndef _hidden():\n    pass\n",
        "pkg_b/old.py": "from pkg_a import score as _s\n__getattr__ = None\nscore = _s\n",  # an alias, not a def
        "pkg_b/cli.py": "def run(args):\n    pass\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    found = public_functions(tmp_path, ("pkg_a", "pkg_b"))
    assert found["score"] == {("pkg_a._core", "score"), ("pkg_b.spans", "score")}  # two meanings: caught
    assert "_hidden" not in found and found["run"] == {("pkg_b.cli", "run")}
    assert public_functions()["score"] == {("much_metric.scoring._api", "score")}
    assert public_functions()["compare"] == {("much_metric.scoring._api", "compare")}


def test_the_signature_walk_counts_methods_and_keyword_only_parameters():
    tree = ast.parse("def f(a, b, /, c, *args, d, e=1, **kw): ...\nclass K:\n    def __init__(self, x, *, y): ...\n")
    function, cls = tree.body
    assert parameter_count(function, method=False) == 5
    assert parameter_count(cls.body[0], method=True) == 2
    signatures = public_signatures()
    assert signatures["much_metric.benchmark._run.run_benchmark"] == 7
    assert signatures["much_dataset.loader.load"] == 7
    assert signatures["much_metric.baselines.runner.compute_signals"] == 6  # resources= (ResourceOptions)
    assert signatures["much_metric.report._evaluation.evaluate_signals"] == 6  # evaluation= (EvaluationOptions)
    assert signatures["much_metric.baselines.nli.NliScorer.__init__"] == 7  # batching= (NliBatching)
    assert signatures["much_metric.baselines.neighbour_job.count_shard"] == 7


_GLOBAL_SWITCHES = {
    ("gc", "disable"), ("gc", "enable"), ("gc", "freeze"), ("matplotlib", "use"), ("logging", "basicConfig"),
    ("sys", "setrecursionlimit"), ("torch", "set_num_threads"), ("os", "umask"),
}
#: Entry points acting on the user's own flag (``--threads``) may set the process's state: that is their job.
_ALLOWED = {("builder/import_mushroom.py", "set_num_threads")}


def test_library_code_switches_no_global_state():
    offenders = []
    for package in PACKAGES:
        for path, tree in _modules(package):
            for node in ast.walk(tree):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                        and isinstance(node.func.value, ast.Name) \
                        and (node.func.value.id, node.func.attr) in _GLOBAL_SWITCHES \
                        and (str(path.relative_to(REPO)), node.func.attr) not in _ALLOWED:
                    offenders.append((str(path.relative_to(REPO)), node.lineno, node.func.attr))
                if isinstance(node, ast.Assign) and any(
                        isinstance(t, ast.Subscript) and ast.unparse(t.value) == "os.environ" for t in node.targets):
                    offenders.append((str(path.relative_to(REPO)), node.lineno, "os.environ"))
    assert offenders == []


def test_each_stage_is_a_package_with_one_public_module():
    for stage in STAGES:
        folder = REPO / "much_metric" / stage
        assert (folder / "__init__.py").is_file(), stage
        doc = ast.get_docstring(ast.parse((folder / "__init__.py").read_text(encoding="utf-8")))
        assert doc, f"much_metric/{stage}/__init__.py must say what the stage offers"


def test_the_public_names_of_before_the_split_still_import():
    import much_metric
    from much_metric.baselines import ccp, max_likelihood, sar, token_entropy, token_likelihood  # noqa: F401

    for name in ("score", "segment", "segment_many", "IncrementalSegmenter", "aggregate_claims", "compare",
                 "select_samples", "read_signals", "write_signals", "load_metric"):
        assert callable(getattr(much_metric, name)), name


# --- nltk's Treebank rules: our stdlib-``re`` recompilation is exact only for the rules it was checked on --------


def _treebank_rule_sources() -> list:
    from nltk.tokenize.treebank import TreebankWordTokenizer

    sources = []
    for attribute in ("STARTING_QUOTES", "PUNCTUATION", "PARENS_BRACKETS", "CONVERT_PARENTHESES", "DOUBLE_DASHES",
                      "ENDING_QUOTES", "CONTRACTIONS2", "CONTRACTIONS3"):
        value = getattr(TreebankWordTokenizer, attribute)
        items = [value] if not isinstance(value, list) else value
        for item in items:
            rule, replacement = item if isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], str) \
                else (item, None)
            sources.append([attribute, str(rule.pattern), int(rule.flags), replacement])
    return sources


def test_nltk_treebank_rules_are_the_ones_the_recompilation_was_checked_on():
    digest = hashlib.sha256(json.dumps(_treebank_rule_sources()).encode("utf-8")).hexdigest()
    recorded = (REPO / "tests" / "data" / "treebank_rules.sha256").read_text(encoding="utf-8").split()[0]
    assert digest == recorded, (
        "nltk's Treebank rules changed: rerun the segmenter parity tests against much-segmenter, then record the new "
        "digest in tests/data/treebank_rules.sha256"
    )


TEXTS = [
    "Victor Hugo wrote Les Misérables in 1862. He didn't stop there; \"Notre-Dame\" came first (1831).",
    "¿Quién escribió «Cien años de soledad»? Gabriel García Márquez, en 1967 – gımme cannot gonna.",
    "Die Hauptstadt ist Berlin… und nicht Bonn!! L'homme qu'il a vu n'est pas là.",
]


def test_segmentation_without_the_private_fast_paths_is_identical(monkeypatch):
    """With every version gate closed (an untested nltk / transformers / datasets), the public paths give the same
    claims as the fast paths."""
    from much_metric import _compat
    from much_metric.segmentation import _treebank, _words, segment, segment_many
    from tests import assets

    tokenizer = assets.llama3_tokenizer()
    ids = [tokenizer.encode(text, add_special_tokens=False) for text in TEXTS]
    fast = [segment(text, tokenizer, token_ids=i) for text, i in zip(TEXTS, ids, strict=True)]
    fast_many = segment_many(TEXTS, tokenizer, token_ids=ids)

    monkeypatch.setattr(_compat, "tested_version", lambda package: False)
    monkeypatch.setattr(_compat, "sre_parser", lambda: None)
    for module in (_treebank, _words):
        for name in ("tested_version", "sre_parser"):
            if hasattr(module, name):
                monkeypatch.setattr(module, name, getattr(_compat, name))
    for cached in (_treebank._stdlib_treebank, _treebank._contraction_rules):
        cached.cache_clear()
    _words.forget_pieces()
    try:
        slow = [segment(text, tokenizer, token_ids=i) for text, i in zip(TEXTS, ids, strict=True)]
        slow_many = segment_many(TEXTS, tokenizer, token_ids=ids)
    finally:
        for cached in (_treebank._stdlib_treebank, _treebank._contraction_rules):
            cached.cache_clear()
        _words.forget_pieces()
    assert slow == fast and slow_many == fast_many


def test_ragged_columns_without_the_datasets_fast_path_are_identical(monkeypatch):
    import datasets
    import numpy as np

    from much_metric.scoring import _ragged

    ds = datasets.Dataset.from_dict({"x": [[1.5, 2.0], [], [3.25]], "c": [[[0, 1]], [[0]], [[0], [1, 2]]]})
    fast = _ragged.flatten_1d(ds["x"], dtype=np.float64, field="x", sample_ids=str)
    fast2 = _ragged.flatten_2d(ds["c"], field="c", sample_ids=str)
    monkeypatch.setattr(_ragged, "tested_version", lambda package: False)
    slow = _ragged.flatten_1d(ds["x"], dtype=np.float64, field="x", sample_ids=str)
    slow2 = _ragged.flatten_2d(ds["c"], field="c", sample_ids=str)
    for a, b in zip((*fast, *fast2), (*slow, *slow2), strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("gate_open", [True, False])
def test_decoding_gate_falls_back_to_tokenizer_decode(monkeypatch, gate_open):
    from much_metric.segmentation import decoding
    from tests import assets

    tokenizer = assets.llama3_tokenizer()
    monkeypatch.setattr(decoding, "tested_version", lambda package: gate_open)
    backend = decoding.stock_backend(tokenizer)
    assert (backend is None) is (not gate_open or getattr(tokenizer, "clean_up_tokenization_spaces", True))


def test_evaluate_gate_falls_back_to_loading_by_path(monkeypatch):
    """On an untested evaluate, the name "much" is not installed (evaluate's private writer) but load_metric() works."""
    from much_metric import evaluate_module

    monkeypatch.setattr(evaluate_module, "tested_version", lambda package: False)
    with pytest.raises(ImportError, match="evaluate 0.4"):
        evaluate_module.install_metric()
    metric = evaluate_module.load_metric()
    result = metric.compute(predictions=[[0.9, 0.1, 0.0], [0.2, 0.0]], references=[[-1, 1, 1], [1, 1]],
                            token_chunks=[[[0], [1], [2]], [[0], [1]]])
    assert result["n_claims"] == 3 and result["roc_auc"] == 1.0
