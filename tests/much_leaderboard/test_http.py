"""The server over HTTP on 127.0.0.1: 20 concurrent POST /api/submit, the CLI, the Space entry's settings."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from much_leaderboard import Leaderboard
from much_leaderboard._store import archive_id
from tests._tools import require
from tests.much_leaderboard._helpers import make_zip, sample_signal, serving, valid_archive

REPO = Path(__file__).resolve().parents[2]


def _post(url: str, archive: bytes, method: str) -> dict:
    boundary = uuid.uuid4().hex
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"method\"\r\n\r\n{method}\r\n"
            f"--{boundary}\r\nContent-Disposition: form-data; name=\"archive\"; filename=\"a.zip\"\r\n"
            "Content-Type: application/zip\r\n\r\n").encode() + archive + f"\r\n--{boundary}--\r\n".encode()
    request = urllib.request.Request(url, data=body, method="POST",
                                     headers={"Content-Type": f"multipart/form-data; boundary={boundary}"})
    with urllib.request.urlopen(request, timeout=300) as response:
        return json.loads(response.read())


@pytest.fixture(scope="module")
def http_server(tmp_path_factory, evaluation):
    for module in ("gradio", "uvicorn"):
        require("browser", importlib.util.find_spec(module) is not None,
                f"{module} is not installed (extra 'leaderboard')")
    board = Leaderboard(tmp_path_factory.mktemp("http") / "store", data=evaluation, max_parallel=2, daily_limit=100)
    with serving(board) as url:
        yield board, url


def test_twenty_concurrent_http_submissions(http_server):
    board, url = http_server
    distinct = [valid_archive(sample_signal(seed=10 + k), name=f"http_{k}") for k in range(6)]
    evil = [make_zip({"/abs.jsonl": b"{}"}), make_zip({"x.pkl": b"\x80\x04."})]
    requests = [*distinct, *distinct, *distinct[:4], *evil, *evil]
    assert len(requests) == 20
    with ThreadPoolExecutor(max_workers=20) as pool:
        answers = list(pool.map(lambda a: _post(f"{url}/api/submit", a, "m"), requests))
    assert [a["status"] for a in answers].count("rejected") == 4
    assert all(a["message"] for a in answers)
    accepted = {a["submission"] for a in answers if a["status"] == "accepted"}
    assert accepted == {archive_id(a) for a in distinct}
    assert all(a["submission"] in accepted for a in answers if a["status"] == "duplicate")
    assert sorted(s["id"] for s in board.store.submissions()) == sorted(accepted)
    assert not board.store.pending() and len(board.store.rows()) == 6


def test_cli_check_seeds_the_sample_board(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "much_leaderboard", "serve", "--store", str(tmp_path / "s"),
               "--bootstrap", "40", "--check"]
    first = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr
    assert "4 rows in" in first.stdout  # the three probability baselines and KTC (the sample ships its statistics)
    again = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert "4 rows in" in again.stdout  # a restart seeds nothing twice
    bad = subprocess.run([*command, "--port", "0"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.startswith("much-leaderboard: error: --port must be in 1..65535")


def test_serve_without_gradio_names_the_extra(tmp_path, capsys, monkeypatch):
    import importlib.util

    from much_leaderboard import main

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "gradio" else real(name, *a))
    assert main(["serve", "--store", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err
    assert err == "much-leaderboard: error: much-leaderboard serve needs gradio (from the toolkit's checkout: " \
                  "pip install '.[leaderboard]')\n"
    assert not (tmp_path / "s").exists()  # refused before anything is created


def test_oversized_request_is_refused_before_reading(http_server):
    board, url = http_server
    limit = board.limits.max_archive_bytes
    board.limits = type(board.limits)(max_archive_bytes=10_000)
    try:
        answer = _post(f"{url}/api/submit", b"\0" * 200_000, "big")
    finally:
        board.limits = type(board.limits)(max_archive_bytes=limit)
    assert answer["status"] == "rejected" and "more than the archive limit of 10,000" in answer["message"]


def test_hub_token_never_reaches_a_page(tmp_path, evaluation, monkeypatch):
    pytest.importorskip("gradio")
    from fastapi.testclient import TestClient

    from much_leaderboard import HubMirror, create_server

    secret = "hf_server_side_secret_123"
    monkeypatch.setenv("HF_TOKEN", secret)
    mirror = HubMirror("me/board", token=secret, endpoint="http://127.0.0.1:9")
    board = Leaderboard(tmp_path / "store", data=evaluation, mirror=mirror)
    client = TestClient(create_server(board))
    for path in ("/", "/config", "/gradio_api/info"):
        response = client.get(path)
        assert response.status_code == 200 and secret not in response.text, path
    assert secret not in repr(mirror)


def test_server_error_while_scoring_is_http_500_not_a_rejection(http_server, monkeypatch):
    import urllib.error

    import much_metric.report

    def bug(*args, **kwargs):
        raise KeyError("a bug")

    board, url = http_server
    monkeypatch.setattr(much_metric.report, "evaluate_signals", bug)
    with pytest.raises(urllib.error.HTTPError) as raised:
        _post(f"{url}/api/submit", valid_archive(sample_signal(seed=77), name="buggy"), "buggy")
    assert raised.value.code == 500
    answer = json.loads(raised.value.read())
    assert answer["status"] == "error" and answer["message"].startswith("server error")
    assert answer["submission"] in board.store.pending()
