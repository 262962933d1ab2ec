"""CCP, Claim-Conditioned Probability (Fadeeva et al., 2024), adapted to MUCH as in the paper
(docs/reference-behaviour.md#signals).

For token ``i`` with sampled token ``t`` and candidates ``c`` = the ``delta`` most likely stored tokens (``t``
appended with its probability when it is not among them):

* premise = prefix + dec(t) + suffix, hypothesis_c = prefix + dec(c) + suffix (context windows: see
  :mod:`much_metric.baselines.context`), and class_c = argmax of the NLI model on (premise, hypothesis_c);
* the first candidate whose decoded string equals dec(t) is "entailment" by definition (no NLI call);
* ``E`` = sum of p(c) over entailment candidates, ``C`` = sum over contradiction (or non-entailment) candidates,
  neutral ones ignored; ``CCP_i = 1 - E / (E + C)`` (higher = more uncertain). ``E >= p(t) > 0``.

All pairs of the split are built first and sent to the NLI model in one de-duplicated, length-sorted, batched call
(:class:`much_metric.baselines.nli.NliScorer`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from much_metric.baselines._arrays import TokenArrays, token_arrays
from much_metric.baselines._topk import check_delta, check_delta_param, sampled_rank
from much_metric.baselines.context import Decoder, context_windows, decode_groups, decode_ids
from much_metric.baselines.nli import (
    NLI_SUFFIX_PATTERN,
    checked_signal_name,
    nli_label_indices,
    nli_signal_suffix,
    pair_generation_ids,
    resolve_nli,
    run_nli,
)
from much_metric.baselines.registry import Baseline, Requirements

__all__ = ["ccp", "ccp_signal_name", "ccp_pairs"]


def ccp_signal_name(delta: int = 10, sigma: int = 8, nli_name: str | None = None) -> str:
    """Reference signal name: ``ccp_{delta}_{sigma}`` plus the NLI model's suffix (``_M``, ``_S``, ``_<alias>``)."""
    return f"ccp_{delta}_{sigma}{nli_signal_suffix(nli_name)}"


def ccp_pairs(
    arrays: TokenArrays, decode: Decoder, *, delta: int, sigma: int, reference_window: bool = False
) -> dict[str, Any]:
    """The NLI work of CCP for a split, before running the model.

    Returns
    -------
    dict with
        ``probabilities`` (N, delta + 1): candidate probabilities (last column = the sampled token when it is
        not in the top-delta, else 0); ``valid`` (N, delta + 1) bool; ``forced`` (N,): column of the candidate
        that is entailment by definition; ``pair_rows`` / ``pair_columns`` (n_pairs,): the (token, candidate)
        of each NLI pair; ``premises`` / ``hypotheses``: lists of n_pairs strings.
    """
    arrays = arrays.sorted_by_probability()
    delta = check_delta(delta, arrays.probabilities.shape[1])
    n = arrays.n_tokens
    rank = sampled_rank(arrays)
    rows = np.arange(n)
    p_sampled = arrays.probabilities[rows, rank]
    outside = rank >= delta
    candidate_ids = np.concatenate([arrays.candidate_ids[:, :delta], arrays.output_tokens[:, None]], axis=1)
    probabilities = np.concatenate([arrays.probabilities[:, :delta], np.where(outside, p_sampled, 0.0)[:, None]],
                                   axis=1)
    valid = np.concatenate([np.ones((n, delta), dtype=bool), outside[:, None]], axis=1)
    candidate_text = decode_ids(decode, candidate_ids)
    token_text = candidate_text[:, -1]  # the appended column is the sampled token itself
    same = valid & (candidate_text == token_text[:, None])
    forced = same.argmax(axis=1)  # always found: the sampled token is a valid candidate
    needs_nli = valid.copy()
    needs_nli[rows, forced] = False
    pair_rows, pair_columns = np.nonzero(needs_nli)
    prefix, suffix = context_windows(arrays, decode, sigma, reference_window=reference_window)
    premise_of_token = prefix + token_text + suffix  # object arrays: element-wise str concatenation
    hypotheses = (prefix[pair_rows] + candidate_text[pair_rows, pair_columns] + suffix[pair_rows]).tolist()
    return {
        "probabilities": probabilities,
        "valid": valid,
        "forced": forced,
        "pair_rows": pair_rows,
        "pair_columns": pair_columns,
        "premises": premise_of_token[pair_rows].tolist(),
        "hypotheses": hypotheses,
    }


def _ccp_from_classes(arrays: TokenArrays, work: dict[str, Any], classes: np.ndarray, labels) -> np.ndarray:
    n = arrays.n_tokens
    entail = np.zeros(work["valid"].shape, dtype=bool)
    contradict = np.zeros(work["valid"].shape, dtype=bool)
    rows, columns = work["pair_rows"], work["pair_columns"]
    entail[rows, columns] = classes == labels.entailment
    contradict[rows, columns] = classes == labels.contradiction
    entail[np.arange(n), work["forced"]] = True
    p = work["probabilities"]
    e = (p * entail).sum(axis=1)
    c = (p * contradict).sum(axis=1)
    if (zero := np.flatnonzero(e + c <= 0)).size:
        raise ValueError(f"{arrays.where(int(zero[0]))}: CCP undefined, the sampled token has probability 0")
    return 1.0 - e / (e + c)


