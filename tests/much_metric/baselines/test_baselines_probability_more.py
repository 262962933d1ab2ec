"""The probability baselines beyond the paper's (nll, margin, Rényi, tail entropy, self-certainty, BoostedProb,
model-free CCP): each against a straightforward per-token implementation written from its formula, against the
reference packages where they exist (boostedprob, scipy), properties (hypothesis), registry names and errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks import probability_loops as loops
from much_dataset import schema, synthetic
from much_metric.baselines import registry, token_entropy, token_likelihood
from much_metric.baselines.methods.boosted_prob import boosted_prob
from much_metric.baselines.methods.ccp import ccp
from much_metric.baselines.methods.claim_conditioned import ccp_no_nli, ccp_surface
from much_metric.baselines.methods.margin import probability_margin
from much_metric.baselines.methods.nll import NLL_FLOOR, token_nll
from much_metric.baselines.methods.renyi import renyi_entropy
from much_metric.baselines.methods.self_certainty import self_certainty
from much_metric.baselines.methods.tail_entropy import tail_entropy
from tests.much_metric._baselines_helpers import HashNli, fake_decode


def _row(gid, tokens, ids, probs):
    return {schema.GENERATION_ID: gid, schema.OUTPUT_TOKENS: tokens, schema.LOGITS_TOKEN_IDS: ids,
            schema.LOGITS_VALUES: probs}


def _tokens(rows):
    """(sampled id, candidate ids, probabilities) of every token, sample after sample."""
    for row in rows:
        yield from zip(row[schema.OUTPUT_TOKENS], row[schema.LOGITS_TOKEN_IDS], row[schema.LOGITS_VALUES],
                       strict=True)


def _flat(per_sample):
    return np.concatenate([np.asarray(v, dtype=np.float64) for v in per_sample])


# ---- straightforward per-token implementations, from the formulas -------------------------------------------


# the one copy of the per-token oracles lives beside the benchmark that times against them (a benchmark imports no
# test module; a test may import a benchmark's helper)
loop_nll, loop_margin, loop_boosted = loops.nll, loops.margin, loops.boosted
loop_renyi, loop_tail, loop_self_certainty = loops.renyi, loops.tail_entropy, loops.self_certainty
loop_ccp_no_nli = loops.ccp_no_nli


def loop_ccp_surface(token, ids, probs, decode, *, delta):
    order = sorted(range(len(probs)), key=lambda k: -probs[k])[:delta]
    candidates = [(ids[k], probs[k]) for k in order]
    if token not in [c for c, _ in candidates]:
        candidates.append((token, probs[list(ids).index(token)]))
    norm = lambda i: decode([[int(i)]])[0].strip().casefold()  # noqa: E731
    same = sum(p for c, p in candidates if norm(c) == norm(token))
    return 1 - same / sum(p for _, p in candidates)


CASES = [
    (token_nll, loop_nll, {}),
    (probability_margin, loop_margin, {}),
    (boosted_prob, loop_boosted, {}),
    *[(renyi_entropy, loop_renyi, {"alpha": a, "delta": d}) for a in (0, 0.5, 1, 2, 3.5, math.inf) for d in (5, 24)],
    *[(tail_entropy, loop_tail, {"delta": d}) for d in (2, 10, 24)],
    *[(self_certainty, loop_self_certainty, {"delta": d}) for d in (5, 24)],
    *[(ccp_no_nli, loop_ccp_no_nli, {"delta": d}) for d in (10, 24)],
]


@pytest.mark.parametrize(("fn", "loop", "params"), CASES,
                         ids=[f"{fn.__name__}-{params}" for fn, _, params in CASES])
def test_matches_the_per_token_loop(fn, loop, params):
    rows = synthetic.make_rows(40, seed=len(params) + 3)
    ours = _flat(fn(rows, **params))
    theirs = np.array([loop(*token, **params) for token in _tokens(rows)])
    np.testing.assert_allclose(ours, theirs, rtol=1e-9, atol=1e-12)
    assert np.all((ours >= 0) & (ours <= (np.inf if fn is token_nll else 1.0)))


def test_ccp_surface_matches_the_loop_with_colliding_texts():
    def decode(batch):  # ids 0-9 collide by case and spaces: ' W3', 'w3', ...
        return [("".join(f" W{i % 10}" if i % 3 else f"w{i % 10}" for i in ids)) for ids in batch]

    rows = synthetic.make_rows(30, seed=8)
    for delta in (5, 10):
        ours = _flat(ccp_surface(rows, tokenizer=decode, delta=delta))
        theirs = np.array([loop_ccp_surface(*token, decode, delta=delta) for token in _tokens(rows)])
        np.testing.assert_allclose(ours, theirs, rtol=1e-12)
        assert np.all(ours <= _flat(ccp_no_nli(rows, delta=delta)) + 1e-12)


@pytest.mark.parametrize("delta", [5, 10])
def test_ccp_no_nli_bounds_ccp_for_any_nli(delta):
    rows = synthetic.make_rows(8, seed=2)
    upper = _flat(ccp_no_nli(rows, delta=delta))
    for labels in ({0: "CONTRADICTION", 1: "NEUTRAL", 2: "ENTAILMENT"}, {0: "entailment", 1: "not_entailment"}):
        values = _flat(ccp(rows, nli=HashNli(labels), tokenizer=fake_decode, delta=delta, sigma=2))
        assert np.all(values <= upper + 1e-12)
        assert np.any(values < upper - 1e-6)  # not trivially equal


def test_boosted_prob_equals_the_authors_package_when_the_tail_is_below_epsilon():
    boostedprob = pytest.importorskip("boostedprob")  # test extra: boostedprob==0.1.1
    import torch

    rng = np.random.default_rng(0)
    vocab, n = 300, 400
    rows, full = [], []
    for index in range(n // 20):
        logits = rng.normal(0, 1, (20, vocab)) * rng.choice([1.0, 3.0, 8.0], (20, 1))
        logits[:, :6] += rng.choice([0.0, 4.0, 6.0], (20, 6))  # a few dominant tokens, sometimes
        p = np.exp(logits - logits.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        order = np.argsort(-p, axis=1)[:, : schema.TOP_K]
        sampled = order[np.arange(20), rng.integers(0, 6, 20)]
        rows.append(_row(f"b{index}", sampled.tolist(), order.tolist(), np.take_along_axis(p, order, 1).tolist()))
        full.append((p, sampled))
    exact = []
    for p, sampled in full:
        value = boostedprob.calculate_boostedprob(torch.tensor(np.log(p))[None], torch.tensor(sampled)[None])
        exact.append(1 - value[0].numpy())
    exact = np.concatenate(exact)
    ours = _flat(boosted_prob(rows))
    p24 = np.concatenate([np.asarray(r[schema.LOGITS_VALUES])[:, -1] for r in rows])
    exact_rows = p24 <= 0.005
    assert exact_rows.mean() > 0.5 and len(set(np.round(exact[exact_rows], 6))) > 20
    np.testing.assert_allclose(ours[exact_rows], exact[exact_rows], rtol=1e-9, atol=1e-12)
    assert np.all(ours[~exact_rows] >= exact[~exact_rows] - 1e-12)  # missed jumps only raise the score


def test_self_certainty_equals_kl_from_uniform_when_the_vocabulary_is_the_candidates():
    rng = np.random.default_rng(1)
    p = -np.sort(-rng.dirichlet(np.ones(schema.TOP_K), size=7), axis=1)
    ids = np.tile(np.arange(schema.TOP_K), (7, 1))
    rows = [_row("v", ids[:, 0].tolist(), ids.tolist(), p.tolist())]
    kl = -np.log(p).mean(axis=1) - np.log(schema.TOP_K)  # LM-Polygraph's per-token KL(U || p), V = 24
    np.testing.assert_allclose(self_certainty(rows)[0], np.exp(-kl), rtol=1e-12)


def test_special_values():
    tiny = [_row("a", [7, 2], [[5, 7, 9, 11], [2, 3, 4, 6]], [[0.5, 0.3, 0.1, 0.05], [0.25, 0.25, 0.25, 0.25]])]
    np.testing.assert_allclose(token_nll(tiny)[0], [-math.log(0.3), -math.log(0.25)])
    np.testing.assert_allclose(probability_margin(tiny)[0], [0.8, 1.0])
    for alpha in (0, 0.5, 2, math.inf):
        assert renyi_entropy(tiny, alpha=alpha, delta=4)[0][1] == pytest.approx(1.0)  # uniform: maximal
    np.testing.assert_allclose(renyi_entropy(tiny, alpha=1, delta=3)[0], token_entropy(tiny, delta=3)[0])
    assert self_certainty(tiny, delta=4)[0][1] == pytest.approx(1.0)
    assert tail_entropy(tiny, delta=4)[0][1] == pytest.approx(math.log(4) / math.log(5))  # no tail left
    # No jump in row 1 (uniform); row 0: gaps 0.2 (> 0.3 * 0.5? no), 0.2 (> 0.09 yes), 0.05 (> 0.03 yes) -> 3 dominant
    np.testing.assert_allclose(boosted_prob(tiny)[0], [1 - 0.9, 1 - 0.25])
    np.testing.assert_allclose(ccp_no_nli(tiny, delta=2)[0], [1 - 0.3 / 0.8, 0.5])
    # The sampled token outside the top delta is appended with its probability.
    assert ccp_no_nli(tiny, delta=2)[0][0] == pytest.approx(ccp_no_nli([{**tiny[0]}], delta=2)[0][0])
    outside = [_row("o", [11], [[5, 7, 9, 11]], [[0.5, 0.3, 0.1, 0.05]])]
    assert ccp_no_nli(outside, delta=2)[0][0] == pytest.approx(1 - 0.05 / 0.85)
    # nll: an absent sampled token takes the row's smallest probability; an underflowed one the float32 floor.
    absent = [_row("m", [99, 3], [[5, 7, 9, 11], [3, 4, 5, 6]], [[0.5, 0.3, 0.1, 0.05], [0.0, 0.0, 0.0, 0.0]])]
    np.testing.assert_allclose(token_nll(absent)[0], [-math.log(0.05), -math.log(NLL_FLOOR)])


def test_errors_name_the_sample():
    absent = [_row("gen-z", [99], [[5, 7, 9, 11]], [[0.5, 0.3, 0.1, 0.05]])]
    for fn in (boosted_prob, lambda rows: ccp_no_nli(rows, delta=2)):
        with pytest.raises(ValueError, match=r"generation_id='gen-z', token 0.*sampled token id 99"):
            fn(absent)
    zero = [_row("gen-0", [5], [[5, 7, 9, 11]], [[0.0, 0.0, 0.0, 0.0]])]
    with pytest.raises(ValueError, match=r"generation_id='gen-0', token 0.*sum to 0"):
        self_certainty(zero, delta=4)
    with pytest.raises(ValueError, match="alpha"):
        renyi_entropy(absent, alpha=-1, delta=4)
    with pytest.raises(ValueError, match="delta"):
        tail_entropy(absent, delta=5)
    with pytest.raises(ValueError, match="tokenizer"):
        ccp_surface(absent, tokenizer=None)


def test_registry_names_groups_and_checks():
    group = registry.signal_groups()["all-probability"]
    for name in ("nll", "probability_margin", "boosted_prob", "tail_entropy_24", "renyi_entropy_0.5_24",
                 "renyi_entropy_2_24", "self_certainty_24", "ccp_no_nli_10", "ccp_no_nli_24"):
        assert name in group
    assert "ccp_surface_10" in registry.signal_groups()["all"] and "ccp_surface_10" not in group
    spec = registry.resolve("renyi_entropy_inf_10")
    assert spec.params == {"alpha": math.inf, "delta": 10} and spec.display == "Rényi Entropy-inf-10"
    assert registry.resolve("ccp_no_nli_10").baseline.name == "ccp_no_nli_{delta}"  # not CCP's pattern
    with pytest.raises(ValueError, match="delta"):
        registry.resolve("self_certainty_30")
    rows = synthetic.make_rows(5, seed=1)
    from much_metric.baselines import token_arrays

    arrays = token_arrays(rows)
    for name in group:
        values = registry.resolve(name).compute(arrays, {}, {})
        assert values.shape == (arrays.n_tokens,) and np.isfinite(values).all()


@st.composite
def _random_rows(draw):
    width = draw(st.integers(2, 8))
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    concentration = draw(st.sampled_from([0.02, 0.3, 1.0, 30.0]))
    rows = []
    for index in range(draw(st.integers(1, 3))):
        n = int(rng.integers(1, 5))
        probs = -np.sort(-rng.dirichlet(np.full(width + 1, concentration), size=n)[:, :width], axis=1)
        ids = np.stack([rng.permutation(50)[:width] for _ in range(n)])
        tokens = ids[np.arange(n), rng.integers(0, width, n)]
        rows.append(_row(f"h{index}", tokens.tolist(), ids.tolist(), probs.tolist()))
    return rows, width, draw(st.integers(2, width))


@settings(max_examples=60, deadline=None)
@given(_random_rows())
def test_properties_against_the_loops(case):
    rows, width, delta = case
    if any(sum(sorted(p, reverse=True)[:delta]) == 0 for _, _, p in _tokens(rows)):
        return
    checks = [(token_nll(rows), loop_nll, {}), (probability_margin(rows), loop_margin, {}),
              (boosted_prob(rows), loop_boosted, {}), (tail_entropy(rows, delta=delta), loop_tail, {"delta": delta}),
              (ccp_no_nli(rows, delta=delta), loop_ccp_no_nli, {"delta": delta}),
              (self_certainty(rows, delta=delta), loop_self_certainty, {"delta": delta}),
              (renyi_entropy(rows, alpha=2, delta=delta), loop_renyi, {"alpha": 2, "delta": delta})]
    for values, loop, params in checks:
        expected = [loop(*token, **params) for token in _tokens(rows)]
        np.testing.assert_allclose(_flat(values), expected, rtol=1e-9, atol=1e-12)
    # Orderings that hold by construction.
    tl = _flat(token_likelihood(rows))
    assert np.all(_flat(ccp_no_nli(rows, delta=delta)) <= tl + 1e-12)  # renormalising over a mass <= 1
    assert np.all(_flat(boosted_prob(rows)) <= tl + 1e-12)  # boosting only adds mass
    h = {a: _flat(renyi_entropy(rows, alpha=a, delta=delta)) for a in (0, 0.5, 1, 2, math.inf)}
    for low, high in ((0, 0.5), (0.5, 1), (1, 2), (2, math.inf)):
        assert np.all(h[high] <= h[low] + 1e-9)  # Rényi entropy is non-increasing in alpha
