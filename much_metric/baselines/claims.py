"""Claims of a split as a claim-level method sees them (token indices, texts), and its claim scores as a
claim-level signal: the public helpers of the sampling, reference and peer methods, and of a plugin's own.

A **claim-level method** scores claims, not tokens: its :class:`~much_metric.baselines.Baseline` says
``level="claim"`` and its ``compute`` returns, per sample, one value per claim (``token_chunks`` order, the EOS claim
included) -- :func:`claim_signal` builds and checks that list. ``much run`` stores it under the signal name followed
by :data:`much_metric.signals.CLAIM_SUFFIX` (``sample_rouge1@claim``), one value per chunk, and every table scores
that value as it is: no token-to-claim aggregator touches it, so it has one number per metric whatever
``--aggregator`` says (docs/extending.md#a-claim-level-method).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from much_metric.baselines._arrays import TokenArrays
from much_metric.baselines.context import decode_groups
from much_metric.baselines.samples import clean_text

__all__ = ["answer_texts", "claim_counts", "claim_signal", "claim_texts", "claim_tokens", "split_claims"]


def _need_chunks(arrays: Any, method: str) -> None:
    if getattr(arrays, "token_chunks", None) is None:
        raise ValueError(f"{method} scores claims: the split needs its 'token_chunks' column")


def claim_counts(arrays: TokenArrays, method: str = "a claim-level method") -> np.ndarray:
    """Per sample, how many claims (chunks, the EOS claim included) it has: the length of its claim-level values."""
    _need_chunks(arrays, method)
    return np.fromiter((len(chunks) for chunks in arrays.token_chunks), dtype=np.int64, count=arrays.n_samples)


def claim_tokens(arrays: TokenArrays, method: str, *, content_only: bool = False) -> list[list[np.ndarray]]:
    """Per sample, per claim (``token_chunks`` order, EOS claim included): its sample-local token indices, sorted.

    ``content_only``: a claim's non-stopword tokens (``stopword_mask`` False), or all of them when it has none --
    the tokens MUCH's ``stopword_handling="exclude"`` keeps; the split then needs its ``stopword_mask``. ``method``
    names the caller in errors, which also name the sample and the field.
    """
    _need_chunks(arrays, method)
    if content_only and arrays.stopword_mask is None:
        raise ValueError(f"{method}: content_only needs the split's 'stopword_mask' column")
    out = []
    for sample, chunks in enumerate(arrays.token_chunks):
        start, stop = int(arrays.offsets[sample]), int(arrays.offsets[sample + 1])
        stopwords = arrays.stopword_mask[start:stop] if content_only else None
        claims = []
        for index, chunk in enumerate(chunks):
            tokens = np.sort(np.asarray(chunk, dtype=np.int64).reshape(-1))
            if tokens.size == 0 or tokens[0] < 0 or tokens[-1] >= stop - start:
                raise ValueError(f"generation_id={arrays.generation_ids[sample]!r}: field 'token_chunks' claim {index} "
                                 f"holds {tokens.tolist()}, not indices of its {stop - start} output tokens")
            if stopwords is not None:
                content = tokens[~stopwords[tokens]]
                tokens = content if content.size else tokens
            claims.append(tokens)
        out.append(claims)
    return out


def claim_texts(arrays: TokenArrays, tokenizer: Any, method: str) -> list[list[str]]:
    """Per sample, the decoded text of each claim (its tokens in order, special-token strings removed)."""
    if tokenizer is None:
        raise ValueError(f"{method} needs the generating LLM's tokenizer to decode the claims (tokenizer=...)")
    claims = claim_tokens(arrays, method)
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


def claim_signal(arrays: TokenArrays, claim_values: Sequence[Sequence[float]],
                 method: str = "a claim-level method") -> list[np.ndarray]:
    """A claim-level signal: per sample, a float64 array of one finite value per claim (``token_chunks`` order, EOS
    claim included; higher = more uncertain) -- what a claim-level method's ``compute`` returns.

    Raises ``ValueError`` naming the sample when a sample's value count is not its claim count or a value is not
    finite.

    Examples
    --------
    A claim-level score from each claim's length (``1 - 1/n`` over its tokens), one value per claim:

    >>> import much_dataset
    >>> from much_metric.baselines import token_arrays
    >>> from much_metric.baselines.claims import claim_signal, claim_tokens
    >>> arrays = token_arrays(much_dataset.load("sample", split="test").select(range(2)))
    >>> lengths = [[len(tokens) for tokens in claims] for claims in claim_tokens(arrays, "claim length")]
    >>> signal = claim_signal(arrays, [[1.0 - 1.0 / n for n in sample] for sample in lengths], "claim length")
    >>> [len(values) for values in signal] == [len(chunks) for chunks in arrays.token_chunks]
    True
    """
    counts = claim_counts(arrays, method)
    if len(claim_values) != arrays.n_samples:
        raise ValueError(f"{method} returned claim scores for {len(claim_values)} samples, the split has "
                         f"{arrays.n_samples}")
    out = []
    for sample, (values, expected) in enumerate(zip(claim_values, counts.tolist(), strict=True)):
        values = np.asarray(values, dtype=np.float64).reshape(-1)
        where = f"{method}, generation_id={arrays.generation_ids[sample]!r}"
        if values.size != expected:
            raise ValueError(f"{where}: {values.size} claim scores for {expected} claims (field 'token_chunks', "
                             "EOS claim included)")
        if not np.isfinite(values).all():
            raise ValueError(f"{where}: claim {int(np.flatnonzero(~np.isfinite(values))[0])} scores "
                             f"{values[~np.isfinite(values)][0]}, not a finite number")
        out.append(values)
    return out


def split_claims(arrays: TokenArrays, flat: np.ndarray) -> list[np.ndarray]:
    """Flat claim values (all samples' claims in order) -> per-sample arrays, as :meth:`TokenArrays.split` for
    tokens."""
    counts = claim_counts(arrays)
    flat = np.asarray(flat, dtype=np.float64)
    if flat.shape != (int(counts.sum()),):
        raise ValueError(f"{flat.shape} claim values for a split of {int(counts.sum())} claims")
    return np.split(flat, np.cumsum(counts)[:-1])
