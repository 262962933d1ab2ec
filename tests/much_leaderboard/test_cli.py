"""``much-leaderboard serve`` (``python -m much_leaderboard``): the address is checked before anything is loaded,
and ``much leaderboard`` points to the new command."""

from __future__ import annotations

import importlib.util
import socket

import pytest

from much_leaderboard import main


@pytest.fixture
def gradio_present(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: object() if name == "gradio" else real(name, *a))


def test_unresolvable_host_is_one_line_before_anything(tmp_path, capsys, gradio_present):
    assert main(["serve", "--host", "no such host", "--store", str(tmp_path / "s")]) == 2
    out, err = capsys.readouterr()
    assert "serving on" not in out and out == ""
    assert err.startswith("much-leaderboard: error: --host 'no such host': not an address this machine can "
                          "resolve") and err.count("\n") == 1
    assert not (tmp_path / "s").exists()  # refused before the store is created


def test_port_in_use_is_one_line_before_anything(tmp_path, capsys, gradio_present):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["serve", "--port", str(port), "--store", str(tmp_path / "s")]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith(f"much-leaderboard: error: --host '127.0.0.1' --port {port}: cannot "
                                        "listen there") and err.count("\n") == 1
    assert not (tmp_path / "s").exists()


def test_much_leaderboard_points_to_the_new_command(capsys):
    from much_metric.cli import main as much

    assert much(["leaderboard", "serve", "--port", "8080"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("much leaderboard: error: the leaderboard server moved to its own command: "
                          "much-leaderboard serve") and err.count("\n") == 1


@pytest.mark.parametrize("resamples", ["5", "39", "100001"])
def test_bootstrap_follows_the_rule_of_much_evaluate(resamples, tmp_path, capsys):
    """One rule for --bootstrap (much_metric.scoring.check_resamples): the board refuses what much evaluate refuses,
    with the same reason, before anything is loaded."""
    from much_metric.cli import main as much

    (tmp_path / "scores.jsonl").write_text("")
    assert much(["evaluate", "--source", "sample", "--scores", str(tmp_path / "scores.jsonl"),
                 "--bootstrap", resamples]) == 2
    evaluate_error = capsys.readouterr().err
    assert main(["serve", "--check", "--bootstrap", resamples, "--store", str(tmp_path / "s")]) == 2
    serve_error = capsys.readouterr().err
    reason = evaluate_error.split("--bootstrap must be", 1)[1]
    assert "--bootstrap must be" + reason in serve_error and not (tmp_path / "s").exists()


def test_bootstrap_0_is_a_board_without_intervals(tmp_path, capsys):
    """--bootstrap 0, accepted by much evaluate, is accepted by the board too: no intervals and no P(rank), rows
    ranked by their point values."""
    from much_leaderboard import EvaluationData, Leaderboard
    from tests.much_leaderboard._helpers import sample_signal, valid_archive

    assert main(["serve", "--check", "--no-baselines", "--bootstrap", "0", "--store", str(tmp_path / "s")]) == 0
    assert "rows in" in capsys.readouterr().out
    data = EvaluationData(n_resamples=0)
    assert data.bootstrap is None
    board = Leaderboard(tmp_path / "board", data=data)
    first = board.submit(valid_archive(sample_signal(), name="a"), {"method": "a"})
    second = board.submit(valid_archive(sample_signal(seed=3), name="b"), {"method": "b"})
    assert [first.status, second.status] == ["accepted", "accepted"], (first, second)
    ranking = board.ranking()
    assert ranking["_meta"]["n_resamples"] == 0 and all(
        row["rank_probability"] is None for key, row in ranking.items() if key != "_meta")


def test_a_store_that_would_write_over_the_evaluation_data_is_refused(tmp_path, capsys):
    """Issue #44: ``--store`` writes leaderboard.sqlite, archives/ and scores/; an evaluation ``--data`` folder that
    holds one of them is an input the store would overwrite (one line, exit 2, nothing changed)."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "leaderboard.sqlite").write_bytes(b"the evaluation data's own file")
    assert main(["serve", "--check", "--store", str(data), "--data", str(data), "--no-baselines"]) == 2
    err = capsys.readouterr().err
    assert "--store" in err and "leaderboard.sqlite" in err and "--data" in err and err.count("\n") == 1
    assert (data / "leaderboard.sqlite").read_bytes() == b"the evaluation data's own file"
