"""Every test gets a private ``datasets`` cache: the user's ~/.cache/huggingface/datasets is never read or written
(a fixture named ``much`` built by one test must not be what ``load_dataset("much")`` returns to the user later)."""

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
    yield cache
