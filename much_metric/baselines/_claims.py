"""Claims as texts, and claim scores back into MUCH's token-score format, for the claim-level methods (sampling
consistency, reference support, semantic isotropy).

MUCH's signal files hold one value per output token and the evaluation aggregates a claim's tokens. A claim-level
method writes its claim score ``u`` on one **carrier** token of the claim -- its first non-stopword token, else its
first token -- and 0 on the others: the product aggregator gives ``1 - (1 - u) = u`` and the max aggregator ``u``, so
the table ranks claims exactly by the method's score (the mean aggregator divides by the claim's length: use product
or max). The much-peers plugin writes its peers' claim scores the same way (docs/peers.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from much_metric.baselines._arrays import TokenArrays
from much_metric.baselines.context import decode_groups
from much_metric.baselines.samples import clean_text

__all__ = ["answer_texts", "carrier_scores", "claim_texts", "claims_of"]


def claims_of(arrays: TokenArrays, method: str) -> list[list[np.ndarray]]:
    """Per sample, per claim (``token_chunks`` order, EOS claim included): sample-local token indices."""
    if arrays.token_chunks is None:
        raise ValueError(f"{method} scores claims: the split needs its 'token_chunks' column")
    out = []
    for sample, chunks in enumerate(arrays.token_chunks):
        n_tokens = int(arrays.offsets[sample + 1] - arrays.offsets[sample])
        claims = []
        for index, chunk in enumerate(chunks):
            tokens = np.sort(np.asarray(chunk, dtype=np.int64).reshape(-1))
            if tokens.size == 0 or tokens[0] < 0 or tokens[-1] >= n_tokens:
                raise ValueError(f"generation_id={arrays.generation_ids[sample]!r}: field 'token_chunks' claim {index} "
                                 f"holds {tokens.tolist()}, not indices of its {n_tokens} output tokens")
            claims.append(tokens)
        out.append(claims)
    return out


def claim_texts(arrays: TokenArrays, tokenizer: Any, method: str) -> list[list[str]]:
    """Per sample, the decoded text of each claim (its tokens in order, special-token strings removed)."""
    if tokenizer is None:
        raise ValueError(f"{method} needs the generating LLM's tokenizer to decode the claims (tokenizer=...)")
    claims = claims_of(arrays, method)
    texts: list[list[str]] = [[] for _ in range(arrays.n_samples)]
    for samples, part, decode in decode_groups(arrays, tokenizer):
        index = np.arange(arrays.n_samples) if samples is None else samples
        batch, owner = [], []
        for local, sample in enumerate(index.tolist()):
            tokens = part.output_tokens[int(part.offsets[local]):int(part.offsets[local + 1])]
            for claim in claims[sample]:
                batch.append(tokens[claim].tolist())
                owner.append(sample)
        for sample, text in zip(owner, decode(batch), strict=True):
            texts[sample].append(clean_text(text))
    return texts


def answer_texts(arrays: TokenArrays, tokenizer: Any, method: str) -> list[str]:
    """The decoded text of each sample's output (special-token strings removed)."""
    if tokenizer is None:
        raise ValueError(f"{method} needs the generating LLM's tokenizer to decode the answers (tokenizer=...)")
    texts = [""] * arrays.n_samples
    for samples, part, decode in decode_groups(arrays, tokenizer):
        index = np.arange(arrays.n_samples) if samples is None else samples
        decoded = decode([part.output_tokens[int(part.offsets[i]):int(part.offsets[i + 1])].tolist()
                          for i in range(part.n_samples)])
        for sample, text in zip(index.tolist(), decoded, strict=True):
            texts[sample] = clean_text(text)
    return texts


def carrier_scores(arrays: TokenArrays, claim_values: Sequence[Sequence[float]]) -> np.ndarray:
    """Flat token scores (N_tokens,): each claim's value on its carrier token, 0 elsewhere (module docstring)."""
    flat = np.zeros(arrays.n_tokens, dtype=np.float64)
    claims = claims_of(arrays, "a claim-level method")
    for sample, (chunks, values) in enumerate(zip(claims, claim_values, strict=True)):
        if len(values) != len(chunks):
            raise ValueError(f"generation_id={arrays.generation_ids[sample]!r}: {len(values)} claim scores for "
                             f"{len(chunks)} claims")
        start = int(arrays.offsets[sample])
        for chunk, value in zip(chunks, values, strict=True):
            tokens = start + chunk
            if arrays.stopword_mask is not None:
                content = tokens[~arrays.stopword_mask[tokens]]
                tokens = content if content.size else tokens
            flat[tokens[0]] = value
    return flat
