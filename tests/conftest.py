"""Every test gets private ``datasets`` and ``evaluate`` (module, metric) caches: the user's ~/.cache/huggingface is
never read or written (a fixture named ``much`` built by one test must not be what ``load_dataset("much")`` returns to
the user later; ``much_metric.load()`` must not install the metric into the user's module cache).
tests/test_user_caches.py checks it."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _private_datasets_cache(tmp_path_factory, monkeypatch):
    cache = tmp_path_factory.mktemp("hf_datasets_cache")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(cache))
    import datasets.config

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", cache)
    monkeypatch.setattr(datasets.config, "DOWNLOADED_DATASETS_PATH", cache / "downloads")
    monkeypatch.setattr(datasets.config, "EXTRACTED_DATASETS_PATH", cache / "downloads" / "extracted")
    modules = tmp_path_factory.mktemp("hf_modules_cache")
    monkeypatch.setenv("HF_MODULES_CACHE", str(modules))
    import evaluate.config

    monkeypatch.setattr(evaluate.config, "HF_MODULES_CACHE", modules)
    metrics = tmp_path_factory.mktemp("hf_metrics_cache")  # evaluate's compute() writes lock/arrow files here
    monkeypatch.setenv("HF_METRICS_CACHE", str(metrics))
    monkeypatch.setattr(evaluate.config, "HF_METRICS_CACHE", metrics)
    yield cache
