"""The leaderboard's learned-detector rule on what ``much run --signals learned:DIR --out OUT`` really writes.

The other leaderboard tests build the detector metadata by hand; here a detector is trained with ``much train``,
scored with ``much run`` into a folder in each file format, and that folder, zipped as a submitter would zip it, is
submitted: the board must see the detector and the rows it was trained on (it was trained on the sample, which is
the board's evaluation data) and refuse it, in both formats, with nothing stored.
"""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import pytest

from much_leaderboard import Leaderboard
from much_metric.cli import main
from much_metric.signals import read_archive
from tests.much_leaderboard._helpers import store_is_empty


@pytest.fixture(scope="module")
def detector(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("learned") / "linear-de"
    assert main(["train", "--source", "sample", "--fold", "de", "--detector", "linear", "--out", str(out),
                 "--no-progress"]) == 0
    return out


def _zip_folder(folder: Path) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path in sorted(folder.iterdir()):
            archive.write(path, path.name)
    return buffer.getvalue()


@pytest.mark.parametrize("file_format", ["jsonl", "parquet"])
def test_a_detector_scored_by_much_run_on_its_training_rows_is_refused(detector, file_format, tmp_path,
                                                                        evaluation, capsys):
    out = tmp_path / "signals"
    assert main(["run", "--source", "sample", "--signals", f"learned:{detector}", "--out", str(out),
                 "--file-format", file_format, "--bootstrap", "0", "--no-progress"]) == 0
    capsys.readouterr()
    archive = _zip_folder(out)
    parsed = read_archive(archive)  # the archive reader sees the detector and its rows ...
    (name,) = parsed.signals
    rows = json.loads((detector / "training_rows.json").read_text())
    assert parsed.learned[name]["detector"]["kind"] == "linear"
    assert parsed.learned[name]["training_generation_ids"] == frozenset(rows["train"] + rows["validation"])
    board = Leaderboard(tmp_path / "store", data=evaluation)  # ... and the board refuses it
    outcome = board.submit(archive, {"method": "leaky", "authors": "Ada"})
    assert outcome.status == "rejected", outcome
    assert "was trained or validated on" in outcome.message
    assert store_is_empty(tmp_path / "store")


def test_the_same_detector_on_a_board_of_its_held_out_language_is_accepted_and_labelled(detector, tmp_path, capsys):
    """Trained with German held out (and rows sharing a German row's article purged): a board that evaluates the
    German rows only has none of its training rows, so the same much run output is listed, labelled by its
    detector."""
    import much_dataset
    from much_leaderboard import EvaluationData
    from much_leaderboard._table import render_table, table_rows

    german = much_dataset.load("sample", "de", split="test")
    out = tmp_path / "signals"
    assert main(["run", "--source", "sample", "--config", "de", "--signals", f"learned:{detector}", "--out", str(out),
                 "--bootstrap", "0", "--no-progress"]) == 0
    capsys.readouterr()
    board = Leaderboard(tmp_path / "store", data=EvaluationData(dataset=german, n_resamples=50))
    outcome = board.submit(_zip_folder(out), {"method": "held out", "authors": "Ada"})
    assert outcome.status == "accepted", outcome
    [row] = table_rows(board.store.rows(), board.ranking())
    assert "training on the auto split" in row["needs"]
    page = render_table([row], langs=board.data.langs)
    assert "trained: linear, leave-one-language-out, fold lang=de" in page


def test_a_board_over_an_export_serves_only_its_held_out_split(detector, tmp_path, capsys):
    """A new export holds a train and a test split; a detector trained on the train rows is refused by a board over
    every split, and accepted by a board that serves only the held-out split (``--split test``), through the CLI
    option too."""
    import much_dataset
    from much_dataset.card import write_parquet_folder
    from much_leaderboard import EvaluationData
    from much_leaderboard import main as leaderboard

    sample = much_dataset.load("sample", split="test")
    held_out = [row for row in sample.to_list() if row["lang"] == "de"]
    trained_on = [row for row in sample.to_list() if row["lang"] != "de"]
    export = tmp_path / "export"
    write_parquet_folder({"train": trained_on, "test": held_out}, export)
    out = tmp_path / "signals"
    assert main(["run", "--source", str(export), "--split", "test", "--signals", f"learned:{detector}",
                 "--out", str(out), "--bootstrap", "0", "--no-progress"]) == 0
    archive = _zip_folder(out)
    every_split = Leaderboard(tmp_path / "all", data=EvaluationData(str(export), n_resamples=0))
    assert len(every_split.data.dataset) == len(sample)
    refused = every_split.submit(archive, {"method": "export detector", "authors": "Ada"})
    assert refused.status == "rejected" and "was trained or validated on" in refused.message
    held_out_board = Leaderboard(tmp_path / "test", data=EvaluationData(str(export), n_resamples=0, split="test"))
    assert len(held_out_board.data.dataset) == len(held_out)
    accepted = held_out_board.submit(archive, {"method": "export detector", "authors": "Ada"})
    assert accepted.status == "accepted", accepted
    capsys.readouterr()
    assert leaderboard(["serve", "--check", "--no-baselines", "--data", str(export), "--split", "test",
                        "--bootstrap", "0", "--store", str(tmp_path / "cli")]) == 0
    assert f"split test, {len(held_out)} samples" in capsys.readouterr().out
