"""compute_signals: names, values equal to the direct functions, resumable output without duplicates, timings;
runtime helpers: generation time sources, table 3 formatting, segmentation timing."""

from __future__ import annotations

import json
import math

import datasets
import numpy as np
import pytest

from much_dataset import schema, synthetic
from much_metric.baselines import (
    ResourceOptions,
    SignalOptions,
    ccp,
    compute_signals,
    max_likelihood,
    resolve,
    sar,
    token_entropy,
)
from much_metric.baselines.runner import TIMINGS_FILE
from much_metric.baselines.runtime import (
    DEFAULT_TOKENS_PER_SECOND,
    PAPER_GENERATION_SECONDS,
    format_runtime,
    generation_time,
    time_segmentation,
)
from much_metric.signals._files import read_signals
from tests.much_metric._baselines_helpers import HashNli, fake_decode

#: NLI signals computed and written 4 samples at a time
BLOCK4 = SignalOptions(block_size=4)


@pytest.fixture(scope="module")
def split():
    return datasets.Dataset.from_list(synthetic.make_rows(40, seed=11, mean_tokens=10), features=schema.features())


def test_signal_names_resolve_through_the_registry():
    assert resolve("token_entropy_24").params == {"delta": 24}
    spec = resolve("ccp_24_8_M")
    assert (spec.baseline.name, spec.params, spec.display) == (
        "ccp_{delta}_{sigma}{suffix}", {"delta": 24, "sigma": 8, "suffix": "_M"}, "CCP-24-8_M")
    nli = type("Nli", (), {"name": "microsoft/deberta-base-mnli"})()
    assert resolve("sar_5").stored_name({"nli": nli}) == "sar_5_M"
    with pytest.raises(ValueError, match="gives signal name"):
        resolve("sar_5_S").stored_name({"nli": nli})
    assert resolve("max_likelihood").display == "Max Likelihood"
    for bad in ("token_entropy", "ccp_10", "entropy_24", "token_entropy_30", "token_entropy_1"):
        with pytest.raises(ValueError):
            resolve(bad)


def test_values_equal_the_direct_functions(split):
    runs = compute_signals(split, ["max_likelihood", "token_entropy_5", "sar_2"],
                           resources=ResourceOptions(tokenizer=fake_decode, nli=HashNli()), progress=False)
    assert list(runs) == ["max_likelihood", "token_entropy_5", "sar_2"]
    ids = split[schema.GENERATION_ID]
    direct = {"max_likelihood": max_likelihood(split), "token_entropy_5": token_entropy(split, delta=5),
              "sar_2": sar(split, nli=HashNli(), tokenizer=fake_decode, sigma=2)}
    for name, values in direct.items():
        run = runs[name]
        assert run.n_computed == len(ids) and run.seconds >= 0
        for gid, expected in zip(ids, values, strict=True):
            np.testing.assert_array_equal(run.values[gid], expected)


def test_resumable_no_duplicates_and_timings(split, tmp_path):
    names = ["token_likelihood", "ccp_5_1"]
    first = compute_signals(split.select(range(15)), names, resources=ResourceOptions(tokenizer=fake_decode,
                            nli=HashNli()), out=tmp_path, options=BLOCK4, progress=False)
    assert all(run.n_computed == 15 for run in first.values())
    timings = json.loads((tmp_path / TIMINGS_FILE).read_text())
    assert timings["ccp_5_1"]["n_samples"] == 15 and timings["ccp_5_1"]["reference_window"] is False
    nli = HashNli()
    second = compute_signals(split, names, resources=ResourceOptions(tokenizer=fake_decode, nli=nli), out=tmp_path,
                             options=BLOCK4, progress=False)
    assert all(run.n_computed == 25 for run in second.values())
    # Only the 25 new samples went to the NLI model.
    expected = HashNli()
    ccp(split.select(range(15, 40)), nli=expected, tokenizer=fake_decode, delta=5, sigma=1)
    assert len(nli.calls) == len(expected.calls) > 0
    stored = read_signals(tmp_path)
    for name in names:
        assert set(stored[name]) == set(split[schema.GENERATION_ID])  # every sample once
    lines = (tmp_path / "token_likelihood.parquet").stat().st_size
    third = compute_signals(split, names, resources=ResourceOptions(tokenizer=fake_decode, nli=HashNli()),
                            out=tmp_path, progress=False)
    assert all(run.n_computed == 0 for run in third.values())
    assert (tmp_path / "token_likelihood.parquet").stat().st_size == lines
    timings = json.loads((tmp_path / TIMINGS_FILE).read_text())
    assert timings["ccp_5_1"]["n_samples"] == 40
    assert third["ccp_5_1"].seconds == pytest.approx(timings["ccp_5_1"]["seconds"])
    with pytest.raises(ValueError, match="reference_window=False; resuming it with reference_window=True"):
        compute_signals(split, names, resources=ResourceOptions(tokenizer=fake_decode, nli=HashNli()), out=tmp_path,
                        options=SignalOptions(reference_window=True), progress=False)
    # A fresh in-memory run and the resumed one evaluate the same (float32-rounded) numbers.
    fresh = compute_signals(split, names, resources=ResourceOptions(tokenizer=fake_decode, nli=HashNli()),
                            out=tmp_path / "fresh", progress=False)
    for name in names:
        for gid in split[schema.GENERATION_ID]:
            np.testing.assert_array_equal(fresh[name].values[gid], third[name].values[gid])


