"""The submitter's documented path on a board with a hidden split (docs/leaderboard.md#hidden-split), end to end:
``much run`` on the public data and on the withheld split (its closing advice names the next command), a method's
own signal files beside them, ``much-leaderboard archive PUBLIC PRIVATE --out submission.zip``, and the board
accepts that archive with its private values, scored as the toolkit scores them on the private rows' true labels."""

from __future__ import annotations

import numpy as np
import pytest

from much_leaderboard import Leaderboard
from much_leaderboard import main as leaderboard_main


def _own_method(rows, seed):
    """A submitter's own signal (not a built-in): one value per output token in [0, 1]."""
    import much_dataset

    rng = np.random.default_rng(seed)
    data = much_dataset.load(str(rows))
    data = data[next(iter(data))] if hasattr(data, "keys") else data
    return {gid: np.clip(1.0 - np.asarray([row[0] for row in probs]) + rng.normal(0, 0.05, len(probs)), 0, 1)
            for gid, probs in zip(data["generation_id"], data["logits_values"], strict=True)}


@pytest.fixture(scope="module")
def folders(tmp_path_factory, hidden_split):
    from much_metric.cli import main as much
    from much_metric.signals import write_signals

    root = tmp_path_factory.mktemp("submitter")
    printed = {}
    for part, source in (("public", hidden_split.public), ("private", hidden_split.private)):
        import contextlib
        import io

        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            assert much(["run", "--source", str(source), "--signals", "max_likelihood", "--no-progress", "--no-nli",
                         "--out", str(root / part)]) == 0
        printed[part] = " ".join(buffer.getvalue().split())
        write_signals(root / part / "my_method.parquet", {"my_method": _own_method(source, seed=3)})
    return root, printed


def test_much_run_on_a_withheld_split_points_at_the_archive_command(folders):
    root, printed = folders
    assert f"much-leaderboard archive PUBLIC {root / 'private'} --out submission.zip" in printed["private"]
    assert "zip the folder and submit it" not in printed["private"]


def test_the_archive_of_the_documented_path_is_accepted_with_its_private_values(folders, tmp_path, hidden_split,
                                                                                   public_evaluation, private_split,
                                                                                   private_truth, capsys):
    from much_metric.report import EvaluationOptions, evaluate_signals
    from much_metric.signals import read_signals

    root, _ = folders
    archive = tmp_path / "submission.zip"
    assert leaderboard_main(["archive", str(root / "public"), str(root / "private"), "--out", str(archive)]) == 0
    assert "288 private rows" in capsys.readouterr().out
    board = Leaderboard(tmp_path / "store", data=public_evaluation)
    board.attach_private(private_split)
    outcome = board.submit(archive.read_bytes(), {"method": "Mine", "authors": "Sub Mitter"})
    assert outcome.status == "accepted", outcome.message
    assert outcome.signals == ["my_method"]  # max_likelihood: the built-in's own values, not listed again
    assert "private split ROC-AUC" in outcome.message
    shown = board.private.table(board.store.rows())
    value = next(r["private"] for r in shown["rows"] if r["signal"] == "my_method")
    private_values = read_signals(root / "private")["my_method"]
    truth = evaluate_signals(private_truth, {"my_method": private_values},
                             evaluation=EvaluationOptions(bootstrap=None, floors=False))
    assert value == round(truth.results[0].score.roc_auc, 2)


def test_the_private_folder_zipped_alone_is_refused_with_the_command_that_fixes_it(folders, tmp_path,
                                                                                   public_evaluation, private_split):
    """What much run's old advice made (the withheld split's folder, zipped): the answer names the archive command."""
    import zipfile

    root, _ = folders
    archive = tmp_path / "private-only.zip"
    with zipfile.ZipFile(archive, "w") as handle:
        for path in sorted((root / "private").iterdir()):
            handle.write(path, path.name)
    board = Leaderboard(tmp_path / "store", data=public_evaluation)
    board.attach_private(private_split)
    outcome = board.submit(archive.read_bytes(), {"method": "Alone", "authors": "Sub Mitter"})
    assert outcome.status == "rejected" and "values for the private split only" in outcome.message
    assert "much-leaderboard archive PUBLIC PRIVATE --out submission.zip" in outcome.message


def test_folders_that_do_not_make_one_submission_are_refused(folders, tmp_path, capsys):
    root, _ = folders
    out = str(tmp_path / "s.zip")
    assert leaderboard_main(["archive", str(root / "public"), str(root / "public"), "--out", out]) == 2
    assert "share 318 generation_id(s)" in capsys.readouterr().err
    lone = tmp_path / "lone"
    lone.mkdir()
    (lone / "max_likelihood.parquet").write_bytes((root / "private" / "max_likelihood.parquet").read_bytes())
    assert leaderboard_main(["archive", str(root / "public"), str(lone), "--out", out]) == 2
    assert "signal file(s) ['my_method'] in one folder only" in capsys.readouterr().err
    assert leaderboard_main(["archive", str(root / "public"), str(root / "private"), "--out", "s.tar"]) == 2
    assert "must end in .zip" in capsys.readouterr().err
    assert not (tmp_path / "s.zip").exists()
