"""``much-leaderboard serve --private-data FOLDER --private-labels FILE``: the maintainer's command, end to end
(``--check``), and its one-line errors."""

from __future__ import annotations

import shutil

from much_leaderboard import main


def test_serve_check_with_a_private_split(tmp_path, hidden_split, capsys):
    common = ["serve", "--check", "--bootstrap", "40", "--store", str(tmp_path / "store"), "--data",
              str(hidden_split.public)]
    assert main([*common, "--private-data", str(hidden_split.private), "--private-labels",
                 str(hidden_split.labels)]) == 0
    out = capsys.readouterr().out
    assert f"private split {hidden_split.private}: 288 samples, 4703 claims (labels sha256 " in out
    assert (tmp_path / "store" / "private.sqlite").is_file()


def test_private_flags_fail_in_one_line(tmp_path, hidden_split, capsys):
    from much_dataset.loader import SAMPLE_DIR

    common = ["serve", "--check", "--bootstrap", "40", "--no-baselines", "--store", str(tmp_path / "store"),
              "--data", str(hidden_split.public)]
    assert main([*common, "--private-labels", str(hidden_split.labels)]) == 2
    assert "--private-data and --private-labels go together" in capsys.readouterr().err
    other = tmp_path / "soft.json"  # a label file of other rows
    shutil.copy(SAMPLE_DIR / "label_sources" / "soft.json", other)
    shutil.copy(SAMPLE_DIR / "label_sources" / "soft.json.sha256", tmp_path / "soft.json.sha256")
    other.chmod(0o600)  # a private label file is owner-readable only (test_private_guards.py)
    assert main([*common, "--private-data", str(hidden_split.private), "--private-labels", str(other)]) == 2
    assert "made for other rows" in capsys.readouterr().err
    assert main([*common, "--private-data", str(hidden_split.public), "--private-labels",
                 str(hidden_split.labels)]) == 2
    assert "the rows carry label column(s) ['labels', 'human_labels_0', 'human_labels_1']" in capsys.readouterr().err
    assert main([*common, "--private-data", str(hidden_split.private), "--private-labels", str(hidden_split.labels),
                 "--private-min-claims", "5000"]) == 2
    assert "4703 evaluated claims, fewer than the minimum of 5000" in capsys.readouterr().err
    assert not (tmp_path / "store" / "private.sqlite").exists()
