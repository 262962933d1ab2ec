"""Fixtures shared by the builder tests: SmolLM2 loaded once per test session, also for the commands a test runs
in-process, and its safetensors folder converted once per session (the vLLM tests)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.builder import _smollm


@pytest.fixture
def one_smollm2_load(monkeypatch):
    """``builder._llm.load_model`` gives the session's SmolLM2 (:func:`_smollm.smollm2`) when a command asks for its
    GGUF on the CPU in float32 (the defaults there), instead of loading it again (about 20 s a load); any other model
    loads as usual. Each call hands the model out as a fresh load would: with the attention implementation it was
    loaded with (``builder internals`` switches it to eager), restored again when the test ends."""
    from builder import _llm

    real_load = _llm.load_model
    gguf = Path(_smollm.gguf_path()).resolve()
    shared = _smollm.smollm2()
    as_loaded = shared.model.config._attn_implementation

    def load_model(model: str, *, device: str | None = None, dtype: str | None = None):
        if Path(model).resolve() == gguf and device in (None, "cpu") and dtype in (None, "float32"):
            shared.model.set_attn_implementation(as_loaded)
            return shared
        return real_load(model, device=device, dtype=dtype)

    monkeypatch.setattr(_llm, "load_model", load_model)
    yield shared
    shared.model.set_attn_implementation(as_loaded)


@pytest.fixture(scope="session")
def smollm2_safetensors(tmp_path_factory) -> Path:
    """SmolLM2 as the safetensors folder vLLM loads, converted once per session (or ``MUCH_VLLM_MODEL_DIR``)."""
    return _smollm.safetensors_folder(tmp_path_factory.mktemp("smollm2-safetensors"))
