"""Input views: what a method sees when it gets less than MUCH's 24 stored candidates per token.

An API answers a generation step with the chosen token's own log-probability and its ``top_logprobs`` K most
probable alternatives (OpenAI caps K at 20, vLLM at its ``--max-logprobs``); Mu-SHROOM ships the chosen token's
alone (K = 0). :func:`top_k_view` cuts a split's :class:`~much_metric.baselines.TokenArrays` to that answer:

* the K most probable candidates with their probabilities, as stored (not renormalised: they are probabilities of
  the full-vocabulary softmax, so a row of the view sums to less than the stored row);
* the sampled token's own probability: when it is not among the K, it is appended as one more candidate (column
  K, its id and its stored probability), as the builder and the live monitor extend a row; other rows have
  probability 0 and id -1 there, which no method mistakes for a candidate. When every sampled token is among the K
  (always for K >= 20 on MUCH, whose sampler draws from the top 20) the view has exactly K columns.

A method that reads at most ``top_k`` candidates (its :attr:`~much_metric.baselines.Baseline.top_k`) gives on a
view with ``K >= top_k`` exactly the numbers it gives on the stored data (the test suite checks every registered
method). A method that needs more is not scored on the view by ``much run --top-k`` ("needs top-24"). The
degradation table (:func:`much_metric.benchmark.degradation_table`) still feeds it the view, widened by
:func:`padded`: the candidates the API did not return are probability 0 -- an entropy over the top 24 becomes the
entropy of the returned candidates (renormalised over them), a tail mass ``1 - sum p`` takes in everything not
returned. See docs/methods.md#input-views.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from much_dataset.params import Interval, check_param
from much_dataset.schema import TOP_K
from much_metric.baselines._arrays import TokenArrays, token_arrays
from much_metric.baselines._topk import rank_of_sampled, sorted_arrays

__all__ = ["padded", "top_k_view"]


def top_k_view(data: Any, k: int) -> TokenArrays:
    """The split as an API with ``top_logprobs=k`` returns it (see the module docstring).

    Parameters
    ----------
    data : datasets.Dataset, pyarrow.Table, list of rows or TokenArrays
        A MUCH split (any input of :func:`~much_metric.baselines.token_arrays`).
    k : int
        Candidates kept per token, in [0, stored candidates]; 0 = the sampled token alone (Mu-SHROOM).

    Returns
    -------
    TokenArrays
        ``k`` columns (``k + 1`` when some sampled token is not among the ``k``), sorted by decreasing probability;
        ``token_chunks`` and ``stopword_mask`` kept.

    Raises
    ------
    ValueError
        ``k`` out of range; a sampled token that is not among the stored candidates (its probability is unknown,
        so no view can give it; never in MUCH), naming the sample and token.

    Examples
    --------
    >>> import much_dataset
    >>> from much_metric.baselines.views import top_k_view
    >>> split = much_dataset.load("sample", split="test").select(range(2))
    >>> top_k_view(split, 5).probabilities.shape[1] in (5, 6), top_k_view(split, 0).probabilities.shape[1]
    (True, 1)
    """
    arrays = sorted_arrays(token_arrays(data))
    width = arrays.probabilities.shape[1]
    k = int(check_param("top_k", k, Interval(numbers.Integral, 0, width), hint="the stored candidates per token"))
    rank = rank_of_sampled(arrays)  # raises naming the token when the sampled one is not stored
    unlisted = rank >= k
    columns = k + 1 if unlisted.any() else k
    ids = np.full((arrays.n_tokens, columns), -1, dtype=np.int64)
    probabilities = np.zeros((arrays.n_tokens, columns), dtype=np.float64)
    ids[:, :k] = arrays.candidate_ids[:, :k]
    probabilities[:, :k] = arrays.probabilities[:, :k]
    if columns > k:
        rows = np.flatnonzero(unlisted)
        ids[rows, k] = arrays.output_tokens[rows]
        probabilities[rows, k] = arrays.probabilities[rows, rank[rows]]
    return TokenArrays(arrays.generation_ids, arrays.offsets, arrays.output_tokens, ids, probabilities,
                       arrays.token_chunks, arrays.stopword_mask)


def padded(arrays: TokenArrays, width: int = TOP_K) -> TokenArrays:
    """``arrays`` widened to ``width`` columns with candidates of probability 0 and id -1 (the ones a view did not
    return); returned as is when already that wide. A view of ``width + 1`` columns is an error: it would drop a
    sampled token."""
    have = arrays.probabilities.shape[1]
    if have == width:
        return arrays
    if have > width:
        raise ValueError(f"a view of {have} candidates per token cannot be padded to {width}")
    n = arrays.n_tokens
    ids = np.concatenate([arrays.candidate_ids, np.full((n, width - have), -1, dtype=np.int64)], axis=1)
    probabilities = np.concatenate([arrays.probabilities, np.zeros((n, width - have))], axis=1)
    return TokenArrays(arrays.generation_ids, arrays.offsets, arrays.output_tokens, ids, probabilities,
                       arrays.token_chunks, arrays.stopword_mask)
