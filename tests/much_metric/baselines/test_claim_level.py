"""Claim-level methods (``Baseline(level="claim")``): one value per claim end to end, never a token score standing for
a claim. Every registered claim-level method, computed on embedded-sample rows (stub NLI and encoder, the rows' real
samples, a local MediaWiki stand-in for the reference), is scored with one number per metric whatever the aggregator,
equal to the metrics of its own claim values; the public helpers a plugin uses; the name rules; the monitor's
refusal; a plugin-style method without resources through the runner's file and the input-view table."""

from __future__ import annotations

import numpy as np
import pytest

from much_metric.baselines import Baseline, TokenArrays, available, register, resolve, unregister
from much_metric.baselines.claims import claim_signal, claim_tokens, split_claims
from much_metric.scoring import AGGREGATORS
from tests.much_metric._baselines_helpers import HashNli
from tests.much_metric.baselines._sampling import HashEncoder, fetch_reference, sample_split, samples_dataset


def _claim_level_defaults() -> list[str]:
    return [name for baseline in available().values() if baseline.level == "claim" for name in baseline.defaults]


@pytest.fixture(scope="module")
def claim_runs(tmp_path_factory):
    from much_metric.baselines import ResourceOptions, compute_signals
    from much_metric.models import load_tokenizer

    split = sample_split()
    reference = tmp_path_factory.mktemp("reference")
    fetch_reference(reference, list(split), context=True)
    resources = ResourceOptions(tokenizer=load_tokenizer("smollm2"), nli=HashNli(), encoder=HashEncoder(),
                                samples=samples_dataset(), reference=reference)
    out = tmp_path_factory.mktemp("signals")
    runs = compute_signals(split, _claim_level_defaults(), resources=resources, out=out, progress=False)
    return split, runs, out


def test_the_built_in_sampling_reference_and_isotropy_methods_are_claim_level():
    names = set(_claim_level_defaults())
    for expected in ("sample_rouge1", "sample_nli_ent", "sample_luq", "eigenscore", "semantic_isotropy",
                     "claim_isotropy", "reference_article_rouge1", "reference_chunks_cosine"):
        assert expected in names
    assert resolve("token_likelihood").baseline.level == "token"


def test_every_claim_level_method_writes_one_value_per_claim(claim_runs):
    from much_metric.signals import read_signals

    split, runs, out = claim_runs
    assert sorted(runs) == sorted(f"{name}@claim" for name in _claim_level_defaults())
    chunks = {row["generation_id"]: len(row["token_chunks"]) for row in split}
    for name, run in runs.items():
        stored = read_signals(out / f"{name}.parquet")[name]  # the file holds the claim values, bit for bit
        assert set(stored) == set(chunks) == set(run.values)
        for gid, values in stored.items():
            assert len(values) == chunks[gid], name
            np.testing.assert_array_equal(values, run.values[gid])


def test_every_claim_level_method_has_one_number_per_metric_under_every_aggregator(claim_runs):
    from much_metric.report import EvaluationOptions, evaluate_signals
    from much_metric.scoring import Aggregation, claim_layout, score_claims

    split, runs, _ = claim_runs
    signals = {name: run.values for name, run in runs.items()}
    layout = claim_layout(split["token_chunks"], [len(t) for t in split["output_tokens"]], labels=split["labels"],
                          stopword_mask=split["stopword_mask"], generation_ids=split["generation_id"])
    for aggregator in AGGREGATORS:
        for stopword_handling in ("null", "exclude"):
            aggregation = Aggregation(aggregator=aggregator, stopword_handling=stopword_handling)
            table = evaluate_signals(split, signals, evaluation=EvaluationOptions(
                aggregation=aggregation, bootstrap=None, floors=False))
            assert sorted(r.signal_name for r in table.results) == sorted(signals)  # once each
            for result in table.results:
                assert result.level == "claim" and result.aggregator is None
                values = [np.asarray(signals[result.signal_name][gid]) for gid in split["generation_id"]]
                direct = score_claims(values, layout, bootstrap=None)
                for metric in ("roc_auc", "pr_auc", "prr"):
                    assert getattr(result.score, metric) == pytest.approx(getattr(direct, metric), abs=1e-12), \
                        (result.signal_name, aggregator, metric)
    every = evaluate_signals(split, signals, evaluation=EvaluationOptions(aggregation=list(AGGREGATORS),
                                                                          bootstrap=None, floors=False))
    assert sorted(r.signal_name for r in every.results) == sorted(signals)  # all four asked: still one row each


def _arrays():
    chunks = [[[0, 1, 2], [3, 4], [5]], [[0, 1], [2]]]
    mask = np.array([True, False, False, True, True, False, False, True, True])
    n = len(mask)
    return TokenArrays(["g0", "g1"], np.array([0, 6, 9]), np.zeros(n, dtype=np.int64), np.tile(np.arange(4), (n, 1)),
                       np.tile([0.7, 0.2, 0.05, 0.05], (n, 1)), chunks, mask)