def _ccp_flat(
    arrays: TokenArrays, *, nli: Any, decode: Any, delta: int, sigma: int, reference_window: bool
) -> np.ndarray:
    labels = nli_label_indices(nli.id2label)
    groups = [(samples, part, ccp_pairs(part, decoder, delta=delta, sigma=sigma, reference_window=reference_window))
              for samples, part, decoder in decode_groups(arrays, decode)]
    # One NLI call for the whole split (all tokenizer groups): de-duplication and batching see every pair.
    premises = [p for _, _, work in groups for p in work["premises"]]
    hypotheses = [h for _, _, work in groups for h in work["hypotheses"]]
    pair_ids = [g for _, part, work in groups for g in pair_generation_ids(part, work["pair_rows"])] \
        if getattr(nli, "routes_by_sample", False) else None
    classes = run_nli(nli, premises, hypotheses, labels.n_labels, pair_ids).argmax(axis=1)
    bounds = np.cumsum([0] + [len(work["premises"]) for _, _, work in groups])
    flat = np.empty(arrays.n_tokens)
    for (samples, part, work), start, end in zip(groups, bounds[:-1], bounds[1:], strict=True):
        values = _ccp_from_classes(part, work, classes[start:end], labels)
        if samples is None:
            return values
        flat[arrays.token_index(samples)] = values
    return flat


def ccp(
    dataset: Any,
    *,
    nli: Any,
    tokenizer: Any,
    delta: int = 10,
    sigma: int = 8,
    reference_window: bool = False,
) -> list[np.ndarray]:
    """CCP token scores of a split (see the module docstring for the formula).

    Parameters
    ----------
    dataset : datasets.Dataset, pyarrow.Table, list of rows or TokenArrays
        A MUCH split (``output_tokens``, ``logits_token_ids``, ``logits_values``).
    nli : str, NliScorer, or object with ``id2label`` and ``predict_proba(premises, hypotheses)``
        The NLI model; a string is loaded with :func:`much_metric.baselines.nli.load_nli` (the paper's is
        ``microsoft/deberta-large-mnli``; a multilingual XNLI model suits French, Spanish and German better).
        Classes come from its ``id2label``.
    tokenizer : tokenizer, callable or PerSampleDecoder
        The **generating LLM's** tokenizer (decodes candidates and context windows), a batch decode function
        ``list[list[int]] -> list[str]``, or a :class:`~much_metric.baselines.context.PerSampleDecoder` when the
        samples come from several LLMs.
    delta : int, default 10
        Candidates per token (paper: 10 in table 3; 10 or 24 in table 7). Signal name ``ccp_{delta}_{sigma}``.
    sigma : int, default 8
        Context tokens on each side.
    reference_window : bool, default False
        The reference's ``sigma - 1`` token suffix instead of ``sigma`` (reproduces the published signals).

    Returns
    -------
    list of length n_samples of ndarray of shape (n_tokens_i,)
        Values in [0, 1], higher = more uncertain.
    """
    arrays = token_arrays(dataset)
    values = _ccp_flat(arrays, nli=resolve_nli(nli), decode=tokenizer, delta=delta, sigma=sigma,
                       reference_window=reference_window)
    return arrays.split(values)


def _ccp_compute(arrays: TokenArrays, *, delta: int, sigma: int, suffix: str = "", nli: Any, tokenizer: Any,
                 reference_window: bool = False) -> np.ndarray:
    return _ccp_flat(arrays, nli=nli, decode=tokenizer, delta=delta, sigma=sigma, reference_window=reference_window)


def _ccp_name(signal: str, params: dict[str, Any], resources: dict[str, Any]) -> str:
    nli_name = getattr(resources.get("nli"), "name", None)
    return checked_signal_name(signal, params["suffix"], ccp_signal_name(params["delta"], params["sigma"], nli_name),
                               nli_name)


BASELINES = (
    Baseline(
        name="ccp_{delta}_{sigma}{suffix}", compute=_ccp_compute, display="CCP-{delta}-{sigma}{suffix}",
        params={"suffix": NLI_SUFFIX_PATTERN}, defaults=("ccp_10_8",),
        requirements=Requirements(top_k="delta", resources=("tokenizer", "nli")),
        options=("reference_window",), signal_name=_ccp_name, order=10,
        check=check_delta_param,
        description="claim-conditioned probability over the top-delta candidates, NLI on sigma-token windows "
                    "(Fadeeva et al. 2024; docs/reference-behaviour.md#signals)",
    ),
)
