"""The hidden split holds together with the rest of the board (docs/leaderboard.md#hidden-split): the board over
its default public data (the embedded sample) starts with its built-in baselines and a private split, computed on
the private rows with the public rows' resources; the bad splits and label files are refused at start, each in one
line naming the input, before anything is served."""

from __future__ import annotations

import os
import shutil

import pytest

from much_leaderboard import main


@pytest.fixture(scope="module")
def fresh_split(tmp_path_factory):
    """A private split of rows the sample does not hold (new ids, new configs), as a real hidden split is."""
    from tests._hidden_split import made_in_session

    return made_in_session(tmp_path_factory, "fresh_split", fresh=True)


def _serve(tmp_path, *flags):
    return main(["serve", "--check", "--bootstrap", "0", "--store", str(tmp_path / "store"), *flags])


def _one_line_error(capsys):
    """The command's one error line (datasets' progress bars aside)."""
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("much-leaderboard")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_the_sample_board_starts_with_its_baselines_and_a_private_split(tmp_path, fresh_split, capsys):
    """Default --data (the sample) and the built-in baselines: KTC is computed on the private rows with the
    statistics found for the public rows (before: exit 2 'ktc_... need token-neighbour statistics')."""
    from much_dataset.label_files import read_label_file
    from much_leaderboard._private_store import PrivateStore

    assert _serve(tmp_path, "--private-data", str(fresh_split.private), "--private-labels",
                  str(fresh_split.labels)) == 0
    assert f"private split {fresh_split.private}: 288 samples" in capsys.readouterr().out
    sha = read_label_file(fresh_split.labels, require_checksum=True).sha256
    results = PrivateStore(tmp_path / "store").results(sha)
    signals = {signal: value for (_, signal), (value, _) in results.items()}
    assert any(name.startswith("ktc") for name in signals), signals
    assert all(value is not None and 0 < value < 1 for value in signals.values()), signals


def test_a_private_split_of_one_class_is_refused(tmp_path_factory, tmp_path, capsys):
    from tests._hidden_split import made_in_session

    split = made_in_session(tmp_path_factory, "one_class_split", fresh=True, one_class=True)
    assert _serve(tmp_path, "--no-baselines", "--private-data", str(split.private), "--private-labels",
                  str(split.labels)) == 2
    err = _one_line_error(capsys)
    assert f"--private-labels {split.labels}: every evaluated claim of the private split has one and the same " \
           "label" in err
    assert not (tmp_path / "store" / "private.sqlite").exists()


def test_a_private_split_sharing_rows_with_the_public_data_is_refused(tmp_path, hidden_split, capsys):
    """`--data sample --private-data <rows of the sample>`: neither serve nor --check."""
    for extra in ([], ["--no-baselines"]):
        assert _serve(tmp_path, *extra, "--private-data", str(hidden_split.private), "--private-labels",
                      str(hidden_split.labels)) == 2
        err = _one_line_error(capsys)
        assert f"--data sample and --private-data {hidden_split.private} share 288 row(s) (e.g. generation_id=" in err
    assert not (tmp_path / "store" / "private.sqlite").exists()


def test_a_row_under_another_id_is_still_a_shared_row(private_split, private_truth):
    """Same config, prompt and output: one row, whatever its generation_id."""
    renamed = private_truth.map(lambda gid: {"generation_id": "copy-" + gid}, input_columns="generation_id")
    with pytest.raises(ValueError, match=r"share 288 row\(s\) \(e.g. generation_id='copy-"):
        private_split.check_disjoint(renamed, "renamed")
    private_split.check_disjoint(renamed.select([]), "empty")  # nothing shared: no error


def test_a_split_below_the_claim_minimum_is_refused(tmp_path, fresh_split, capsys):
    assert _serve(tmp_path, "--no-baselines", "--private-data", str(fresh_split.private), "--private-labels",
                  str(fresh_split.labels), "--private-min-claims", "5000") == 2
    assert "4703 evaluated claims, fewer than the minimum of 5000" in _one_line_error(capsys)


def test_a_public_board_over_label_free_rows_is_refused(tmp_path, hidden_split, capsys):
    assert _serve(tmp_path, "--no-baselines", "--data", str(hidden_split.private)) == 2
    err = _one_line_error(capsys)
    assert f"--data {hidden_split.private}: the rows have no 'labels' column" in err
    assert "--private-data" in err


def _labels_copy(split, folder):
    folder.mkdir(parents=True, exist_ok=True)
    labels = folder / "labels.json"
    shutil.copy(split.labels, labels)
    shutil.copy(split.labels.with_name("labels.json.sha256"), folder / "labels.json.sha256")
    return labels


@pytest.mark.skipif(os.name != "posix", reason="POSIX permission bits")
@pytest.mark.parametrize("mode", [0o644, 0o666, 0o640, 0o604, 0o602])
def test_a_label_file_others_can_read_or_write_is_refused_with_the_fix(tmp_path, fresh_split, capsys, mode):
    labels = _labels_copy(fresh_split, tmp_path / "secrets")
    labels.chmod(mode)
    assert _serve(tmp_path, "--no-baselines", "--private-data", str(fresh_split.private), "--private-labels",
                  str(labels)) == 2
    err = _one_line_error(capsys)
    assert f"--private-labels {labels}: readable or writable by others (mode {mode:o})" in err
    assert f"chmod 600 {labels}" in err
    labels.chmod(0o600)  # the fix given: the board starts
    assert _serve(tmp_path, "--no-baselines", "--private-data", str(fresh_split.private), "--private-labels",
                  str(labels)) == 0


def test_a_label_file_inside_the_published_folder_is_refused(tmp_path, fresh_split, capsys):
    published = tmp_path / "published"
    shutil.copytree(fresh_split.private, published)
    labels = _labels_copy(fresh_split, published / "private")
    assert _serve(tmp_path, "--no-baselines", "--private-data", str(published), "--private-labels",
                  str(labels)) == 2
    assert f"--private-labels {labels} is inside the published folder {published}" in _one_line_error(capsys)


def test_a_label_file_inside_the_public_data_folder_is_refused(tmp_path, fresh_split, capsys):
    public = tmp_path / "public"
    shutil.copytree(fresh_split.public, public)
    labels = _labels_copy(fresh_split, public / "secrets")
    assert _serve(tmp_path, "--no-baselines", "--data", str(public), "--private-data", str(fresh_split.private),
                  "--private-labels", str(labels)) == 2
    assert f"--private-labels {labels} is inside the published folder {public}" in _one_line_error(capsys)
