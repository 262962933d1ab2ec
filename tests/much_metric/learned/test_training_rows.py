"""Issue #35: a detector is never scored on the rows it was trained or validated on without the output saying so.

The issue's scenario: `much train --source sample --protocol leave-one-language-out --fold de`, then `much run --source
sample --signals learned:DIR` scored all 606 rows, the training and validation rows among them, and said nothing.
"""

from __future__ import annotations

import json
import re
import warnings

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("safetensors")

import much_dataset  # noqa: E402
from much_metric.baselines import max_likelihood, token_arrays  # noqa: E402
from much_metric.learned import load_detector  # noqa: E402
from much_metric.report import EvaluationOptions, evaluate_signals
from much_metric.scoring import score  # noqa: E402
from much_metric.signals import (
    TrainingRowsWarning,
    read_signal_metadata,
    read_signals,
    signal_metadata_of,
    training_exclusions,
    write_signal_metadata,
    write_signals,
)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """`much train` on the sample, leave-one-language-out, fold de (the issue's command), 2 epochs."""
    from much_metric.cli import main

    folder = tmp_path_factory.mktemp("learned") / "linear-de"
    assert main(["train", "--source", "sample", "--protocol", "leave-one-language-out", "--fold", "de",
                 "--out", str(folder), "--max-epochs", "2", "--no-progress"]) == 0
    return folder


@pytest.fixture(scope="module")
def sample():
    return much_dataset.load("sample", split="test")


def _held_out_roc(sample, folder, held_out_ids):
    rows = sample.select([i for i, g in enumerate(sample["generation_id"]) if g in held_out_ids])
    arrays = token_arrays(rows)
    return score(arrays.split(load_detector(folder).token_scores(arrays)), rows["token_chunks"], rows["labels"],
                 rows["stopword_mask"]).roc_auc, rows


def test_the_folder_records_exactly_the_rows_that_trained_and_validated_it(trained, sample):
    from much_metric.learned import make_folds, row_info

    rows = json.loads((trained / "training_rows.json").read_text())
    fold = make_folds(row_info(sample), "leave-one-language-out", only="de")[0]
    ids = np.asarray(sample["generation_id"], dtype=object)
    assert rows == {"train": sorted(ids[fold.train]), "validation": sorted(ids[fold.validation])}
    assert not set(rows["train"]) & set(ids[fold.test]) and not set(rows["validation"]) & set(ids[fold.test])