def test_claim_tokens_hands_every_or_the_content_tokens_of_each_claim():
    arrays = _arrays()
    assert [[t.tolist() for t in s] for s in claim_tokens(arrays, "m")] == [[[0, 1, 2], [3, 4], [5]], [[0, 1], [2]]]
    content = claim_tokens(arrays, "m", content_only=True)
    assert [[t.tolist() for t in s] for s in content] == [[[1, 2], [3, 4], [5]], [[0], [2]]]  # all-stopword: all
    bad = TokenArrays(["g0"], np.array([0, 2]), np.zeros(2, np.int64), np.zeros((2, 1), np.int64), np.ones((2, 1)),
                      [[[0, 5]]])
    with pytest.raises(ValueError, match="generation_id='g0': field 'token_chunks' claim 0"):
        claim_tokens(bad, "m")
    with pytest.raises(ValueError, match="m: content_only needs the split's 'stopword_mask'"):
        claim_tokens(bad, "m", content_only=True)


def test_claim_signal_checks_one_finite_value_per_claim_and_names_the_sample():
    arrays = _arrays()
    signal = claim_signal(arrays, [[0.1, 0.2, 0.3], np.array([2.0, -1.0])], "my method")
    assert [s.tolist() for s in signal] == [[0.1, 0.2, 0.3], [2.0, -1.0]]
    np.testing.assert_array_equal(np.concatenate(split_claims(arrays, np.concatenate(signal))), np.concatenate(signal))
    with pytest.raises(ValueError, match="my method, generation_id='g1': 1 claim scores for 2 claims"):
        claim_signal(arrays, [[0.1, 0.2, 0.3], [0.5]], "my method")
    with pytest.raises(ValueError, match="generation_id='g0': claim 1 scores nan"):
        claim_signal(arrays, [[0.1, np.nan, 0.3], [0.5, 0.5]], "my method")
    with pytest.raises(ValueError, match="for 1 samples, the split has 2"):
        claim_signal(arrays, [[0.1, 0.2, 0.3]], "my method")


def test_a_level_is_token_or_claim_and_claim_names_resolve_to_claim_level_methods_only():
    with pytest.raises(ValueError, match="level must be one of"):
        Baseline(name="x", compute=lambda arrays: None, level="sample")
    spec = resolve("sample_rouge1@claim")
    assert spec.baseline.level == "claim" and spec.display == "Samples ROUGE-1"
    assert spec.stored_name({}) == resolve("sample_rouge1").stored_name({}) == "sample_rouge1@claim"
    with pytest.raises(ValueError, match="'token_likelihood' is a token-level method"):
        resolve("token_likelihood@claim")


def _claim_length(arrays):
    """A claim-level method without resources (as a plugin's): 1 - 1/(its number of tokens)."""
    return claim_signal(arrays, [[1.0 - 1.0 / len(c) for c in sample] for sample in claim_tokens(arrays, "x")])


@pytest.fixture()
def claim_length():
    baseline = register(Baseline(name="claim_length_test", compute=_claim_length, level="claim", top_k=0))
    yield baseline
    unregister(baseline.name)


def test_a_plugin_style_claim_level_method_runs_scores_once_and_is_refused_by_the_monitor(claim_length, tmp_path):
    import much_dataset
    from much_metric.baselines import compute_signals
    from much_metric.benchmark import degradation_table
    from much_metric.models import load_tokenizer
    from much_metric.monitor import ClaimMonitor
    from much_metric.report import EvaluationOptions, evaluate_signals
    from much_metric.signals import read_signals

    data = much_dataset.load("sample", split="test").select(range(40))
    runs = compute_signals(data, ["claim_length_test"], out=tmp_path, progress=False)
    assert list(runs) == ["claim_length_test@claim"] and (tmp_path / "claim_length_test@claim.parquet").exists()
    table = evaluate_signals(data, read_signals(tmp_path),
                             evaluation=EvaluationOptions(aggregation=list(AGGREGATORS), bootstrap=None))
    (row,) = table.results
    assert row.aggregator is None and row.signal_name == "claim_length_test@claim"
    for aggregator in AGGREGATORS:  # the input-view table scores it as it is too
        views = degradation_table(data, signals=["claim_length_test"], top_ks=(0, 24),
                                  evaluation=EvaluationOptions(aggregation=aggregator, bootstrap=None))
        (cells,) = views.rows
        assert cells.cells[-1].values["roc_auc"] == pytest.approx(row.score.roc_auc, abs=1e-12), aggregator
    with pytest.raises(ValueError, match="is claim-level"):
        ClaimMonitor(load_tokenizer("smollm2"), "claim_length_test")
