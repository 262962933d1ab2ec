"""The layout rules of the design: stage packages, no import cycle, no reaching into other packages' private
modules, no process-wide side effects in library code, and the version gates' public fallbacks."""

from __future__ import annotations

import ast
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("much_dataset", "much_metric", "builder")
STAGES = ("segmentation", "scoring", "baselines", "signals", "monitor", "cli")


def _modules(package: str):
    for path in sorted((REPO / package).rglob("*.py")):
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
    """The file of one of our modules (``much_metric.scoring._api``), or None when ``name`` is not a module of ours."""
    if name.split(".")[0] not in PACKAGES:
        return None
    base = REPO.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _module_of(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
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


def test_the_private_name_check_catches_both_forms(tmp_path):
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