def test_much_run_scores_a_learned_signal_on_held_out_rows_and_says_so(trained, sample, tmp_path, capsys):
    from much_metric.cli import main

    training = load_detector(trained).training_generation_ids
    held_out = set(sample["generation_id"]) - set(training)
    assert len(training) + len(held_out) == 606 and len(training) > 300
    out = tmp_path / "signals"
    assert main(["run", "--source", "sample", "--signals", f"learned:{trained},max_likelihood", "--bootstrap", "0",
                 "--no-progress", "--out", str(out), "--json", str(tmp_path / "run.json")]) == 0
    printed = " ".join(capsys.readouterr().out.split())  # prose lines wrap at 120 columns
    assert (f"{len(training)} of 606 rows left out because they trained or validated it; scored on the "
            f"{len(held_out)} held-out rows") in printed
    # The row names exactly the rows it was scored on: the German test rows and the purged rows of other languages.
    german = sum(lang == "de" for g, lang in zip(sample["generation_id"], sample["lang"], strict=True) if g in held_out)
    assert german == 150 and len(held_out) > german
    assert f"Learned linear (linear-de; {german} lang=de test + {len(held_out) - german} purged rows)" in printed
    # Paired: Max Likelihood and the floors are scored on the same held-out rows, and the output says so.
    assert (f"paired: every row is scored on the same {len(held_out)} of the 606 samples with ground truth; "
            f"{len(training)} left out: {len(training)} trained or validated Learned linear") in printed
    # The number printed is the held-out number, computed independently with score() on those rows only.
    result = json.loads((tmp_path / "run.json").read_text())
    learned = next(row for row in result["results"] if row["signal_name"].startswith("learned_"))
    expected, rows = _held_out_roc(sample, trained, held_out)
    assert learned["roc_auc"] == pytest.approx(expected, abs=1e-12)
    baseline = next(row for row in result["results"] if row["signal_name"] == "max_likelihood")
    assert learned["n_claims"] == baseline["n_claims"] == sum(
        len(chunks) - 1 for chunks in rows["token_chunks"])  # same claims (the EOS claim dropped)
    ml = score(max_likelihood(rows), rows["token_chunks"], rows["labels"], rows["stopword_mask"]).roc_auc
    assert baseline["roc_auc"] == pytest.approx(ml, abs=1e-12)
    assert all(floor["n_claims"] == baseline["n_claims"] for floor in result["floors"])
    # The signal file carries the contract's metadata, so `much evaluate --scores` and the leaderboard can tell.
    (path,) = out.glob("learned_linear-de-*.parquet")
    metadata = read_signal_metadata(path)
    assert metadata["training_generation_ids"] == training
    assert {k: metadata["detector"][k] for k in ("kind", "protocol", "fold")} == {
        "kind": "linear", "protocol": "leave-one-language-out", "fold": "lang=de"}
    assert len(read_signals(path)[path.stem]) == 606  # every row computed; only the evaluation leaves some out

    # much evaluate on the same files leaves them out too, and says so.
    assert main(["evaluate", "--source", "sample", "--scores", str(out), "--bootstrap", "0"]) == 0
    printed = " ".join(capsys.readouterr().out.split())  # prose lines wrap at 120 columns
    assert f"{len(training)} of 606 rows left out because they trained or validated it" in printed
    # ... and its row names the detector, the protocol and the rows it was scored on, read from the file's metadata.
    assert f"(linear; {german} lang=de test + {len(held_out) - german} purged rows)" in printed

    # Unpaired on request: every row on all its samples, each labelled with its count, and said not comparable.
    assert main(["run", "--source", "sample", "--signals", f"learned:{trained},max_likelihood", "--bootstrap", "0",
                 "--no-progress", "--no-paired"]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert "Max Likelihood [606 samples]" in printed and f"purged rows) [{len(held_out)} samples]" in printed
    assert "unpaired (--no-paired): each row is scored on the samples it covers" in printed
    assert "not comparable with one another" in printed

    # Asked explicitly: every row, with a warning.
    with pytest.warns(TrainingRowsWarning, match=f"{len(training)} of which trained or validated it"):
        assert main(["run", "--source", "sample", "--signals", f"learned:{trained}", "--bootstrap", "0",
                     "--no-progress", "--include-training-rows"]) == 0
    assert "its numbers are not held-out numbers" in " ".join(capsys.readouterr().out.split())


def test_the_numbers_much_train_prints_are_the_ones_much_run_prints_on_the_same_rows(tmp_path, capsys):
    """Issue #43: `much train` printed 0.692 on the German test rows while `much run` printed 0.666 on every held-out
    row; train now prints both, each with the `much run` command that reproduces it, and the commands do."""
    import shlex

    from much_metric.cli import main

    folder = tmp_path / "runs" / "linear-de"
    assert main(["train", "--source", "sample", "--protocol", "leave-one-language-out", "--fold", "de",
                 "--out", str(folder), "--max-epochs", "2", "--no-progress"]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    found = re.findall(r"(\d+) claims: linear ROC-AUC ([0-9.]+) PR-AUC ([0-9.]+); Max Likelihood ROC-AUC ([0-9.]+) "
                       r"PR-AUC ([0-9.]+)(?:; Δ ROC-AUC vs Max Likelihood [^`]*?)? -- `(much run [^`]+)` prints these",
                       printed)  # the paired Δ (issue #57) sits between the numbers and the command
    assert len(found) == 2, printed
    (test_claims, *_, test_command), (all_claims, *_, all_command) = found
    assert "--config de" in test_command and "--config" not in all_command and int(test_claims) < int(all_claims)
    for claims, roc, pr, ml_roc, ml_pr, command in found:
        out = tmp_path / f"{len(command)}.json"
        assert main([*shlex.split(command)[1:], "--bootstrap", "0", "--no-progress", "--json", str(out)]) == 0
        capsys.readouterr()
        rows = {row["signal_name"].split("-")[0]: row for row in json.loads(out.read_text())["results"]}
        learned, baseline = rows["learned_linear"], rows["max_likelihood"]
        assert learned["n_claims"] == baseline["n_claims"] == int(claims)
        assert [f"{learned['roc_auc']:.3f}", f"{learned['pr_auc']:.3f}", f"{baseline['roc_auc']:.3f}",
                f"{baseline['pr_auc']:.3f}"] == [roc, pr, ml_roc, ml_pr]


def test_run_benchmark_keyword(trained, sample):
    from much_metric.benchmark import EvaluationOptions, run_benchmark

    held_out = run_benchmark(sample, signals=[f"learned:{trained}"], evaluation=EvaluationOptions(bootstrap=None))
    assert any("rows left out because they trained or validated it" in note.message for note in held_out.notes)
    with pytest.warns(TrainingRowsWarning):
        everything = run_benchmark(sample, signals=[f"learned:{trained}"],
                                   evaluation=EvaluationOptions(bootstrap=None, include_training_rows=True))
    name = held_out.rows[0].signal_name
    assert held_out.table.training_excluded[name] == len(load_detector(trained).training_generation_ids)
    assert everything.table.training_excluded[name] == 0
    assert held_out.rows[0].score.n_claims < everything.rows[0].score.n_claims


def test_a_detector_scored_through_another_aggregator_is_warned_about(trained, sample):
    from much_metric.benchmark import EvaluationOptions, run_benchmark

    with pytest.warns(TrainingRowsWarning, match="trained through the product aggregator and is scored with mean"):
        run_benchmark(sample.select(range(40)), signals=[f"learned:{trained}"],
                      evaluation=EvaluationOptions(bootstrap=None, aggregation="mean"))
    with warnings.catch_warnings():
        warnings.simplefilter("error", TrainingRowsWarning)
        run_benchmark(sample.select(range(40)), signals=[f"learned:{trained}"],
                      evaluation=EvaluationOptions(bootstrap=None))


@pytest.mark.parametrize("suffix", [".parquet", ".jsonl"])
def test_signal_metadata_round_trips_and_drives_the_exclusion(tmp_path, sample, suffix):
    """The reader side of the contract, with metadata built here (as the leaderboard's tests do)."""
    rows = sample.select(range(30))
    path = tmp_path / f"mine{suffix}"
    values = {g: np.full(len(t), 0.5) + i * 1e-3 for i, (g, t) in enumerate(zip(rows["generation_id"],
                                                                             rows["output_tokens"], strict=True))}
    write_signals(path, {"mine": values})
    trained_on = sorted(rows["generation_id"][:10])
    write_signal_metadata(path, {"training_generation_ids": trained_on,
                                 "detector": {"kind": "linear", "protocol": "auto-to-manual", "fold": "x"}})
    assert read_signal_metadata(path)["training_generation_ids"] == trained_on
    assert read_signals(path)["mine"].keys() == values.keys()  # the signal file still reads as before
    metadata = signal_metadata_of(tmp_path)
    excluded, messages = training_exclusions(metadata, rows["generation_id"])
    assert excluded == {"mine": frozenset(trained_on)} and "10 of 30 rows left out" in messages[0]
    table = evaluate_signals(rows, read_signals(path),
                             evaluation=EvaluationOptions(bootstrap=None), training_rows=excluded)
    assert table.training_excluded == {"mine": 10} and table.coverage["mine"] == 1.0
    assert set(table.generation_ids[i] for i in table.results[0].claim_rows) == set(rows["generation_id"][10:])
    with pytest.raises(ValueError, match="every sample with ground truth trained or validated it"):
        evaluate_signals(rows, read_signals(path),
                         evaluation=EvaluationOptions(bootstrap=None),
                                                      training_rows={"mine": frozenset(rows["generation_id"])})


def test_training_rows_that_are_no_rows_of_the_training_data_are_refused(trained, tmp_path, capsys):
    """Issue #44: a folder whose training_rows.json names ids that are no sample's (the real training rows would be
    scored as held out). A folder written before config.json recorded the rows' digest, with the counts kept: much
    run, on the data the detector was trained on, refuses it naming the file."""
    import shutil

    from much_metric.cli import main

    folder = tmp_path / "edited"
    shutil.copytree(trained, folder)
    config = json.loads((folder / "config.json").read_text())
    del config["training_data"]["rows_sha256"]
    (folder / "config.json").write_text(json.dumps(config))
    rows = json.loads((folder / "training_rows.json").read_text())
    rows["train"] = sorted(f"nobody-{i:04d}" for i in range(len(rows["train"])))
    (folder / "training_rows.json").write_text(json.dumps(rows))
    code = main(["run", "--source", "sample", "--config", "de", "--signals", f"learned:{folder}", "--bootstrap", "0",
                 "--no-progress"])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 2, err
    assert "training_rows.json" in err and "no row of sample" in err and "'nobody-0000'" in err


def test_much_train_compares_with_the_baseline_it_is_given(tmp_path, capsys):
    """Issue 57: `much train --baseline NAME` prints the paired difference to NAME (not always Max Likelihood), and
    the printed `much run` command reproduces NAME's number with the same reference for its Δ column."""
    import shlex

    from much_metric.baselines import display_name
    from much_metric.cli import main

    folder = tmp_path / "linear-de"
    assert main(["train", "--source", "sample", "--fold", "de", "--out", str(folder), "--max-epochs", "1",
                 "--baseline", "token_entropy_24", "--no-progress"]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    label = re.escape(display_name("token_entropy_24"))
    found = re.findall(rf"(\d+) claims: linear ROC-AUC [0-9.]+ PR-AUC [0-9.]+; {label} ROC-AUC ([0-9.]+) PR-AUC "
                       rf"[0-9.]+; Δ ROC-AUC vs {label} [^`]*? -- `(much run [^`]+)` prints these", printed)
    assert len(found) == 2 and "Max Likelihood" not in printed, printed
    claims, roc, command = found[0]
    assert "token_entropy_24 --baseline token_entropy_24" in command
    out = tmp_path / "run.json"
    assert main([*shlex.split(command)[1:], "--bootstrap", "0", "--no-progress", "--json", str(out)]) == 0
    rows = {row["signal_name"]: row for row in json.loads(out.read_text())["results"]}
    assert f"{rows['token_entropy_24']['roc_auc']:.3f}" == roc and rows["token_entropy_24"]["n_claims"] == int(claims)


@pytest.mark.parametrize(("name", "said"), [("sample_cosine", "scores claims"), ("ccp_10_8", "needs"),
                                            ("token_entrop_24", "did you mean")])
def test_much_train_refuses_a_baseline_it_cannot_compute_before_loading(name, said, tmp_path, capsys, monkeypatch):
    from much_metric.cli import main
    from much_metric.cli import train as train_cli

    monkeypatch.setattr(train_cli, "load_with_origin", lambda *a: pytest.fail("the data was loaded"))
    assert main(["train", "--source", "sample", "--out", str(tmp_path / "x"), "--baseline", name]) == 2
    message = capsys.readouterr().err
    assert "--baseline" in message or name in message
    assert said in message.lower(), message
