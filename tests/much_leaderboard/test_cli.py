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
