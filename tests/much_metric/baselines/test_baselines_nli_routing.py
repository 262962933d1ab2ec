"""Per-language NLI routing (two tiny random sequence classifiers with different id2label orders, no download), the
shared NLI cache, and the per-sample NLI model recorded in signal files."""

from __future__ import annotations

import json

import numpy as np
import pytest

from much_metric.baselines import NliScorer, ResourceOptions, SignalOptions, compute_signals
from much_metric.baselines.methods.ccp import ccp
from much_metric.baselines.methods.sar import sar
from much_metric.baselines.nli_routing import (
    NliCache,
    NliPairRecorder,
    NliRouter,
    parse_nli_mapping,
    routed_nli_name,
)
from much_metric.signals import read_signals
from much_metric.signals._metadata import read_sample_metadata
from tests.much_metric._baselines_helpers import HashNli, mushroom_rows, one_torch_thread, tiny_nli_parts

EN_LABELS = ((0, "CONTRADICTION"), (1, "NEUTRAL"), (2, "ENTAILMENT"))  # microsoft/deberta-*-mnli order
XNLI_LABELS = ((0, "entailment"), (1, "neutral"), (2, "contradiction"))  # XNLI models' order

#: NLI signals computed and written 4 samples at a time
BLOCK4 = SignalOptions(block_size=4)


@pytest.fixture(autouse=True)
def _one_torch_thread():
    with one_torch_thread():
        yield


def _scorer(labels, name, seed):
    import torch

    model, tokenizer = tiny_nli_parts(labels)
    model = type(model)(model.config).eval()  # a different random model per language group
    torch.manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.normal_(0, 0.5)
    return NliScorer(model, tokenizer, progress=False, name=name)


@pytest.fixture(scope="module")
def models():
    with one_torch_thread():
        return _scorer(EN_LABELS, "tiny/en-mnli", 1), _scorer(XNLI_LABELS, "tiny/xnli", 2)


@pytest.fixture(scope="module")
def split():
    _, tokenizer = tiny_nli_parts()
    en = mushroom_rows(tokenizer, 3, lang="en", max_tokens=8, repeat_first=False)
    fr = mushroom_rows(tokenizer, 3, lang="fr", max_tokens=8, repeat_first=False, seed=1)
    rows = [en[0], fr[0], en[1], fr[1], en[2], fr[2]]  # interleaved: routing must not rely on order
    languages = {r["generation_id"]: r["generation_id"].split("-")[1] for r in rows}
    return rows, languages, tokenizer


def _by_id(rows, values):
    return {row["generation_id"]: v for row, v in zip(rows, values, strict=True)}


def test_mapping_parser(tmp_path):
    assert parse_nli_mapping("en=a/b, fr+es+de=c/d") == {"en": "a/b", "fr": "c/d", "es": "c/d", "de": "c/d"}
    file = tmp_path / "nli.json"
    file.write_text(json.dumps({"en": "a", "*": "m"}))
    assert parse_nli_mapping(str(file)) == {"en": "a", "*": "m"}
    for bad, message in (("en", "no '='"), ("en=a,en=b", "twice"), ("=a", "empty"), ("", "empty")):
        with pytest.raises(ValueError, match=message):
            parse_nli_mapping(bad)


def test_router_equals_each_language_scored_by_its_own_model(models, split):
    rows, languages, tokenizer = split
    en_model, fr_model = models
    router = NliRouter({"en": en_model, "fr": fr_model}, languages)
    en_rows = [r for r in rows if languages[r["generation_id"]] == "en"]
    fr_rows = [r for r in rows if languages[r["generation_id"]] == "fr"]
    for fn, kwargs in ((ccp, {"delta": 5, "sigma": 3}), (sar, {"sigma": 3})):
        routed = _by_id(rows, fn(rows, nli=router, tokenizer=tokenizer, **kwargs))
        alone = {**_by_id(en_rows, fn(en_rows, nli=en_model, tokenizer=tokenizer, **kwargs)),
                 **_by_id(fr_rows, fn(fr_rows, nli=fr_model, tokenizer=tokenizer, **kwargs))}
        for gid in routed:
            np.testing.assert_allclose(routed[gid], alone[gid], rtol=1e-5, atol=1e-6)
        if fn is sar:  # SAR is continuous in P(entailment): the English model on French samples differs
            wrong = _by_id(fr_rows, fn(fr_rows, nli=en_model, tokenizer=tokenizer, **kwargs))
            assert any(not np.allclose(wrong[g], alone[g]) for g in wrong)
    assert router.model_of(fr_rows[0]["generation_id"]) == "tiny/xnli"


