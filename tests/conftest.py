"""Every test gets private ``datasets`` and ``evaluate`` (module, metric) caches: the user's ~/.cache/huggingface is
never read or written (a fixture named ``much`` built by one test must not be what ``load_dataset("much")`` returns to
the user later; ``much_metric.load_metric()`` must not install the metric into the user's module cache).
tests/test_user_caches.py checks it."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def _session_modules_cache(tmp_path_factory):
    # One module cache for the session: evaluate imports installed modules as the package ``evaluate_modules``,
    # which stays in sys.modules, so a fresh folder per test would hide the modules a previous test imported.
    return tmp_path_factory.mktemp("hf_modules_cache")


@pytest.fixture(autouse=True)
def _private_datasets_cache(tmp_path_factory, monkeypatch, _session_modules_cache):
    cache = tmp_path_factory.mktemp("hf_datasets_cache")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(cache))
    import datasets.config

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", cache)
    monkeypatch.setattr(datasets.config, "DOWNLOADED_DATASETS_PATH", cache / "downloads")
    monkeypatch.setattr(datasets.config, "EXTRACTED_DATASETS_PATH", cache / "downloads" / "extracted")
    modules = _session_modules_cache
    monkeypatch.setenv("HF_MODULES_CACHE", str(modules))
    import evaluate.config

    monkeypatch.setattr(evaluate.config, "HF_MODULES_CACHE", modules)
    metrics = tmp_path_factory.mktemp("hf_metrics_cache")  # evaluate's compute() writes lock/arrow files here
    monkeypatch.setenv("HF_METRICS_CACHE", str(metrics))
    monkeypatch.setattr(evaluate.config, "HF_METRICS_CACHE", metrics)
    yield cache


@pytest.fixture(autouse=True)
def _restore_evaluate_modules(monkeypatch):
    """A test that installs the metric into another module cache in-process must not leave ``evaluate_modules``
    bound to that folder for the next test (evaluate imports its cache as a package on sys.path)."""
    import sys

    monkeypatch.setattr(sys, "path", list(sys.path))
    before = {name for name in sys.modules if name.split(".")[0] == "evaluate_modules"}
    yield
    for name in [name for name in sys.modules if name.split(".")[0] == "evaluate_modules" and name not in before]:
        del sys.modules[name]


@pytest.fixture(scope="session")
def hidden_split(tmp_path_factory):
    """A private split made from part of the embedded sample with ``builder export --withhold-labels``, and the
    other part as a labelled public folder (:mod:`tests._hidden_split`)."""
    from tests._hidden_split import made_in_session

    return made_in_session(tmp_path_factory)
