"""KTC: config IDs against the reference's published IDs, the adjacency against a per-pair implementation written
from docs/reference-behaviour.md#signals (sets, str.startswith), the registry names, the embedded sample's statistics,
error messages."""

from __future__ import annotations

import numpy as np
import pytest

import much_dataset
from much_metric.baselines import compute_signals, resolve, token_arrays
from much_metric.baselines.methods.ktc import (
    KTC_DEFAULT,
    KTC_NAMED_CONFIGS,
    KTC_REFERENCE_CONFIGS,
    KTCConfig,
    default_neighbours,
    ktc,
    ktc_adjacency,
    register_config,
)
from much_metric.baselines.neighbours import NeighbourStats, count_pairs, stats_from_counts

from .test_baselines_ktc_kernels import straightforward

# The folder names of the reference's output/ktc_configs (55 configs) and the 8 named in its notebook
# (docs/reference-behaviour.md#signals).
PUBLISHED_IDS = set("""
-BxpeIdeewY39PPMVyflfQ -LngWexrSSEwJFO9h1l6Rg 2QnNhqkdkqcCmziMWD1kMQ 40gnhCYXgCHliAHGBSw6bQ 4kXyhBeeCwjoVsrofe9hPQ
5-sGwDu3zzW3o9xtaaIC-g 6H90nX1vSR75WQQNhh969Q 9-jGy0_pG1e6RbJIe0ZMCg A0TLXp2dhHAuToaVBpz4fQ AMHvqMWhYrdwc4PDYueUmQ
BUmbtVRGE2-MOUxjiHpMTg CnQOD8G4SO4ihlU_qsAN6A DM1qsY2yGVSu3A0vOJN_0w DkxuYUtD3nl4KC5dAHFEVw FXhom80Y0B0ulvFDxJ9Q4g
FZHut3Q2RVvT3YwTASeuEA G8nlpXilpBwfQDYI2pLB_A GXwhdsu-Y_ex8WNSQSsQcw I9K5uRjwwPDKXsATDiSUow IxNKjQK8EsafkxS9QQJTdQ
JNL89ByWNI6jQYiVQGXU5g KlWh8v5-FdMjURzQGLAJog LRdWg6BLqfntDJDxaq9F4Q O8MIVWH_mBQp5CmnOa0Aww OMhXrtIx86r9wpd-XauNPQ
PwGcQeDoHKp7kbk1aZIbUA RYxmoyp1awYParfCjjxgnQ S6YhbBdK56RFwi73kU8fhw Wo0GoYjpJhYzHUGLe8dFQQ X3J6NwiOroD233jYutDW9g
Y5SPgJbW-B1aiI18hewM8w _ix5qlCFKDn-6gqML-wflg aafoWU2PoOZpccAy7q6o5Q b55qBpKqipiD5DA2eoARmw bOAGL00q2XEgGESw06X48A
dfDUGiVxa2e370XqRKpfhw e93xCcSl6u-5syN83GCXqQ eHB-FfM9pX3kFfR9TjPz6g eLupcdzXp1dekVadToO7tQ ftXo1jr6lv7yXntNVX0cUw
hz7Wq0oCCvyftRCqQW6Drg jPSXdwK3WyoV1ul1BDoQ-Q k5cYV8t69KNf1ZXURozWBA lFKnrf2rr26hoamydKC1Aw lLd2FHHmITo-jycsZixzPQ
lYNbUxVxHizBTJ16aTXsAQ nRYPBpDja2yOsW3Cvt7XKA oLUFnZ5KtTuEOZ9mIYyV2A oQ3zksEmWrafqLLUoW5ZYA obQFNUqY8NxY0zblS7ssZA
rOACKC3xV_TDogLnEDDdwg s27xykJReFEHvDUSLTA1mw uy1L8ZyBJuHYkxR2xYa9sg xkD5qQCjpM3Bqd92mW3Scw yjHui8ZH-djrsILktJah4g
""".split())
NAMED_PREFIXES = ("Wo0Go", "lFKn", "b55q", "RYxm", "DM1q", "S6Yh", "aafo", "eHB-")


