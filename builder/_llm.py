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

from much_dataset import schema

__all__ = [
    "SYSTEM_PROMPT",
    "BRIEF_SUFFIX",
    "LLAMA_DATE",
    "LoadedModel",
    "load_model",
    "pick_device",
    "chat_messages",
    "pin_today_date",
    "build_prompt",
    "reseed",
    "top_candidates",
    "eos_token_ids",
]

SYSTEM_PROMPT = "You are a helpful assistant. Always answer questions directly."
BRIEF_SUFFIX = " Your answers should be very concise and precise."
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


def chat_messages(question: str, *, brief: bool = True) -> list[dict[str, str]]:
    """The paper's chat: the fixed system prompt (+ the brevity sentence) and the question."""
    system = SYSTEM_PROMPT + (BRIEF_SUFFIX if brief else "")
    return [{"role": "system", "content": system}, {"role": "user", "content": question}]


_DATE_LINE = re.compile(r"^.*Today Date:.*$", re.MULTILINE)


def pin_today_date(template: str, date: str = LLAMA_DATE) -> str:
    """Replace every chat-template line mentioning ``Today Date:`` by one printing the fixed date (spec 4.3)."""
    return _DATE_LINE.sub(lambda _: '{{- "Today Date: ' + date + '\\n\\n" }}', template)


def build_prompt(tokenizer: Any, question: str, *, brief: bool = True) -> str:
    """The templated prompt string (generation prompt added); Llama's "Today Date" line pinned to 10 Jun 2025."""
    template = tokenizer.chat_template
    if isinstance(template, str) and "Today Date:" in template:
        template = pin_today_date(template)
    return tokenizer.apply_chat_template(chat_messages(question, brief=brief), chat_template=template,
                                         tokenize=False, add_generation_prompt=True)


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


def top_candidates(logits: Any, chosen: Any, *, temperature: float = 1.0, top_k: int = schema.TOP_K,
                   extend: bool = True):
    """Top-``top_k`` probabilities of each row, extended down to the chosen token when it ranks lower (spec 4.5).

    Parameters
    ----------
    logits : torch.Tensor of shape (n_tokens, vocab_size)
        Raw (unwarped) logits; row ``i`` produced ``chosen[i]``.
    chosen : torch.Tensor of shape (n_tokens,)
        The emitted (sampled or teacher-forced) token ids.
    temperature : float
        Logits are divided by it before the softmax over the FULL vocabulary (no top-k/top-p truncation).

    Returns
    -------
    ids : list of n_tokens lists of int
    probs : list of n_tokens lists of float
        Sorted by decreasing probability, float32 values, not renormalised. Length ``top_k``, or ``rank + 1`` when
        the chosen token's 0-based ``rank`` is ``>= top_k`` (the list then runs down to it, as the reference).
    ranks : list of int
        The chosen token's rank per row (number of tokens before it in the sorted order; with ``extend=False``, the
        number of strictly more probable tokens, at least ``top_k``, when it is outside the head).
    chosen_probs : list of float
        The chosen token's probability per row.

    With ``extend=False`` every row keeps exactly ``top_k`` candidates (no tail is materialised, which matters
    when a teacher-forced token ranks in the thousands).

    Notes
    -----
    ``torch.topk`` gives the head (one partial selection per row instead of a full vocabulary sort: the sort was
    most of the cost); ties keep topk's order, which is deterministic on a given device. Only rows whose chosen
    token falls outside the head are fully sorted (stable), to extend them.
    """
    import torch

    probs = torch.softmax(logits.float() / float(temperature), dim=-1)
    head_probs, head_ids = torch.topk(probs, k=min(top_k, probs.shape[-1]), dim=-1, sorted=True)
    chosen = chosen.to(probs.device).long()
    in_head = head_ids == chosen[:, None]
    found = in_head.any(dim=-1)
    chosen_probs = probs.gather(1, chosen[:, None])[:, 0]
    beyond = torch.clamp((probs > chosen_probs[:, None]).sum(dim=-1), min=top_k)
    ranks = torch.where(found, in_head.int().argmax(dim=-1), beyond).tolist()
    ids, values = head_ids.tolist(), head_probs.tolist()
    if not extend:
        return ids, values, ranks, chosen_probs.tolist()
    for row in torch.nonzero(~found).flatten().tolist():
        row_probs, row_ids = torch.sort(probs[row], descending=True, stable=True)
        position = int(torch.nonzero(row_ids == chosen[row]).flatten()[0])
        ranks[row] = max(position, top_k)
        ids[row] = row_ids[: ranks[row] + 1].tolist()
        values[row] = row_probs[: ranks[row] + 1].tolist()
    return ids, values, ranks, chosen_probs.tolist()