def test_jsonl_output_keeps_float64(split, tmp_path):
    runs = compute_signals(split, ["token_entropy_10"], out=tmp_path, options=SignalOptions(file_format="jsonl"),
                           progress=False)
    assert (tmp_path / "token_entropy_10.jsonl").exists()
    stored = read_signals(tmp_path / "token_entropy_10.jsonl")["token_entropy_10"]
    for gid, values in zip(split[schema.GENERATION_ID], token_entropy(split, delta=10), strict=True):
        np.testing.assert_array_equal(stored[gid], values)
        np.testing.assert_array_equal(runs["token_entropy_10"].values[gid], values)
    with pytest.raises(ValueError, match="file_format"):
        SignalOptions(file_format="csv")
    with pytest.raises(ValueError, match="block_size"):
        SignalOptions(block_size=0)


def test_suffix_mismatch_and_missing_tokenizer(split):
    class Named(HashNli):
        name = "microsoft/deberta-base-mnli"

    runs = compute_signals(split, ["sar_1_M"], resources=ResourceOptions(tokenizer=fake_decode, nli=Named()),
                           progress=False)
    assert list(runs) == ["sar_1_M"]
    with pytest.raises(ValueError, match="gives signal name 'sar_1_M'"):
        compute_signals(split, ["sar_1_S"], resources=ResourceOptions(tokenizer=fake_decode, nli=Named()),
                        progress=False)
    with pytest.raises(ValueError, match="tokenizer"):
        compute_signals(split, ["ccp_10_8"], resources=ResourceOptions(nli=HashNli()), progress=False)


def test_generation_time_sources(tmp_path):
    given = generation_time(120, data_source="sample", n_samples=10, n_tokens=100)
    assert given.seconds == 120 and given.source == "given"
    assert generation_time("60.5", data_source="sample", n_samples=1, n_tokens=1).seconds == 60.5
    default = generation_time(None, data_source="sample", n_samples=10, n_tokens=1100)
    assert default.seconds == pytest.approx(1100 / DEFAULT_TOKENS_PER_SECOND) and "estimate" in default.source
    hub = generation_time(None, data_source=schema.HUB_REPO_ID, n_samples=4873, n_tokens=1)
    assert hub.seconds == pytest.approx(PAPER_GENERATION_SECONDS)
    record = {"model": "smollm2", "device": "cpu", "seconds_per_token": 0.1, "seconds_per_question": 3.0,
              "extrapolate": "tokens"}
    path = tmp_path / "gen.json"
    path.write_text(json.dumps(record))
    assert generation_time(str(path), data_source="sample", n_samples=10, n_tokens=500).seconds == pytest.approx(50)
    path.write_text(json.dumps({**record, "extrapolate": "questions"}))
    assert generation_time(path, data_source="sample", n_samples=10, n_tokens=500).seconds == pytest.approx(30)
    path.write_text(json.dumps({**record, "seconds_per_token": -1}))
    with pytest.raises(ValueError, match="seconds_per_token"):
        generation_time(path, data_source="sample", n_samples=1, n_tokens=1)
    with pytest.raises(ValueError, match="neither a number"):
        generation_time("nope.json", data_source="sample", n_samples=1, n_tokens=1)
    with pytest.raises(ValueError, match="positive"):
        generation_time(0, data_source="sample", n_samples=1, n_tokens=1)


def test_format_runtime_like_table_3():
    assert format_runtime(3410, 2758) == "3,410s (124%)"
    assert format_runtime(613, 2758) == "613s (22.2%)"
    assert format_runtime(6, 2758) == "6.0s (0.218%)"
    assert format_runtime(0.0001, 2758) == "<0.001s (<0.001%)"
    assert format_runtime(math.nan, 2758) == "n/a"


def test_time_segmentation_with_a_stand_in_segmenter(split, monkeypatch):
    # The real segmenter is another module's; here we check the timing loop and the agreement count.
    calls = []

    def segment_many(generations, tokenizer, token_ids=None, compat="0.3.0"):
        calls.extend((generation, tuple(ids), compat) for generation, ids in zip(generations, token_ids, strict=True))
        return [[[i] for i in range(len(ids))] for ids in token_ids]  # one claim per token

    import much_metric.segmentation

    monkeypatch.setattr(much_metric.segmentation, "segment_many", segment_many)
    rows = synthetic.make_rows(3, seed=2)
    rows[1][schema.TOKEN_CHUNKS] = [[i] for i in range(len(rows[1][schema.OUTPUT_TOKENS]))]
    seconds, agree = time_segmentation(rows, tokenizer=None, progress=False, batch_size=2)
    assert seconds >= 0 and agree == 1 and len(calls) == 3
    assert calls[0][1] == tuple(rows[0][schema.OUTPUT_TOKENS]) and calls[0][2] == "0.3.0"
    seconds, agree = time_segmentation(datasets.Dataset.from_list(rows, features=schema.features()), None,
                                       progress=False)
    assert agree == 1


def test_time_segmentation_names_a_sample_that_cannot_be_segmented():
    from much_metric.segmentation import SegmenterInputError
    from tests import assets

    tokenizer = assets.llama3_tokenizer()
    rows = []
    for k, text in enumerate(["Paris is nice.", "Rome is old.", "Oslo is cold."]):
        ids = tokenizer.encode(text, add_special_tokens=False)
        rows.append({schema.GENERATION_ID: f"gen-{k}", schema.OUTPUT: text, schema.OUTPUT_TOKENS: ids,
                     schema.TOKEN_CHUNKS: [list(range(len(ids)))]})
    rows[2][schema.OUTPUT] = "Oslo is cold!!"  # the stored tokens no longer decode to the output
    with pytest.raises(SegmenterInputError, match=r"generation_id='gen-2': fields 'output' / 'output_tokens'"):
        time_segmentation(rows, tokenizer, progress=False, batch_size=2)