def test_config_ids_reproduce_the_published_ones():
    assert len(PUBLISHED_IDS) == 55
    assert {c.id for c in KTC_REFERENCE_CONFIGS} == PUBLISHED_IDS
    grid = [KTCConfig(nu=nu, tau=tau) for nu in (3, 4, 5, 6, 8) for tau in (0.1, 0.2, 0.3, 0.4, 0.5, 0.7)]
    assert len({c.id for c in grid}) == 30 and {c.id for c in grid} <= PUBLISHED_IDS
    assert [c.id[: len(p)] for c, p in zip(KTC_NAMED_CONFIGS, NAMED_PREFIXES, strict=True)] == list(NAMED_PREFIXES)
    # docs/reference-behaviour.md#reference-numbers, manual pPR 0.7483
    assert KTCConfig(nu=3, tau=0.2).id == "Wo0GoYjpJhYzHUGLe8dFQQ"
    # docs/reference-behaviour.md#reference-numbers, auto ROC-AUC 0.7524
    assert KTC_DEFAULT.id == "RYxmoyp1awYParfCjjxgnQ"
    # ALPHA=0 in the reference's script is the float 0.0 (the ID hashes str(value)).
    assert KTCConfig(normalization_method="comb", nu=3, alpha=0).id == KTCConfig(normalization_method="comb", nu=3,
                                                                                  alpha=0.0).id


@pytest.mark.parametrize(("kwargs", "error"), [({"kernel_method": "mixture"}, ValueError), ({"nu": 0}, ValueError),
                                               ({"tau": "0.3"}, TypeError), ({"prefix_entail": 1}, TypeError)])
def test_bad_config(kwargs, error):
    with pytest.raises(error):
        KTCConfig(**kwargs)


def test_signal_names_resolve():
    assert resolve("ktc").stored_name({}) == "ktc_RYxmoyp1awYParfCjjxgnQ"
    assert resolve("ktc_nu3_tau0.2").stored_name({}) == "ktc_Wo0GoYjpJhYzHUGLe8dFQQ"
    spec = resolve("ktc_-BxpeIdeewY39PPMVyflfQ")
    assert spec.params == {"config_id": "-BxpeIdeewY39PPMVyflfQ"}
    with pytest.raises(ValueError, match="unknown KTC config id"):
        resolve("ktc_AAAAAAAAAAAAAAAAAAAAAA")


def test_table_labels_read_nu_and_tau_where_they_say_it_all():
    assert resolve(KTC_DEFAULT.signal_name).display == "KTC-4-0.3"  # what `much run` prints for `ktc`
    assert resolve("ktc_nu3_tau0.2").display == resolve(KTCConfig(nu=3, tau=0.2).signal_name).display == "KTC-3-0.2"
    other = KTCConfig(kernel_method="clip", normalization_method="none", nu=5)
    assert resolve(register_config(other)).display == f"KTC {other.id}"  # other fields changed: the id says which


def _hand_stats(vocabulary, neighbour_lists, keep=4, position=0):
    dense = np.full((len(vocabulary), keep), -1, np.int32)
    for token, ids in neighbour_lists.items():
        dense[token, : len(ids)] = ids
    return NeighbourStats(dense, (dense >= 0).astype(np.int64), tuple(vocabulary), position, "hand", "hand", 0)


def per_pair_adjacency(ids, stats, nu, prefix_entail):
    """docs/reference-behaviour.md#signals pair by pair: Python sets and str.startswith, as the reference."""
    out = np.ones((len(ids), len(ids[0]), len(ids[0])))
    for t, row in enumerate(ids):
        sets = [{int(x) for x in stats.neighbours[c, :nu] if x >= 0} for c in row]
        for i in range(len(row)):
            for j in range(i + 1, len(row)):
                a, b = stats.vocabulary[row[i]], stats.vocabulary[row[j]]
                if prefix_entail and a and b and (a.startswith(b) or b.startswith(a)):
                    value = 1.0
                elif not sets[i] or not sets[j]:
                    value = 1.0
                else:
                    value = 1 - len(sets[i] & sets[j]) / min(len(sets[i]), len(sets[j]))
                out[t, i, j] = out[t, j, i] = value
    return out


def test_adjacency_by_hand():
    vocab = ["Ġthe", "Ġtherefore", "ĠParis", "ĠLondon", "<eos>"]
    stats = _hand_stats(vocab, {0: [9, 8], 1: [9, 7], 2: [0, 5, 6, 7], 3: [0, 5, 6, 1], 4: []})
    a = ktc_adjacency([[2, 3, 0, 1, 4]], stats, nu=4)[0]
    assert a[0, 1] == pytest.approx(1 - 3 / 4)  # Paris/London share 3 of 4 neighbours: replaceable
    assert a[2, 3] == 1.0  # 'Ġthe' is a prefix of 'Ġtherefore'
    assert a[0, 4] == 1.0  # empty neighbour set (<eos>)
    assert a[0, 2] == 1.0  # {0, 5, 6, 7} & {9, 8} is empty: not replaceable, no contradiction
    assert a[1, 3] == 1.0  # London {0, 5, 6, 1} & 'Ġtherefore' {9, 7}: nothing shared
    assert np.all(np.diag(a) == 1)
    no_prefix = ktc_adjacency([[2, 3, 0, 1, 4]], stats, nu=4, prefix_entail=False)[0]
    assert no_prefix[2, 3] == pytest.approx(1 - 1 / 2)  # {9, 8} & {9, 7} = {9}, min size 2
    nu1 = ktc_adjacency([[2, 3]], stats, nu=1)[0]
    assert nu1[0, 1] == 0.0  # top-1 neighbours are both id 0


