"""Renamed public functions of much_metric: the old name still works, with a FutureWarning naming the new one."""

import importlib
import warnings

import pytest


@pytest.mark.parametrize(("module", "old", "new"), [
    ("much_metric.mushroom", "score", "score_spans"),
    ("much_metric.mushroom", "read_jsonl", "read_mushroom_jsonl"),
    ("much_metric.scoring", "leaderboard", "rank_claim_scores"),
])
def test_old_name_warns_and_is_the_new_function(module, old, new):
    namespace = importlib.import_module(module)
    with pytest.warns(FutureWarning, match=rf"{module}\.{old} is deprecated .* use {module}\.{new}"):
        function = getattr(namespace, old)
    assert function is getattr(namespace, new)
    assert old not in namespace.__all__ and new in namespace.__all__
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        getattr(namespace, new)  # the new name is silent


def test_from_import_of_an_old_name_warns_too():
    with pytest.warns(FutureWarning, match="much_metric.mushroom.score is deprecated"):
        from much_metric.mushroom import score  # noqa: F401


def test_an_unknown_name_is_still_an_attribute_error():
    import much_metric.mushroom

    with pytest.raises(AttributeError, match="has no attribute 'scores'"):
        much_metric.mushroom.scores  # noqa: B018
    assert not hasattr(much_metric.scoring, "leaderboards")


def test_the_old_span_scorer_gives_the_new_ones_numbers():
    import much_metric.mushroom as mushroom

    reference = {"id": "tst-en-1", "model_output_text": "Paris is big", "hard_labels": [[0, 5]]}
    prediction = {"id": "tst-en-1", "hard_labels": [[0, 3]]}
    with pytest.warns(FutureWarning):
        old = mushroom.score([reference], [prediction])
    new = mushroom.score_spans([reference], [prediction])
    assert old["iou"] == new["iou"] == pytest.approx(3 / 5)


@pytest.mark.parametrize(("old", "new_module"), [
    ("evaluate_signals", "much_metric.report"), ("EvaluationOptions", "much_metric.report"),
    ("rank_methods", "much_metric.report"), ("write_report", "much_metric.report"),
    ("PAPER_TABLE7", "much_metric.report.published"), ("check_resamples", "much_metric.scoring"),
])
def test_names_moved_out_of_signals_warn_and_are_the_new_objects(old, new_module):
    """The report stage left much_metric.signals (now the file format only); its names still import from there."""
    import much_metric.signals as signals

    with pytest.warns(FutureWarning, match=rf"much_metric.signals.{old} has moved .* use {new_module}.{old}"):
        value = getattr(signals, old)
    assert value is getattr(importlib.import_module(new_module), old)
    assert old not in signals.__all__
