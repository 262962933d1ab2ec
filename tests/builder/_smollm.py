"""One SmolLM2-135M-Instruct (GGUF) model per test session, shared by the builder tests (loading takes ~20 s)."""

from __future__ import annotations

import functools
import os
from pathlib import Path

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


def safetensors_folder(folder: str | Path) -> Path:
    """The model as a safetensors folder (what vLLM loads): ``MUCH_VLLM_MODEL_DIR`` when set, else the GGUF converted
    into ``folder`` by :func:`builder.models.gguf_to_safetensors`."""
    if os.environ.get("MUCH_VLLM_MODEL_DIR"):
        return Path(os.environ["MUCH_VLLM_MODEL_DIR"])
    from builder.models import gguf_to_safetensors

    return gguf_to_safetensors(gguf_path(), folder)
