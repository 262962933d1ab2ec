"""Rows whose labels are withheld: the metric refuses them with a message naming what is missing and where they are
scored; ``much run`` computes and writes their signals (the submission) without a metric."""

from __future__ import annotations

import pytest

from much_dataset import schema
from much_dataset.validation import LabelsWithheldError


@pytest.fixture(scope="module")
def unlabelled_folder(tmp_path_factory):
    import much_dataset
    from much_dataset.card import write_parquet_folder

    rows = much_dataset.load("sample", split="test").select(range(0, 600, 20))
    folder = tmp_path_factory.mktemp("withheld")
    write_parquet_folder({"test": rows.remove_columns(list(schema.LABEL_COLUMNS)).with_format("arrow")[:]}, folder)
    return folder


def test_score_without_labels_says_where_such_rows_are_scored():
    from much_metric import score, score_claims

    chunks = [[[0], [1], [2]]]
    for call in (lambda: score([[0.9, 0.1, 0.0]], chunks, None, [[False] * 3]),
                 lambda: score_claims([[0.9, 0.1, 0.0]], chunks, None)):
        with pytest.raises(ValueError, match=r"needs labels .*withheld.*much-leaderboard serve --private-labels"):
            call()
    with pytest.raises(ValueError, match=r"sample #0: no 'labels' \(1 of 1 samples have None\); rows without labels"):
        score([[0.9, 0.1, 0.0]], chunks, [None], [[False] * 3])


def test_evaluate_signals_names_the_missing_label_columns(unlabelled_folder):
    import much_dataset
    from much_metric.baselines import compute_signals
    from much_metric.report import evaluate_signals

    rows = much_dataset.load(str(unlabelled_folder), split="test")
    values = compute_signals(rows, ["max_likelihood"], progress=False)["max_likelihood"].values
    with pytest.raises(LabelsWithheldError, match=r"lack the column\(s\) \['labels', 'human_labels_0', "
                                                  r"'human_labels_1'\]") as error:
        evaluate_signals(rows, {"max_likelihood": values})
    assert error.value.missing == list(schema.LABEL_COLUMNS)


def test_much_run_writes_the_signals_of_unlabelled_rows_and_evaluate_refuses_them(unlabelled_folder, tmp_path,
                                                                                   capsys):
    from much_metric.cli import main
    from much_metric.signals import read_signals

    common = ["run", "--source", str(unlabelled_folder), "--signals", "max_likelihood,token_entropy_24",
              "--no-progress", "--no-nli"]
    assert main(common) == 2
    assert "needs output.out (much run --out DIR)" in capsys.readouterr().err
    out = tmp_path / "signals"
    assert main([*common, "--out", str(out), "--json", str(tmp_path / "run.json")]) == 0
    printed = " ".join(capsys.readouterr().out.split())  # prose lines are wrapped at 120 columns
    assert "labels withheld, so no metric" in printed
    assert f"much-leaderboard archive PUBLIC {out} --out submission.zip" in printed  # one archive with the public
    signals = read_signals(out)
    assert sorted(signals) == ["max_likelihood", "token_entropy_24"] and len(signals["max_likelihood"]) == 30
    import json

    results = json.loads((tmp_path / "run.json").read_text())["results"]
    assert [r["signal_name"] for r in results] == ["max_likelihood", "token_entropy_24"]
    assert "roc_auc" not in results[0] and results[0]["coverage"] == 1.0
    assert main(["evaluate", "--source", str(unlabelled_folder), "--scores", str(out)]) == 2
    assert "the rows have no labels (they lack the column(s)" in capsys.readouterr().err
    assert main([*common, "--selection", "manual", "--out", str(tmp_path / "x")]) == 2
    assert "selection='manual' (it reads the human labels)" in capsys.readouterr().err