def test_adjacency_matches_per_pair_on_real_statistics():
    stats = default_neighbours("sample")
    arrays = token_arrays(much_dataset.load("sample", split="test").select(range(20)))
    ids = arrays.candidate_ids[:150]
    for nu in (1, 3, 4, 5, 8):
        for prefix in (True, False):
            np.testing.assert_array_equal(ktc_adjacency(ids, stats, nu=nu, prefix_entail=prefix),
                                          per_pair_adjacency(ids, stats, nu, prefix))


@pytest.mark.parametrize("nu", [2, 4, 6, 8, 9, 12])
def test_adjacency_matches_per_pair_on_random_statistics(nu):
    # Small id range and uneven set sizes: many shared neighbours and padded slots, on both the packed-flag path
    # (nu <= 8) and the slot-by-slot path (nu > 8).
    rng = np.random.default_rng(nu)
    neighbour_lists = {token: rng.choice(30, size=rng.integers(0, nu + 1), replace=False).tolist()
                       for token in range(40)}
    stats = _hand_stats([f"w{token}" for token in range(40)], neighbour_lists, keep=nu)
    ids = np.stack([rng.choice(40, size=10, replace=False) for _ in range(60)])
    np.testing.assert_array_equal(ktc_adjacency(ids, stats, nu=nu, prefix_entail=False),
                                  per_pair_adjacency(ids, stats, nu, False))


def test_ktc_on_the_sample_matches_straightforward():
    data = much_dataset.load("sample", split="test").select(range(8))
    stats = default_neighbours(data)
    assert stats is not None and "Mu-SHROOM" in stats.corpus
    arrays = token_arrays(data)
    for config in (KTC_DEFAULT, KTCConfig(normalization_method="comb", nu=3, alpha=0.25),
                   KTCConfig(kernel_method="clip", normalization_method="none", nu=5)):
        got = np.concatenate(ktc(data, config, neighbours=stats))
        adjacency = per_pair_adjacency(arrays.candidate_ids[:, : config.delta], stats, config.nu, True)
        want = straightforward(arrays.probabilities[:, : config.delta], adjacency, tau=config.tau,
                               kernel=config.kernel_method, normalization=config.normalization_method,
                               alpha=config.alpha)
        np.testing.assert_allclose(got, want, atol=1e-9)


def test_ktc_device_path_gives_the_numpy_scores_on_the_sample():
    pytest.importorskip("torch")
    data = much_dataset.load("sample", split="test").select(range(8))
    stats = default_neighbours(data)
    want = np.concatenate(ktc(data, neighbours=stats))
    np.testing.assert_allclose(np.concatenate(ktc(data, neighbours=stats, device="cpu")), want, atol=1e-10)


def test_compute_signals_uses_the_sample_statistics_by_default():
    data = much_dataset.load("sample", split="test").select(range(5))
    runs = compute_signals(data, ["ktc"], progress=False)
    run = runs["ktc_RYxmoyp1awYParfCjjxgnQ"]
    want = ktc(data, neighbours=default_neighbours("sample"))
    for gid, values in zip(data["generation_id"], want, strict=True):
        np.testing.assert_array_equal(run.values[gid], values)
    rows = [dict(r, generation_config="other") for r in data]
    assert default_neighbours(rows) is None
    with pytest.raises(ValueError, match="token-neighbour statistics"):
        compute_signals(rows, ["ktc"], progress=False)


def test_token_position_is_checked_unless_reference():
    data = much_dataset.load("sample", split="test").select(range(2))
    stats = default_neighbours("sample")
    right = KTCConfig(nu=4, tau=0.3, token_position=1)
    with pytest.raises(ValueError, match="token_position=1"):
        ktc(data, right, neighbours=stats)
    # The reference ignores token_position: the same scores as position 0.
    for a, b in zip(ktc(data, right, neighbours=stats, reference=True), ktc(data, neighbours=stats), strict=True):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="language_specific"):
        ktc(data, KTCConfig(language_specific=True), neighbours=stats)


def test_wrong_tokenizer_names_the_sample():
    data = much_dataset.load("sample", split="test").select(range(2))
    k, c = count_pairs(np.arange(10), np.array([10]), 10)
    small = stats_from_counts(k, c, 10, keep=8, vocabulary=tuple("abcdefghij"))
    with pytest.raises(ValueError, match=r"generation_id='.*', token 0: candidate ids .* wrong tokenizer"):
        ktc(data, neighbours=small)
