"""KTC's kernels and entropy against a straightforward per-token implementation (scipy expm / eigvalsh), written
from docs/reference-behaviour.md#signals with the reference's structure; hypothesis properties and error messages."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from scipy.linalg import eigvalsh, expm

from much_metric.baselines._ktc_kernels import KERNELS, NORMALIZATIONS, ktc_token_scores

EPS = 1e-5


def straightforward(q, a, *, tau, kernel="heat", normalization="scale", alpha=0.5):
    """One token at a time, as the reference: scipy expm, explicit matrices, eigvalsh."""
    out = []
    for qi, ai in zip(q, a, strict=True):
        if kernel == "heat":
            lap = np.diag(ai.sum(axis=0)) - ai
            k = expm(-tau * lap)
        elif kernel == "square":
            k = ai @ ai
        elif kernel == "augm":
            k = ai - min(eigvalsh(ai).min(), -EPS) * np.eye(len(ai))
        else:
            w, v = np.linalg.eigh(ai)
            k = (v * np.maximum(w, EPS)) @ v.T
        k = k / np.trace(k)
        if normalization == "scale":
            root = np.diag(np.sqrt(qi))
            k = root @ k @ root
        elif normalization == "comb":
            k = alpha * np.diag(qi) + (1 - alpha) * k
        k = k / np.trace(k)
        lam = np.maximum(eigvalsh(k), EPS)
        out.append(-(lam * np.log(lam)).sum() / np.log(len(qi)))
    return np.asarray(out)


def random_inputs(rng, n, delta, *, levels=None):
    q = np.sort(rng.dirichlet(np.full(delta + 1, 0.3), size=n)[:, :delta], axis=1)[:, ::-1]
    raw = rng.random((n, delta, delta)) if levels is None else rng.integers(0, levels + 1, (n, delta, delta)) / levels
    a = np.triu(raw, 1)
    a = a + a.transpose(0, 2, 1)
    a[:, np.arange(delta), np.arange(delta)] = 1.0
    return q, a


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("normalization", NORMALIZATIONS)
def test_matches_straightforward_on_random_inputs(kernel, normalization):
    rng = np.random.default_rng(0)
    q, a = random_inputs(rng, 40, 24, levels=4)  # nu = 4: overlaps in {0, 1/4, ..., 1}
    got = ktc_token_scores(q, a, tau=0.3, kernel=kernel, normalization=normalization, alpha=0.25)
    want = straightforward(q, a, tau=0.3, kernel=kernel, normalization=normalization, alpha=0.25)
    np.testing.assert_allclose(got, want, atol=1e-9)
    assert np.all((got >= 0) & (got <= 1))


def test_chunks_do_not_change_scores(monkeypatch):
    import much_metric.baselines._ktc_kernels as kernels

    q, a = random_inputs(np.random.default_rng(1), 50, 8)
    whole = ktc_token_scores(q, a, tau=0.4)
    monkeypatch.setattr(kernels, "_CHUNK", 7)
    np.testing.assert_array_equal(ktc_token_scores(q, a, tau=0.4), whole)


def test_hand_values():
    # All-ones adjacency (no contradiction at all): heat kernel of the complete graph, uniform q.
    delta = 4
    a = np.ones((1, delta, delta))
    q = np.full((1, delta), 0.25)
    # L = 4 I - J has eigenvalues 0 (once) and 4 (three times) -> kernel eigenvalues prop. to 1, e^-4tau x3.
    tau = 0.5
    e = np.array([1.0, *[np.exp(-4 * tau)] * 3])
    lam = np.maximum(e / e.sum(), EPS)
    want = -(lam * np.log(lam)).sum() / np.log(delta)
    np.testing.assert_allclose(ktc_token_scores(q, a, tau=tau), [want], rtol=1e-12)
    # Identity adjacency (all contradict... no edge): heat kernel = I / delta; with one certain candidate -> floor.
    a = np.eye(delta)[None]
    q = np.array([[1.0, 0.0, 0.0, 0.0]])
    floor = -(1 * np.log(1.0) + 3 * EPS * np.log(EPS)) / np.log(delta)
    np.testing.assert_allclose(ktc_token_scores(q, a, tau=tau), [floor], rtol=1e-9)
    np.testing.assert_allclose(ktc_token_scores(np.full((1, delta), 0.2), a, tau=tau), [1.0], rtol=1e-12)


@settings(max_examples=40, deadline=None)
@given(
    delta=st.integers(2, 10),
    seed=st.integers(0, 2**32 - 1),
    tau=st.floats(0, 3),
    alpha=st.floats(0, 1),
    kernel=st.sampled_from(KERNELS),
    normalization=st.sampled_from(NORMALIZATIONS),
)
def test_property_matches_straightforward(delta, seed, tau, alpha, kernel, normalization):
    q, a = random_inputs(np.random.default_rng(seed), 3, delta)
    got = ktc_token_scores(q, a, tau=tau, kernel=kernel, normalization=normalization, alpha=alpha)
    np.testing.assert_allclose(got, straightforward(q, a, tau=tau, kernel=kernel, normalization=normalization,
                                                    alpha=alpha), atol=1e-8)
    assert np.all((got >= 0) & (got <= 1 + 1e-12))


@settings(max_examples=30, deadline=None)
@given(perm_seed=st.integers(0, 1000), q=hnp.arrays(np.float64, 6, elements=st.floats(1e-6, 1)))
def test_property_relabelling_invariant(perm_seed, q):
    """Permuting the candidates (q and A together) does not change the score: it depends on no candidate order."""
    rng = np.random.default_rng(perm_seed)
    _, a = random_inputs(rng, 1, 6)
    q = q[None] / max(q.sum(), 1.0)
    perm = rng.permutation(6)
    base = ktc_token_scores(q, a, tau=0.3)
    np.testing.assert_allclose(ktc_token_scores(q[:, perm], a[:, perm][:, :, perm], tau=0.3), base, atol=1e-10)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"kernel": "mixture"}, "kernel must be one of"),
        ({"normalization": "softmax"}, "normalization must be one of"),
        ({"tau": -1}, "tau"),
        ({"alpha": 1.5}, "alpha"),
    ],
)
def test_bad_options(kwargs, message):
    q, a = random_inputs(np.random.default_rng(2), 2, 4)
    with pytest.raises(ValueError, match=message):
        ktc_token_scores(q, a, **{"tau": 0.3, **kwargs})


def test_bad_arrays_name_the_token():
    q, a = random_inputs(np.random.default_rng(3), 3, 4)
    bad = a.copy()
    bad[1, 0, 2] = 0.1
    with pytest.raises(ValueError, match="token 1: adjacency is not symmetric"):
        ktc_token_scores(q, bad, tau=0.3)
    bad = a.copy()
    bad[2, 3, 3] = 0.0
    with pytest.raises(ValueError, match="token 2: adjacency must have a unit diagonal"):
        ktc_token_scores(q, bad, tau=0.3)
    bad_q = q.copy()
    bad_q[1, 2] = 1.5
    with pytest.raises(ValueError, match=r"token 1: probabilities\[1, 2\]"):
        ktc_token_scores(bad_q, a, tau=0.3)
    with pytest.raises(ValueError, match="token 0: all 4 candidate probabilities are 0"):
        ktc_token_scores(np.zeros((1, 4)), a[:1], tau=0.3)
    with pytest.raises(ValueError, match="adjacency must have shape"):
        ktc_token_scores(q, a[:, :3, :3], tau=0.3)


@pytest.mark.parametrize("tau", [0.0, 0.05, 0.3, 2.0, 10.0, 12.4, 12.6, 40.0])
@pytest.mark.parametrize("levels", [None, 4])
def test_heat_taylor_path_and_eigh_fallback_match_scipy_expm(tau, levels):
    """The heat kernel is a Taylor polynomial up to tau * delta = 300 (12.5 at delta = 24) and one eigh per token
    beyond: both against scipy's expm, on dense random graphs (many squarings) and sparse nu = 4-like ones."""
    rng = np.random.default_rng(int(tau * 10))
    q, a = random_inputs(rng, 30, 24, levels=levels)
    if levels:  # mostly 1 (no shared neighbours), as real adjacencies: a sparse similarity graph
        a = np.where(rng.random(a.shape) < 0.8, 1.0, np.minimum(a, a.transpose(0, 2, 1)))
        a = np.triu(a, 1) + np.triu(a, 1).transpose(0, 2, 1) + np.eye(24)
    for normalization in NORMALIZATIONS:
        got = ktc_token_scores(q, a, tau=tau, normalization=normalization)
        np.testing.assert_allclose(got, straightforward(q, a, tau=tau, normalization=normalization), atol=1e-10)


