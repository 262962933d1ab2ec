"""Semantic isotropy against an independent transcription of the seed's formula (eq. 1-3), its kernel variants and
EigenScore against their definitions, and the isotropy signals through compute_signals."""

from __future__ import annotations

import math

import numpy as np
import pytest

from much_metric.baselines.methods.eigenscore import eigenscore
from much_metric.baselines.methods.semantic_isotropy import (
    frobenius_isotropy,
    logdet_isotropy,
    semantic_isotropy_score,
)
from tests.much_metric.baselines._sampling import HashEncoder, sample_split, samples_dataset


def seed_transcription(embeddings) -> float:
    """The seed's section 3.2 written out plainly: normalise each vector, build K with loops (eq. 1), divide by its
    trace, take the eigenvalues of that matrix with the general (non-symmetric) solver, vNE = -sum l log l (eq. 2),
    and divide by log N (eq. 3)."""
    vectors = [list(map(float, row)) for row in embeddings]
    unit = []
    for v in vectors:
        length = math.sqrt(sum(x * x for x in v))
        unit.append([x / length for x in v])
    n = len(unit)
    kernel = [[sum(a * b for a, b in zip(unit[i], unit[j], strict=True)) for j in range(n)] for i in range(n)]
    trace = sum(kernel[i][i] for i in range(n))
    normalised = np.array([[kernel[i][j] / trace for j in range(n)] for i in range(n)])
    eigenvalues = np.linalg.eig(normalised)[0].real
    entropy = -sum(float(value) * math.log(float(value)) for value in eigenvalues if value > 1e-300)
    return entropy / math.log(n)


@pytest.fixture(scope="module")
def minilm():
    from much_metric.baselines.encoders import load_encoder

    return load_encoder("minilm")  # the sampling extra, in the test extra: never skipped


def test_semantic_isotropy_equals_the_seeds_formula_on_real_answers(minilm):
    split = sample_split()
    samples = samples_dataset()
    for gid, answer in zip(split["generation_id"], split["output"], strict=True):
        texts = [answer] + [row["output"] for row in samples if row["generation_id"] == gid]
        embeddings = minilm.encode(texts)
        assert embeddings.shape[0] >= 3
        assert semantic_isotropy_score(embeddings) == pytest.approx(seed_transcription(embeddings), abs=1e-9)


@pytest.mark.parametrize("shape", [(2, 5), (5, 3), (9, 384), (12, 6)])
def test_semantic_isotropy_equals_the_seeds_formula_on_random_vectors(shape):
    rng = np.random.default_rng(sum(shape))
    embeddings = rng.normal(size=shape) + rng.normal(size=(1, shape[1]))  # a shared direction: not isotropic
    assert semantic_isotropy_score(embeddings) == pytest.approx(seed_transcription(embeddings), abs=1e-9)


def test_isotropy_measures_reach_their_bounds():
    aligned = np.tile([[1.0, 2.0, 3.0]], (4, 1)) * np.array([[1.0], [2.0], [0.5], [3.0]])
    orthogonal = np.eye(4) * np.array([[2.0], [1.0], [5.0], [0.1]])
    assert semantic_isotropy_score(aligned) == pytest.approx(0.0, abs=1e-12)
    assert semantic_isotropy_score(orthogonal) == pytest.approx(1.0, abs=1e-12)
    assert frobenius_isotropy(aligned) == pytest.approx(0.0, abs=1e-12)
    assert frobenius_isotropy(orthogonal) == pytest.approx(1.0, abs=1e-12)
    assert logdet_isotropy(aligned) == 0.0
    assert logdet_isotropy(orthogonal) == pytest.approx(1.0, abs=1e-12)
    assert semantic_isotropy_score(np.ones((1, 3))) == 0.0
    with pytest.raises(ValueError, match="zero or not finite"):
        semantic_isotropy_score(np.array([[1.0, 0.0], [0.0, 0.0]]))


def test_kernel_variants_follow_their_definitions():
    rng = np.random.default_rng(3)
    z = rng.normal(size=(6, 10)) + 1.5
    unit = z / np.linalg.norm(z, axis=1, keepdims=True)
    kernel = unit @ unit.T
    m = len(z)
    assert frobenius_isotropy(z) == pytest.approx((m - np.sqrt((kernel ** 2).sum())) / (m - np.sqrt(m)), abs=1e-12)
    assert logdet_isotropy(z) == pytest.approx(np.linalg.det(kernel) ** (1 / m), rel=1e-9)
    # more dispersion -> higher, for all three
    tight = z + 20.0
    for measure in (semantic_isotropy_score, frobenius_isotropy, logdet_isotropy):
        assert measure(tight) < measure(z)


def test_eigenscore_is_the_mean_log_eigenvalue_of_the_regularised_covariance():
    rng = np.random.default_rng(7)
    z = rng.normal(size=(5, 32))  # 5 answers, 32 features
    centred = z.T - z.T.mean(axis=0, keepdims=True)  # J_D Z with Z (D x M)
    sign, logdet = np.linalg.slogdet(centred.T @ centred + 1e-3 * np.eye(5))
    assert sign > 0 and eigenscore(z) == pytest.approx(logdet / 5, abs=1e-9)
    assert eigenscore(np.tile(z[:1], (5, 1))) < eigenscore(z)


def test_isotropy_signals_give_every_claim_its_answers_score():
    from much_metric.baselines import ResourceOptions, compute_signals, token_arrays
    from much_metric.models import load_tokenizer

    split = sample_split()
    encoder = HashEncoder()
    runs = compute_signals(split, ["semantic_isotropy", "semantic_isotropy_samples", "eigenscore"],
                           resources=ResourceOptions(tokenizer=load_tokenizer("smollm2"), samples=samples_dataset(),
                                                     encoder=encoder), progress=False)
    arrays = token_arrays(split)
    samples = samples_dataset()
    for index, gid in enumerate(arrays.generation_ids):
        texts = [row["output"].replace("<|im_end|>", "").strip() for row in samples if row["generation_id"] == gid]
        tokens = arrays.output_tokens[arrays.offsets[index]:arrays.offsets[index + 1]].tolist()
        answer = load_tokenizer("smollm2").decode(tokens, skip_special_tokens=True).strip()
        expected = seed_transcription(encoder.encode([answer, *texts]))
        # claim-level: every claim (EOS claim included) holds its answer's value, whatever its tokens
        values = runs["semantic_isotropy@claim"].values[gid]
        assert len(values) == len(split[index]["token_chunks"]) and np.allclose(values, expected, rtol=0, atol=1e-9)
        alone = seed_transcription(encoder.encode(texts))
        assert runs["semantic_isotropy_samples@claim"].values[gid].max() == pytest.approx(alone, abs=1e-9)
    assert runs["semantic_isotropy@claim"].metadata["resources"]["encoder"] == {"name": "hash-encoder"}
