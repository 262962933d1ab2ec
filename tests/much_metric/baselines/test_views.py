"""Input views (issue #48): what an API with ``top_logprobs=K`` returns, and the registry's declarations of how many
candidates each method reads -- checked, not trusted: on the view of its declared depth every registered method
gives exactly its numbers on the stored 24 candidates."""

from __future__ import annotations

import numpy as np
import pytest

import much_dataset
from much_metric.baselines import Baseline, ResourceOptions, resolve, token_arrays
from much_metric.baselines.registry import available
from much_metric.baselines.views import padded, top_k_view


@pytest.fixture(scope="module")
def arrays():
    """60 samples of the embedded sample (SmolLM2's top-24; its sampler drew from the top 20)."""
    return token_arrays(much_dataset.load("sample", split="test").select(range(60)))


def _api_answer(arrays, k):
    """What an OpenAI-style API returns per token, built token by token (the straightforward way): the k most
    probable (id, p), plus (sampled id, its p) when the sampled token is not among them."""
    rows = []
    for token in range(arrays.n_tokens):
        order = np.argsort(-arrays.probabilities[token], kind="stable")
        top = [(int(arrays.candidate_ids[token, c]), float(arrays.probabilities[token, c])) for c in order[:k]]
        sampled = int(arrays.output_tokens[token])
        if sampled not in [i for i, _ in top]:
            column = int(np.flatnonzero(arrays.candidate_ids[token] == sampled)[0])
            top.append((sampled, float(arrays.probabilities[token, column])))
        rows.append(top)
    return rows


@pytest.mark.parametrize("k", [0, 1, 5, 20, 24])
def test_the_view_is_the_k_most_probable_and_the_sampled_token_as_an_api_returns_them(arrays, k):
    view = top_k_view(arrays, k)
    expected = _api_answer(arrays, k)
    width = max(len(row) for row in expected)
    assert view.probabilities.shape == (arrays.n_tokens, width)
    for token, row in enumerate(expected):
        got = [(int(i), float(p)) for i, p in zip(view.candidate_ids[token], view.probabilities[token], strict=True)
               if i >= 0]
        assert got == row  # not renormalised: the stored probabilities themselves
    assert (view.probabilities[view.candidate_ids < 0] == 0).all()
    assert view.token_chunks == arrays.token_chunks and np.array_equal(view.stopword_mask, arrays.stopword_mask)


def test_the_top_24_view_is_the_stored_data_and_a_narrow_one_extends_rows_only_when_needed(arrays):
    full = top_k_view(arrays, 24)
    assert np.array_equal(full.probabilities, arrays.probabilities)
    assert np.array_equal(full.candidate_ids, arrays.candidate_ids)
    assert top_k_view(arrays, 5).probabilities.shape[1] == 6  # some sampled tokens rank below 5


def test_padded_fills_with_probability_zero_and_id_minus_one(arrays):
    wide = padded(top_k_view(arrays, 5))
    assert wide.probabilities.shape[1] == 24
    assert (wide.probabilities[:, 6:] == 0).all() and (wide.candidate_ids[:, 6:] == -1).all()
    assert padded(arrays) is arrays


def test_bad_views_are_refused(arrays):
    for k in (-1, 25, 2.0, True):
        with pytest.raises(ValueError, match=r"top_k must be an integer in \[0, 24\]"):
            top_k_view(arrays, k)
    broken = token_arrays(much_dataset.load("sample", split="test").select(range(2)))
    broken.output_tokens[3] = 10**9  # a sampled token that is not among the stored candidates
    with pytest.raises(ValueError, match=r"generation_id=.*token 3.*not among the 24 stored candidates"):
        top_k_view(broken, 5)


def _same_on_its_view(spec, arrays, resources):
    """Whether ``spec`` gives on the view of its declared depth exactly what it gives on the stored data."""
    full = spec.compute(arrays, resources, {})
    viewed = spec.compute(top_k_view(arrays, spec.top_k), resources, {})
    return np.array_equal(full, viewed)


def _default_signals():
    """Every registered method's default signals that run offline (the internals and NLI ones need a pack or a
    model: their probability part is checked through the ones that share it; the sampling and reference detectors
    read texts, not candidates, and are checked with their samples in test_sample_consistency.py)."""
    offline_only = {"internals", "nli", "samples", "reference", "encoder"}
    return [name for baseline in available().values() if not offline_only & set(baseline.needs)
            for name in baseline.defaults]


def test_every_registered_method_reads_no_more_candidates_than_it_declares(arrays):
    from much_metric.baselines.methods.ktc import default_neighbours
    from much_metric.models import SMOLLM2, load_tokenizer

    resources = ResourceOptions(tokenizer=load_tokenizer(SMOLLM2), neighbours=default_neighbours("sample")).as_dict()
    names = _default_signals()
    assert {"token_likelihood", "max_likelihood", "token_entropy_24", "ccp_surface_10", "ktc"} <= set(names)
    wrong = [name for name in names if not _same_on_its_view(resolve(name), arrays, resources)]
    assert wrong == []
    assert {resolve(name).top_k for name in names} >= {0, 1, 2, 10, 24}  # not everything at the default 24


def test_a_learned_detector_is_exact_on_top_24_only(arrays, tmp_path):
    from much_metric.learned import LinearDetector

    rows = much_dataset.load("sample", split="test")
    LinearDetector(max_epochs=1).fit(rows.select(range(60, 100)), rows.select(range(100, 110)),
                                     progress=False).save(tmp_path / "linear")
    spec = resolve(f"learned:{tmp_path / 'linear'}")
    assert spec.top_k == 24 and _same_on_its_view(spec, arrays, {})
    wide = padded(top_k_view(arrays, 5))
    assert not np.array_equal(spec.compute(wide, {}, {}), spec.compute(arrays, {}, {}))  # it reads ranks beyond 5


def test_the_check_catches_a_method_that_reads_deeper_than_it_declares(arrays):
    def third(arrays):  # reads the third candidate, declares one
        return 1.0 - arrays.probabilities[:, 2]

    liar = Baseline(name="third_candidate", compute=third, top_k=3)
    from much_metric.baselines._baseline import BaselineSpec

    assert _same_on_its_view(BaselineSpec("third_candidate", liar, {}), arrays, {})
    # declared 1: the view has no third column to read, and the signal's error names the IndexError
    with pytest.raises(RuntimeError, match="third_candidate.*IndexError") as raised:
        _same_on_its_view(BaselineSpec("third_candidate", Baseline(name="t", compute=third, top_k=1), {}), arrays,
                          {})
    assert isinstance(raised.value.__cause__, IndexError)

    def max_of_row(arrays):  # reads every candidate's probability (a sum), declares 2
        return arrays.probabilities.sum(axis=1)

    assert not _same_on_its_view(BaselineSpec("s", Baseline(name="s", compute=max_of_row, top_k=2), {}), arrays, {})