def test_heat_taylor_kernel_matches_expm():
    from much_metric.baselines._ktc_kernels import heat_kernel_taylor

    q, a = random_inputs(np.random.default_rng(5), 20, 24, levels=8)
    for tau in (0.1, 0.3, 1.0, 5.0):
        got = heat_kernel_taylor(a, tau)
        got /= np.trace(got, axis1=1, axis2=2)[:, None, None]
        for gi, ai in zip(got, a, strict=True):
            want = expm(-tau * (np.diag(ai.sum(axis=0)) - ai))
            np.testing.assert_allclose(gi, want / np.trace(want), atol=1e-14, rtol=1e-11)


@pytest.mark.parametrize("kernel", KERNELS)
def test_torch_device_path_matches_numpy(kernel):
    """device= routes the batched eigen-decomposition through torch (the GPU path; "cpu" runs the same code here)."""
    pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    q, a = random_inputs(rng, 600, 24, levels=4)  # more than one device chunk would need _DEVICE_CHUNK; one here
    want = ktc_token_scores(q, a, tau=0.3, kernel=kernel, normalization="scale")
    got = ktc_token_scores(q, a, tau=0.3, kernel=kernel, normalization="scale", device="cpu")
    np.testing.assert_allclose(got, want, atol=1e-10)
    assert not np.array_equal(got, ktc_token_scores(q, a, tau=0.6, kernel=kernel, device="cpu")) or kernel != "heat"


def test_unknown_device_is_refused_by_name():
    pytest.importorskip("torch")
    q, a = random_inputs(np.random.default_rng(0), 2, 4)
    with pytest.raises(ValueError, match="device='gpu0' is not a torch device name"):
        ktc_token_scores(q, a, tau=0.3, device="gpu0")
    with pytest.raises(ValueError, match="device must be a torch device name"):
        ktc_token_scores(q, a, tau=0.3, device=0)
