"""One SmolLM2-135M-Instruct (GGUF) model per test session, shared by the builder tests (loading takes ~20 s)."""

from __future__ import annotations

import functools

from tests import assets


@functools.cache
def _load():
    from builder._llm import load_model

    return load_model(str(assets.smollm2_gguf_path()), device="cpu", dtype="float32")


def smollm2():
    """The loaded model (``builder._llm.LoadedModel``); skips locally / fails in CI when the GGUF is missing."""
    assets.require("smollm2")
    assets._offline()
    return _load()


def gguf_path() -> str:
    assets.require("smollm2")
    return str(assets.smollm2_gguf_path())