def test_router_reorders_columns_from_each_id2label():
    en, xnli, binary = HashNli(dict(EN_LABELS)), HashNli(dict(XNLI_LABELS)), HashNli({0: "entailment",
                                                                                     1: "not_entailment"})
    router = NliRouter({"en": en, "fr": xnli, "*": binary}, {"a": "en", "b": "fr", "c": "de"})
    out = router.predict_proba(["p", "p", "p"], ["h", "h", "h"], generation_ids=["a", "b", "c"])
    raw_en, raw_x, raw_b = en.one("p", "h"), xnli.one("p", "h"), binary.one("p", "h")
    np.testing.assert_allclose(out[0], [raw_en[2], raw_en[1], raw_en[0]])
    np.testing.assert_allclose(out[1], raw_x)
    np.testing.assert_allclose(out[2], [raw_b[0], 0.0, raw_b[1]])
    with pytest.raises(ValueError, match="generation_id='z': no language"):
        router.predict_proba(["p"], ["h"], generation_ids=["z"])
    with pytest.raises(ValueError, match="generation_ids"):
        router.predict_proba(["p"], ["h"])
    with pytest.raises(ValueError, match="no NLI model for language 'de'"):
        NliRouter({"en": en}, {"c": "de"}).model_of("c")
    with pytest.raises(ValueError, match="language 'fr'.*cannot infer"):
        bad = HashNli()
        bad.id2label = {0: "LABEL_0", 1: "LABEL_1"}
        NliRouter({"fr": bad}, {})


def test_cache_scores_each_pair_once_and_ccp10_is_free_after_ccp24():
    from much_dataset import synthetic
    from tests.much_metric._baselines_helpers import fake_decode

    rows = synthetic.make_rows(6, seed=3)
    stub = HashNli()
    cached = NliCache(stub)
    direct = {d: ccp(rows, nli=HashNli(), tokenizer=fake_decode, delta=d, sigma=2) for d in (24, 10)}
    for delta in (24, 10):
        values = ccp(rows, nli=cached, tokenizer=fake_decode, delta=delta, sigma=2)
        for a, b in zip(values, direct[delta], strict=True):
            np.testing.assert_array_equal(a, b)
    assert len(stub.calls) == len(set(stub.calls)) == cached.misses  # nothing scored twice
    after_24 = cached.misses
    assert cached.hits > 0 and after_24 == len(stub.calls)
    ccp(rows, nli=cached, tokenizer=fake_decode, delta=10, sigma=2)
    assert len(stub.calls) == after_24  # ccp_10 again: no new NLI call
    # Routed + cached: the key includes the model, so one text pair in two languages is scored by both.
    router = NliCache(NliRouter({"en": HashNli(dict(EN_LABELS)), "fr": HashNli(dict(XNLI_LABELS))},
                                {"a": "en", "b": "fr"}))
    out = router.predict_proba(["p", "p", "p"], ["h", "h", "h"], generation_ids=["a", "b", "a"])
    assert router.misses == 2 and router.hits == 1 and not np.allclose(out[0], out[1])
    np.testing.assert_array_equal(out[0], out[2])
    small = NliCache(HashNli(), max_pairs=2)
    small.predict_proba(["1", "2", "3"], ["x", "x", "x"])
    assert len(small._store) == 2


