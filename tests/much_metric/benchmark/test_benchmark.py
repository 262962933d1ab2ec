"""``run_benchmark``: the library call behind ``much run``. Same numbers as ``much run --json`` and as scoring the
baselines directly, a frozen result whose ``to_dict()`` is the JSON, skipped methods as data, bad options named
before any loading."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

import much_dataset
import much_metric
from much_dataset import schema
from much_metric.baselines import NliBatching, max_likelihood, token_entropy
from much_metric.baselines.runner import NLI_SIGNALS, PROBABILITY_SIGNALS
from much_metric.benchmark import (
    BenchmarkNote,
    BenchmarkResult,
    DataOptions,
    EvaluationOptions,
    NliOptions,
    OutputOptions,
    ResourceOptions,
    run_benchmark,
)
from much_metric.scoring import Aggregation, Bootstrap

NO_BOOTSTRAP = EvaluationOptions(bootstrap=None)
#: Fields that are wall times: measured again by every run (``cost``: the measured cost record, seconds included).
TIMES = ("uq_seconds", "segmentation_seconds", "total_seconds", "cost")


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # the default NLI model is used only if cached: never downloaded


@pytest.fixture(scope="module")
def sample():
    return much_dataset.load("sample", split="test")


def _without_times(payload: dict) -> dict:
    payload = {k: v for k, v in payload.items() if k not in ("segmentation_seconds",)}
    payload["results"] = [{k: v for k, v in row.items() if k not in TIMES} for row in payload["results"]]
    return payload


def test_same_numbers_as_much_run_json(sample, tmp_path):
    from much_metric.cli import main

    report = tmp_path / "run.json"
    signals = ",".join(PROBABILITY_SIGNALS)
    assert main(["run", "--source", "sample", "--split", "test", "--signals", signals, "--bootstrap", "40",
                 "--random-state", "3", "--no-progress", "--json", str(report)]) == 0
    written = json.loads(report.read_text())
    evaluation = EvaluationOptions(bootstrap=Bootstrap(n_resamples=40, random_state=3), random_state=3)
    result = run_benchmark("sample", data=DataOptions(split="test"), signals=list(PROBABILITY_SIGNALS),
                           evaluation=evaluation)
    assert _without_times(result.to_dict()) == _without_times(written)
    assert [row["signal_name"] for row in written["results"]] == [row.signal_name for row in result.rows]
    # A loaded split gives the same rows as the data source (its source inferred from its generation configs).
    loaded = run_benchmark(sample, signals=list(PROBABILITY_SIGNALS), evaluation=evaluation)
    assert loaded.data == "sample" and loaded.segmentation_note == result.segmentation_note
    assert [row.to_dict() | dict.fromkeys(TIMES) for row in loaded.rows] == \
        [row.to_dict() | dict.fromkeys(TIMES) for row in result.rows]


def test_metrics_equal_scoring_the_baselines_directly(sample):
    part = sample.select(range(0, 606, 3))
    result = run_benchmark(part, signals=["max_likelihood", "token_entropy_24"], evaluation=NO_BOOTSTRAP)
    rows = {row.signal_name: row for row in result.rows}
    for name, values in (("max_likelihood", max_likelihood(part)), ("token_entropy_24", token_entropy(part))):
        np.testing.assert_array_equal(np.concatenate(list(result.signals[name].values.values())),
                                      np.concatenate(values))  # the signals are returned, in dataset order
        expected = much_metric.score(values, part[schema.TOKEN_CHUNKS], part[schema.LABELS],
                                     stopword_mask=part[schema.STOPWORD_MASK])
        assert rows[name].score.roc_auc == pytest.approx(expected.roc_auc, abs=1e-12)
        assert rows[name].score.pr_auc == pytest.approx(expected.pr_auc, abs=1e-12)
        assert rows[name].score.n_claims == expected.n_claims
    assert result.n_samples == len(part) and result.n_tokens == sum(len(t) for t in part[schema.OUTPUT_TOKENS])
    assert set(result.timings) == {"max_likelihood", "token_entropy_24"}
    assert all(seconds >= 0 for seconds in result.timings.values())
    assert result.table.n_dataset_samples == len(part)


def test_result_is_frozen_and_to_dict_round_trips_through_json(sample, tmp_path):
    result = run_benchmark(sample.select(range(60)), signals=["max_likelihood"], evaluation=NO_BOOTSTRAP,
                           output=OutputOptions(out=tmp_path / "signals", file_format="jsonl"))
    assert isinstance(result, BenchmarkResult)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.rows = ()  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.rows[0].method = "mine"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        BenchmarkNote(message="m").message = "x"  # type: ignore[misc]
    payload = result.to_dict()
    assert json.loads(json.dumps(payload, allow_nan=False)) == payload
    assert payload["results"][0]["signal_name"] == "max_likelihood"
    floors = ["[floor: random]", "[floor: constant]", "[floor: length]"]
    assert [floor["method"] for floor in payload["floors"]] == floors
    assert result.out == tmp_path / "signals" and (tmp_path / "signals" / "max_likelihood.jsonl").is_file()
    assert (tmp_path / "signals" / "timings.json").is_file()
    again = run_benchmark(sample.select(range(60)), signals=["max_likelihood"], evaluation=NO_BOOTSTRAP,
                          output=OutputOptions(out=tmp_path / "signals", file_format="jsonl"))
    assert again.rows[0].samples_computed == 0 and again.rows[0].score == result.rows[0].score


def test_skipped_methods_are_data_not_messages(sample):
    part = sample.select(range(80))
    result = run_benchmark(part, evaluation=NO_BOOTSTRAP)  # defaults, offline: no cached NLI model
    assert set(result.skipped) == set(NLI_SIGNALS)
    assert all("not in the local Hugging Face cache" in reason for reason in result.skipped.values())
    (nli_note,) = [note for note in result.notes if note.skipped]
    assert nli_note.skipped == tuple(NLI_SIGNALS) and nli_note.reason in nli_note.message
    assert not set(NLI_SIGNALS) & {row.signal_name for row in result.rows}
    assert result.default_signals and any(row.method == "KTC-4-0.3" for row in result.rows)  # shipped statistics
    assert any(note.reason is None and "KTC neighbour statistics" in note.message for note in result.notes)

    nll = run_benchmark(part, signals=["nll", "max_likelihood"], evaluation=NO_BOOTSTRAP)
    assert list(nll.skipped) == ["nll"] and "outside [0, 1]" in nll.skipped["nll"]
    assert "nll" in nll.signals and [row.signal_name for row in nll.rows] == ["max_likelihood"]
    mean = EvaluationOptions(aggregation="mean", bootstrap=None)
    assert run_benchmark(part, signals=["nll"], evaluation=mean).skipped == {}

    quiet = run_benchmark(part, nli=NliOptions(enabled=False), evaluation=NO_BOOTSTRAP)
    assert quiet.skipped == {}


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        (lambda: EvaluationOptions(aggregation="median"), ValueError,
         "EvaluationOptions: aggregation='median' is not an aggregator name"),
        (lambda: EvaluationOptions(aggregation=Aggregation(score_type="confidence")), ValueError,
         "EvaluationOptions: aggregation must keep drop_last_chunk=True and score_type='uncertainty'"),
        (lambda: EvaluationOptions(bootstrap=Bootstrap(n_resamples=10)), ValueError,
         "n_resamples must be an integer of at least 40"),
        (lambda: EvaluationOptions(bootstrap=1000), TypeError, "bootstrap must be a much_metric.Bootstrap"),
        (lambda: EvaluationOptions(random_state=-1), ValueError, "EvaluationOptions: random_state must be"),
        (lambda: OutputOptions(file_format="csv"), ValueError, "OutputOptions: file_format must be one of"),
        (lambda: DataOptions(selection="some"), ValueError, "DataOptions: selection must be"),
        (lambda: NliOptions(batching=NliBatching(batch_size=0)), ValueError,
         "NliBatching: batch_size must be a positive integer"),
        (lambda: NliOptions(batching=NliBatching(max_batch_tokens=2.5)), ValueError,
         "NliBatching: max_batch_tokens must be a positive integer"),
        (lambda: NliOptions(batching={"batch_size": 8}), TypeError, "NliOptions: batching must be"),
        (lambda: DataOptions(generation_time="soon"), ValueError, "neither a number of seconds nor a file"),
        (lambda: EvaluationOptions(by="country"), ValueError, "EvaluationOptions: by must be one of"),
        (lambda: EvaluationOptions(min_coverage=1.5), ValueError, "EvaluationOptions: min_coverage must be"),
        (lambda: EvaluationOptions(labels="gpt"), ValueError, "EvaluationOptions: labels must be one of"),
        (lambda: EvaluationOptions(aggregation=()), ValueError, "EvaluationOptions: aggregation must be an "),
        (lambda: run_benchmark("sample", evaluation=EvaluationOptions(aggregation=("mean", "max"))), ValueError,
         "evaluation.aggregation must be one aggregation"),
        (lambda: run_benchmark("sample", resources=ResourceOptions(nli="some/model")), ValueError,
         "takes the NLI model from nli=NliOptions"),
        (lambda: run_benchmark("sample", signals=["entropy_24"]), ValueError, "unknown signal 'entropy_24'"),
        (lambda: run_benchmark("sample", evaluation="mean"), TypeError, "evaluation must be a EvaluationOptions"),
    ],
)
def test_bad_options_raise_before_any_loading(monkeypatch, options, error, message):
    from much_metric.benchmark import resources

    monkeypatch.setitem(much_dataset.__dict__, "load", lambda *a, **k: pytest.fail("data loaded first"))
    monkeypatch.setattr(resources, "llm_tokenizers", lambda *a, **k: pytest.fail("tokenizers loaded first"))
    with pytest.raises(error, match=message.replace("(", r"\(").replace("[", r"\[")):
        options()


def test_config_and_split_apply_to_a_source_only(sample):
    with pytest.raises(ValueError, match="config and split apply to a data source"):
        run_benchmark(sample, data=DataOptions(split="test"))


def test_one_options_class_per_concept_shared_by_the_layers():
    import much_metric.baselines
    import much_metric.signals

    # The benchmark re-exports the signals layer's evaluation options and the baselines layer's resources: no copy.
    assert EvaluationOptions is much_metric.report.EvaluationOptions
    assert ResourceOptions is much_metric.baselines.ResourceOptions
    options = EvaluationOptions(aggregation=["max", "mean", "max"], by="lang", claim_signals="judge")
    assert options.aggregators == ("max", "mean") and options.by == ("lang",) and options.claim_signals == ("judge",)
    assert EvaluationOptions().aggregators == ("product",) and hash(options)  # frozen, hashable


def test_rows_hold_score_results_and_write_the_same_json(sample):
    from much_metric import ScoreResult
    from much_metric.report import evaluate_signals

    part = sample.select(range(60))
    result = run_benchmark(part, signals=["max_likelihood"], evaluation=NO_BOOTSTRAP)
    row, floor = result.rows[0], result.floors[0]
    assert isinstance(row.score, ScoreResult) and isinstance(floor.score, ScoreResult)
    assert (row.score.aggregator, row.score.stopword_handling, row.score.level) == ("product", "null", "token")
    assert floor.score.level == "claim" and row.coverage == floor.coverage == 1.0
    # to_dict is the score's own to_dict, with the row's names, times and coverage: no placeholder string anywhere
    direct = evaluate_signals(part, {"max_likelihood": result.signals["max_likelihood"].values},
                              evaluation=NO_BOOTSTRAP).results[0]
    written = row.to_dict()
    assert list(written)[:7] == ["signal_name", "method", "uq_seconds", "segmentation_seconds", "total_seconds",
                                 "samples_computed", "cost"]
    assert {k: v for k, v in written.items() if k not in ("method", *TIMES, "samples_computed")} == \
        {**direct.to_dict()}
    assert list(written)[-3:] == ["aggregator", "stopword_handling", "coverage"]
    floor_json = floor.to_dict()
    assert floor_json["aggregator"] is None and "level" not in floor_json and "uq_seconds" not in floor_json
    assert "—" not in json.dumps(result.to_dict())


def test_exported_lazily_from_much_metric():
    assert much_metric.run_benchmark is run_benchmark
    assert much_metric.BenchmarkResult is BenchmarkResult
