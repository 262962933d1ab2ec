"""An unreachable hub: ``much_dataset.load`` fails within seconds with the CLI's message, not datasets' retries."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import much_dataset
from much_dataset import _hub

ROOT = Path(__file__).resolve().parents[2]


def _closed_port() -> int:
    with socket.socket() as probe:  # bound then closed: nothing listens there, a connection is refused at once
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def hub_env(tmp_path):
    """The environment of a user whose hub is unreachable: not offline, endpoint on a closed local port."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE")}
    env.update(HF_ENDPOINT=f"http://127.0.0.1:{_closed_port()}", HF_HOME=str(tmp_path / "hf"),
               PYTHONPATH=str(ROOT))
    return env


def test_library_load_of_unreachable_hub_fails_fast_with_the_cli_message(hub_env):
    """Fails at the probe, before datasets' own HTTP stack (which retried for about 26 s): the error is the probe's
    and the traceback never enters datasets. (``timeout`` is a hang detector only.)"""
    code = "import much_dataset; much_dataset.load('orailix/MUCH', split='test')"
    done = subprocess.run([sys.executable, "-c", code], env=hub_env, capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("much_dataset._hub.HubUnreachableError: much_dataset.load('orailix/MUCH'): the Hugging Face "
                           "hub is unreachable (no answer from http://127.0.0.1:"), done.stderr
    assert "HF_HUB_OFFLINE=1" in last and "local folder" in last
    frames = done.stderr.count('  File "')
    assert frames <= 5, done.stderr  # load -> _load_hub -> require_hub, not datasets' HTTP stack
    assert "/datasets/" not in done.stderr and "/huggingface_hub/" not in done.stderr, done.stderr


def test_cli_and_library_say_the_same(hub_env):
    done = subprocess.run([sys.executable, "-m", "much_metric", "evaluate", "--source", "orailix/MUCH", "--scores",
                           str(ROOT / "README.md")], env=hub_env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    library = _hub.unreachable_message("much_dataset.load('orailix/MUCH')").split(": ", 1)[1]
    assert done.stderr.strip() == f"much evaluate: error: --source orailix/MUCH: {library}".replace(
        _hub.hub_endpoint(), hub_env["HF_ENDPOINT"])


def test_offline_mode_does_not_probe(monkeypatch):
    monkeypatch.setattr(_hub, "hub_reachable", lambda *a, **k: pytest.fail("probed the hub while offline"))
    _hub.require_hub("x")  # the package's test fixture sets HF_HUB_OFFLINE=1


def test_reachable_check_is_bounded(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.delenv("HF_DATASETS_OFFLINE")
    monkeypatch.delenv("TRANSFORMERS_OFFLINE")
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{_closed_port()}")
    with pytest.raises(ConnectionError, match=r"much_dataset.load\('a/b'\): the Hugging Face hub"):
        much_dataset.load("a/b")
