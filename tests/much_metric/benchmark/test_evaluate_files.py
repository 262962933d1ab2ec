"""``much evaluate`` is ``evaluate_files`` printed: the library call returns an EvaluationReport (table, typed
ranking, calibration, notes) whose JSON is the command's, and the command module holds no evaluation logic."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import numpy as np
import pytest

import much_dataset
from much_metric import Aggregation
from much_metric.baselines import max_likelihood, token_arrays, token_entropy
from much_metric.benchmark import DataOptions, EvaluationReport, ReportOptions, evaluate_files
from much_metric.report import EvaluationOptions, RankedMethod, Ranking
from much_metric.scoring import Bootstrap
from much_metric.signals import write_signals

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def scores(tmp_path_factory):
    arrays = token_arrays(much_dataset.load("sample", split="test"))
    folder = tmp_path_factory.mktemp("signals")
    for name, values in (("max_likelihood", max_likelihood(arrays)), ("token_entropy_24", token_entropy(arrays))):
        write_signals(folder / f"{name}.parquet",
                      {name: dict(zip(arrays.generation_ids, values, strict=True))})
    return folder


def test_evaluate_files_is_what_much_evaluate_prints_and_writes(scores, tmp_path, capsys):
    from much_metric.cli import main
    from much_metric.cli._text import jsonable

    evaluation = EvaluationOptions(aggregation=("product", "max"), bootstrap=Bootstrap(n_resamples=40),
                                   random_state=0)
    result = evaluate_files("sample", scores, evaluation=evaluation, data=DataOptions(split="test"),
                            report=ReportOptions(rank="roc_auc", calibrate_on=0.5))
    assert isinstance(result, EvaluationReport) and isinstance(result.ranking, Ranking)
    assert {row.signal_name for row in result.table.results} == {"max_likelihood", "token_entropy_24"}
    assert all(isinstance(row, RankedMethod) for row in result.ranking.rows)
    assert [row.rank for row in result.ranking.rows] == sorted(row.rank for row in result.ranking.rows)
    assert len(result.calibration) == 4 and result.notes == ()
    out = tmp_path / "table.json"
    assert main(["evaluate", "--source", "sample", "--split", "test", "--scores", str(scores), "--aggregator",
                 "product", "--aggregator", "max", "--bootstrap", "40", "--rank", "roc_auc", "--calibrate-on", "0.5",
                 "--json", str(out)]) == 0
    assert json.loads(out.read_text()) == json.loads(json.dumps(jsonable(result.to_dict())))
    assert "leaderboard by roc_auc" in capsys.readouterr().out


def test_rank_methods_returns_a_typed_ranking_that_still_reads_like_the_dict(scores):
    from much_metric.report import evaluate_signals, rank_methods
    from much_metric.signals import read_signals

    table = evaluate_signals(much_dataset.load("sample", split="test"), read_signals(scores),
                             evaluation=EvaluationOptions(bootstrap=None))
    ranking = rank_methods(table, "pr_auc", bootstrap=Bootstrap(n_resamples=40))
    assert ranking.metric == "pr_auc" and ranking.n_resamples == 40 and ranking.p_values.shape == (2, 2)
    assert ranking.rows[0].rank == 1 and ranking.rows[0].interval[0] <= ranking.rows[0].value
    payload = ranking.to_dict()
    assert payload["rows"][0]["method"] == ranking.rows[0].method and isinstance(payload["p_values"], list)
    with pytest.warns(FutureWarning, match=r"read its attribute \.rows"):
        assert ranking["rows"][0]["value"] == ranking.rows[0].value


def test_options_are_checked_before_anything_is_read(tmp_path):
    with pytest.raises(ValueError, match="unknown ReportOptions: rank metric 'accuracy'"):
        ReportOptions(rank="accuracy")
    with pytest.raises(ValueError, match=r"calibrate_on must be a fraction in \(0, 1\)"):
        ReportOptions(calibrate_on=1.5)
    with pytest.raises(FileNotFoundError, match="no Mu-SHROOM JSONL file"):
        evaluate_files("sample", tmp_path / "nothing-read", report=ReportOptions(spans=True, mushroom=tmp_path))


def test_the_command_only_parses_calls_and_prints():
    """much_metric/cli/evaluate.py calls evaluate_files and none of the evaluation's own steps."""
    tree = ast.parse((REPO / "much_metric" / "cli" / "evaluate.py").read_text(encoding="utf-8"))
    called = {node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
              for node in ast.walk(tree) if isinstance(node, ast.Call)}
    assert "evaluate_files" in called
    assert not called & {"evaluate_signals", "rank_methods", "calibrate_table", "evaluate_spans", "read_signals",
                         "training_exclusions", "load", "check_signal_files", "generation_time"}


def test_one_aggregation_option_everywhere():
    """Every public options object, estimator and function takes the claim aggregation as ``aggregation=`` (an
    Aggregation or an aggregator name); no public signature spells it as flat ``aggregator=`` /
    ``stopword_handling=`` any more (results that record which aggregator was used are not options)."""
    import importlib
    import inspect
    import warnings

    records = {"Aggregation", "ScoreResult", "BenchmarkResult", "CalibrationResult", "Calibration", "BenchmarkRow",
               "DegradationResult"}
    flat = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for package in ("much_metric", "much_metric.scoring", "much_metric.signals", "much_metric.report",
                        "much_metric.baselines", "much_metric.learned", "much_metric.benchmark", "much_metric.monitor"):
            module = importlib.import_module(package)
            for name in module.__all__:
                value = getattr(module, name)
                if name in records or not callable(value):
                    continue
                members = [value, *(getattr(value, a) for a in dir(value) if not a.startswith("_")
                                    and callable(getattr(value, a, None)))] if inspect.isclass(value) else [value]
                for member in members:
                    try:
                        parameters = inspect.signature(member).parameters
                    except (TypeError, ValueError):
                        continue
                    flat += [f"{package}.{name}: {p}" for p in parameters
                             if p in ("aggregator", "aggregators", "stopword_handling")]
    assert flat == []
    mean = Aggregation(aggregator="mean", stopword_handling="exclude")
    assert EvaluationOptions(aggregation=mean).aggregation == (mean,)
    from much_metric.learned import LinearDetector

    assert LinearDetector(aggregation=mean).aggregation is mean
    np.testing.assert_equal(EvaluationOptions(aggregation="max").aggregators, ("max",))
