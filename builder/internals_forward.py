"""The ``transformers`` engine of ``python -m builder internals``: one eager-attention forward pass per stored row.

:func:`forward_internals` computes a row's pack arrays (attention to the previous position, to itself, to a window,
hidden states at ``hidden_layers``), :func:`store_hidden` turns float32 hidden states into their stored form (shared
with :mod:`builder.internals_vllm`), :func:`row_internals` builds the prompt as ``replay`` does and re-derives the
stored probabilities. Row ``t`` of every array is the sequence position of output token ``t``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from builder.internals_store import weights_sha256
from builder.replay import PROMPT_STYLES
from much_dataset import schema
from much_dataset.internals_compression import encode_hidden, relative_errors

__all__ = ["InternalsOptions", "PCA_FIT_ROWS", "forward_internals", "store_hidden", "stored_probability_difference",
           "prompt_ids", "row_internals", "use_eager_attention", "TransformersInternals"]

#: Rows of the source file a ``pca:K`` basis is fitted on (``--pca-fit-rows``).
PCA_FIT_ROWS = 64


@dataclass(frozen=True)
class InternalsOptions:
    """What a pack stores; part of its identity (a resumed run must ask for the same)."""

    hidden_layers: tuple[int, ...]
    temperature: float = 1.0
    generation_config: str | None = None
    prompt_style: str = "much"
    brief: bool = True
    hidden_dtype: str = "float16"
    attention_window: int = 0
    hidden_compression: str = "none"
    pca_fit_rows: int = PCA_FIT_ROWS
    attention_to_self: bool = False
    #: the engine that computed the pack (``--engine``); part of the identity
    engine: str = "transformers"
    #: whether the pack stores ``attention_to_previous`` (the engine's :attr:`InternalsEngine.attention`)
    attention: bool = True


def forward_internals(model: Any, prompt_ids: Sequence[int], tokens: Sequence[int], options: InternalsOptions,
                      *, basis: dict[str, np.ndarray] | None = None) -> tuple[dict[str, np.ndarray], Any, np.ndarray]:
    """One eager-attention forward pass of ``prompt_ids + tokens``: the pack arrays of the output tokens (``hidden``
    stored as ``options.hidden_compression`` says; ``basis``: the pack's PCA basis for ``pca:K``), the logits that
    produced them (row ``t`` of the logits = the position before output token ``t``) and the relative L2 error of
    every stored hidden vector against the float32 one, ``[n_tokens, len(hidden_layers)]``.

    The model must use eager attention (``output_attentions`` needs the weights).
    """
    import torch

    n_prompt, n = len(prompt_ids), len(tokens)
    if n_prompt < 1 or n < 1:
        raise ValueError("a pack row needs a non-empty prompt and at least one output token")
    device = next(model.parameters()).device
    with torch.inference_mode():
        out = model(input_ids=torch.tensor([list(prompt_ids) + list(tokens)], device=device),
                    output_attentions=True, output_hidden_states=True)
    positions = torch.arange(n_prompt, n_prompt + n, device=device)
    # attentions: one (1, heads, seq, seq) per layer; query row = position, key column = attended position
    attention = torch.stack([layer[0, :, positions, positions - 1] for layer in out.attentions], dim=0)
    arrays = {"attention_to_previous": attention.permute(2, 0, 1).float().cpu().numpy()}  # (n, layers, heads)
    if options.attention_window > 0:
        window = []
        for back in range(1, options.attention_window + 1):
            keys = positions - back
            valid = (keys >= 0).float()
            weights = torch.stack([layer[0, :, positions, keys.clamp(min=0)] for layer in out.attentions], dim=0)
            window.append(weights * valid)
        arrays["attention_window"] = torch.stack(window, dim=-1).permute(2, 0, 1, 3).float().cpu().numpy()
    if options.attention_to_self:
        arrays["attention_to_self"] = torch.stack([layer[0, :, positions, positions] for layer in out.attentions],
                                                  dim=0).permute(2, 0, 1).float().cpu().numpy()
    hidden = torch.stack([out.hidden_states[index][0, positions] for index in options.hidden_layers], dim=1)
    stored, error = store_hidden(hidden, options, basis=basis)
    arrays.update(stored)
    logits = out.logits[0, n_prompt - 1 : n_prompt + n - 1].float()
    return arrays, logits, error


def store_hidden(hidden: Any, options: InternalsOptions, *,
                 basis: dict[str, np.ndarray] | None = None) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The stored form of ``hidden`` (a torch tensor ``[n_tokens, len(hidden_layers), hidden_size]``, any float
    dtype) as ``options`` say (``hidden_dtype``, ``hidden_compression``; ``basis`` for ``pca:K``), and the relative L2
    error of every stored vector against the float32 one, ``[n_tokens, len(hidden_layers)]`` (shared by the engines)."""
    import torch

    from much_dataset.internals_compression import decode_hidden

    exact = hidden.float().cpu().numpy()
    if options.hidden_compression == "none" and options.hidden_dtype == "bfloat16":
        # numpy has no bfloat16: stored as its raw 16 bits
        rounded = hidden.to(torch.bfloat16).cpu()
        return {"hidden": rounded.view(torch.int16).numpy()}, relative_errors(exact, rounded.float().numpy())
    stored = encode_hidden(exact, options.hidden_compression, dtype=options.hidden_dtype, basis=basis)
    return stored, relative_errors(exact, decode_hidden(stored, options.hidden_compression, basis=basis))


def stored_probability_difference(logits: Any, stored_ids: Sequence[Sequence[int]],
                                  stored_probs: Sequence[Sequence[float]], temperature: float) -> float:
    """Largest |softmax(logits / T)[id] - stored probability| over every stored candidate of every position."""
    import torch

    probs = torch.softmax(logits / temperature, dim=-1)
    worst = 0.0
    for position, (ids, values) in enumerate(zip(stored_ids, stored_probs, strict=True)):
        if len(ids):
            got = probs[position, torch.tensor([int(i) for i in ids], device=probs.device)].double().cpu().numpy()
            worst = max(worst, float(np.abs(got - np.asarray(values, dtype=np.float64)).max()))
    return worst


def prompt_ids(tokenizer: Any, question: str, style: str, *, brief: bool = True) -> list[int]:
    """The prompt's token ids as ``replay`` builds them: ``much`` = generate's chat (system prompt, brevity sentence,
    pinned date), ``user`` = one user message (the embedded sample's observer)."""
    from builder._llm import build_prompt

    if style == "much":
        text = build_prompt(tokenizer, question, brief=brief)
    elif style == "user":
        text = tokenizer.apply_chat_template([{"role": "user", "content": question}], tokenize=False,
                                             add_generation_prompt=True)
    else:
        raise ValueError(f"prompt_style must be one of {PROMPT_STYLES}, got {style!r}")
    return tokenizer.encode(text, add_special_tokens=False)


def row_internals(llm: Any, row: dict[str, Any], options: InternalsOptions, *,
                  basis: dict[str, np.ndarray] | None = None) -> tuple[dict[str, np.ndarray], float, np.ndarray]:
    """Pack arrays of one stored row, the largest difference with its stored probabilities (nan if none) and the
    hidden vectors' relative reconstruction errors (see :func:`forward_internals`)."""
    tokens = [int(t) for t in row[schema.OUTPUT_TOKENS]]
    if not tokens:
        raise ValueError(f"generation_id={row.get(schema.GENERATION_ID)!r}: field {schema.OUTPUT_TOKENS!r} is empty")
    prompt = prompt_ids(llm.tokenizer, row[schema.PROMPT], options.prompt_style, brief=options.brief)
    arrays, logits, error = forward_internals(llm.model, prompt, tokens, options, basis=basis)
    ids, probs = row.get(schema.LOGITS_TOKEN_IDS), row.get(schema.LOGITS_VALUES)
    if ids is None or probs is None:
        return arrays, float("nan"), error
    if len(ids) != len(tokens):
        raise ValueError(f"generation_id={row.get(schema.GENERATION_ID)!r}: {len(ids)} stored probability rows for "
                         f"{len(tokens)} output tokens")
    return arrays, stored_probability_difference(logits, ids, probs, options.temperature), error


class TransformersInternals:
    """The ``transformers`` engine (an :class:`~builder.internals_engine.InternalsEngine`): the model of
    ``options`` (:class:`~builder.internals_engine.InternalsEngineOptions`) loaded by ``builder._llm.load_model``,
    switched to eager attention, one forward pass per row (:func:`row_internals`)."""

    def __init__(self, options: Any) -> None:
        from builder._llm import load_model

        self.llm = load_model(options.model, device=options.device, dtype=options.dtype)
        use_eager_attention(self.llm.model)
        self.config = self.llm.model.config
        self.weights = weights_sha256(options.model, self.llm.model)

    def prepare(self, options: InternalsOptions) -> None:
        """Nothing to prepare: the model is loaded and every layer's output is returned by each pass."""

    def forward(self, rows: Sequence[dict[str, Any]], options: InternalsOptions,
                basis: dict[str, np.ndarray] | None = None) -> list[Any]:
        """Per row: ``(arrays, max_abs_diff, hidden errors)`` as :func:`row_internals` returns them, or the
        exception that row raised."""
        results: list[Any] = []
        for row in rows:
            try:
                results.append(row_internals(self.llm, row, options, basis=basis))
            except Exception as problem:  # noqa: BLE001 - recorded per row, the run goes on
                results.append(problem)
        return results


def use_eager_attention(model: Any) -> None:
    """Switch a loaded model to eager attention (SDPA/flash kernels return no weights)."""
    setter = getattr(model, "set_attn_implementation", None)
    if callable(setter):
        setter("eager")
    else:  # older transformers
        model.config._attn_implementation = "eager"
