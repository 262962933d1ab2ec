"""``much``: one error path for every subcommand (``much <cmd>: error: ...``, exit 2, no traceback), argument checks
before any long work, a fast failure when the hub is unreachable, ``--version``, and the developers' escape."""

from __future__ import annotations

import importlib.metadata
import json

import pytest

import much_dataset
import much_metric
from much_metric.cli import COMMANDS, error_message, main
from much_metric.cli._preflight import looks_like_hub_id


@pytest.fixture
def no_data_loading(monkeypatch):
    """Any dataset load fails the test: the errors below must come before the (long) data loading."""

    def forbidden(*args, **kwargs):
        raise AssertionError("data loaded before the arguments were checked")

    monkeypatch.setattr(much_dataset, "load", forbidden)


@pytest.fixture
def unreachable_hub(monkeypatch):
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # discard port: connection refused at once


def test_version_is_the_one_version(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"much {much_dataset.__version__}"
    assert much_metric.__version__ == much_dataset.__version__
    try:
        installed = importlib.metadata.version("much-benchmark")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("much-benchmark is not installed")
    assert installed == much_dataset.__version__


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["run", "--generation-time", "soon"], "--generation-time"),
        (["run", "--generation-time", "-3"], "positive number of seconds"),
        (["evaluate", "--source", "sample", "--scores", "{tmp}/missing.parquet"], "--scores"),
        (["evaluate", "--source", "sample", "--scores", "{tmp}", "--report", "{tmp}/a_file/report.html"], "is a file"),
        (["run", "--out", "{tmp}/a_file"], "is a file, expected a folder"),
        (["run", "--json", "{tmp}"], "is a folder, expected a file"),
        (["calibrate", "--source", "sample", "--scores", "{tmp}", "--output", "{tmp}/t.json"], "needs --conformal"),
        (["segment", "--input", "{tmp}/missing.jsonl", "--tokenizer", "smollm2"], "no such file"),
        (["monitor", "--model", "{tmp}/missing.gguf", "--prompt", "hi"], "missing.gguf"),
        (["neighbours", "--tokenizer", "{tmp}/missing.json", "--out", "{tmp}/n"], "missing.json"),
        (["install-metric", "--name", "a/b"], "bare module name"),
        (["train", "--out", "{tmp}/a_file"], "is a file, expected a folder"),
        (["train", "--out", "{tmp}/d", "--validation-fraction", "1.5"], "--validation-fraction"),
        (["leaderboard", "serve", "--port", "0"], "much-leaderboard serve"),
    ],
)
def test_every_subcommand_fails_in_one_line(argv, message, tmp_path, capsys, monkeypatch, no_data_loading):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_MODULES_CACHE", str(tmp_path / "modules"))
    (tmp_path / "a_file").write_text("x")
    argv = [arg.replace("{tmp}", str(tmp_path)) for arg in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"much {argv[0]}: error: "), err
    assert message in err and "Traceback" not in err and err.count("\n") == 1


def test_every_command_is_covered_above():
    assert set(COMMANDS) == {"run", "evaluate", "calibrate", "segment", "monitor", "neighbours", "train",
                             "install-metric", "leaderboard"}


def test_unreachable_hub_fails_before_loading_with_what_to_do(tmp_path, capsys, unreachable_hub, no_data_loading):
    scores = tmp_path / "scores.jsonl"
    scores.write_text(json.dumps({"generation_id": "g", "signal_name": "s", "values": [0.1]}) + "\n")
    assert main(["evaluate", "--source", "orailix/MUCH", "--scores", str(scores)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("much evaluate: error: --source orailix/MUCH: the Hugging Face hub is unreachable")
    assert "HF_HUB_OFFLINE=1" in err and "local folder" in err and err.count("\n") == 1


def test_offline_mode_skips_the_hub_probe(monkeypatch):
    from much_metric.cli import _preflight

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(_preflight, "hub_reachable", lambda *a, **k: pytest.fail("probed the hub while offline"))
    _preflight.check_arguments(type("Args", (), {"data": "orailix/MUCH"})())


def test_hub_ids_are_told_from_paths_and_aliases(tmp_path):
    (tmp_path / "org").mkdir()
    (tmp_path / "org" / "name").mkdir()
    assert looks_like_hub_id("orailix/MUCH") and looks_like_hub_id("microsoft/deberta-large-mnli")
    for not_hub in ("sample", "smollm2", "./data", "/abs/path", "a/b/c", "file.gguf", str(tmp_path / "org/name")):
        assert not looks_like_hub_id(not_hub), not_hub


def test_traceback_escape_for_developers(tmp_path, monkeypatch):
    argv = ["segment", "--input", str(tmp_path / "missing.jsonl"), "--tokenizer", "smollm2"]
    with pytest.raises(FileNotFoundError):
        main(["--traceback", *argv])
    monkeypatch.setenv("MUCH_DEBUG", "1")
    with pytest.raises(FileNotFoundError):
        main(argv)


def test_error_messages_are_one_line_and_name_the_extra():
    assert error_message(KeyError("labels")) == "missing key 'labels'"
    assert error_message(ValueError("first\n  second")) == "first second"
    missing = ModuleNotFoundError("No module named 'matplotlib'", name="matplotlib")
    assert error_message(missing).endswith("(from the toolkit's checkout: pip install '.[report]')")
    assert "pip install '.[models]'" in error_message(ModuleNotFoundError("No module named 'torch'", name="torch.nn"))
    assert error_message(OSError()) == "OSError"