@pytest.mark.parametrize("file_format", ["parquet", "jsonl"])
def test_runner_records_the_model_of_each_sample(models, split, tmp_path, file_format):
    rows, languages, tokenizer = split
    router = NliRouter({"en": models[0], "fr": models[1]}, languages)
    runs = compute_signals(rows, ["ccp_5_3", "sar_3"], resources=ResourceOptions(tokenizer=tokenizer, nli=router),
                           out=tmp_path, options=SignalOptions(file_format=file_format, block_size=4), progress=False)
    alias = routed_nli_name({"en": "tiny/en-mnli", "fr": "tiny/xnli"})
    assert alias.startswith("multi-") and len(alias) == len("multi-") + 6
    assert set(runs) == {f"ccp_5_3_{alias}", f"sar_3_{alias}"}
    for name in runs:
        path = tmp_path / f"{name}.{file_format}"
        metadata = read_sample_metadata(path)
        assert metadata == {gid: {"nli_model": "tiny/en-mnli" if lang == "en" else "tiny/xnli"}
                            for gid, lang in languages.items()}
        stored = read_signals(path)[name]  # still a plain MUCH-signals file
        assert set(stored) == set(languages)


def test_routed_nli_name_is_the_model_or_a_digest_of_the_mapping():
    assert routed_nli_name({"en": "m", "fr": "m"}) == "m"
    a = routed_nli_name({"en": "x/en", "fr": "x/fr"})
    assert a == routed_nli_name({"fr": "x/fr", "en": "x/en"})  # order of the mapping does not matter
    assert a != routed_nli_name({"en": "x/en", "fr": "x/fr", "de": "x/fr"})
    assert NliRouter({"en": HashNli(), "fr": HashNli()}, {}).name == "HashNli"  # one model (by name)


def test_pair_recorder_scores_the_union_of_configurations_in_one_call():
    from much_dataset import synthetic
    from tests.much_metric._baselines_helpers import fake_decode

    rows = synthetic.make_rows(5, seed=4)
    stub = HashNli()
    direct = {(fn, tuple(kw.items())): fn(rows, nli=stub, tokenizer=fake_decode, **kw)
              for fn, kw in ((ccp, {"delta": 24, "sigma": 2}), (ccp, {"delta": 10, "sigma": 3}), (sar, {"sigma": 2}))}
    stub.calls.clear()
    recorder = NliPairRecorder(stub)
    for fn, kw in direct:
        fn(rows, nli=recorder, tokenizer=fake_decode, **dict(kw))
    assert stub.calls == []  # the dry run asks the model nothing
    cache = recorder.prefetch()
    assert len(stub.calls) == len(set(stub.calls)) == len(recorder.pairs()) == cache.misses  # one call, no repeat
    for (fn, kw), expected in direct.items():
        for a, b in zip(fn(rows, nli=cache, tokenizer=fake_decode, **dict(kw)), expected, strict=True):
            np.testing.assert_array_equal(a, b)
    assert len(stub.calls) == cache.misses  # nothing more scored


def test_runner_shares_one_cache_between_nli_configurations():
    from much_dataset import synthetic
    from tests.much_metric._baselines_helpers import fake_decode

    rows = synthetic.make_rows(6, seed=5)
    stub = HashNli()
    asked = ["ccp_10_2", "sar_3", "max_likelihood", "ccp_24_3", "ccp_24_2", "sar_2"]
    runs = compute_signals(rows, asked, resources=ResourceOptions(tokenizer=fake_decode, nli=stub), options=BLOCK4,
                           progress=False)
    assert list(runs) == asked  # the order asked, though computed grouped by sigma
    assert len(stub.calls) == len(set(stub.calls))  # no pair scored twice across the configurations
    ids = [r["generation_id"] for r in rows]
    for name, fn, kw in (("ccp_10_2", ccp, {"delta": 10, "sigma": 2}), ("ccp_24_3", ccp, {"delta": 24, "sigma": 3}),
                         ("sar_2", sar, {"sigma": 2})):
        expected = fn(rows, nli=HashNli(), tokenizer=fake_decode, **kw)
        for gid, values in zip(ids, expected, strict=True):
            np.testing.assert_array_equal(runs[name].values[gid], values)
    # ccp_10_2's pairs are ccp_24_2's: the grid scored exactly the union of the configurations' pairs.
    union = set()
    for name in asked:
        alone = HashNli()
        compute_signals(rows, [name], resources=ResourceOptions(tokenizer=fake_decode, nli=alone), options=BLOCK4,
                        progress=False)
        union |= set(alone.calls)
    assert set(stub.calls) == union
