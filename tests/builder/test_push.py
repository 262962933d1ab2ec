"""push against a local fake hub (127.0.0.1) that records every request, with the real huggingface_hub client."""

from __future__ import annotations

import base64
import json
import re
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from builder import push
from builder.cli import main
from much_dataset import schema
from much_dataset.card import write_parquet_folder
from much_dataset.synthetic import make_rows

GOOD_TOKEN = "hf_good_token"


class FakeHub:
    """The endpoints create_repo + create_commit use in huggingface_hub 2.x (read from its source):
    ``POST /api/repos/create``, ``POST /api/validate-yaml``, ``POST /api/{type}s/{repo}/preupload/{rev}`` and
    ``POST /api/{type}s/{repo}/commit/{rev}`` (ndjson). Anything else is answered 404 and recorded."""

    def __init__(self) -> None:
        self.requests: list[dict] = []
        self.repos: dict[str, dict] = {}
        self.commits: list[dict] = []
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's naming
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                path = urllib.parse.urlsplit(self.path).path
                hub.requests.append({"method": "POST", "path": path, "headers": dict(self.headers), "body": body})
                status, payload = hub.handle(path, dict(self.headers), body)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):  # noqa: N802
                hub.requests.append({"method": "GET", "path": self.path, "headers": dict(self.headers), "body": b""})
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"

    def handle(self, path: str, headers: dict, body: bytes):
        auth = {k.lower(): v for k, v in headers.items()}.get("authorization", "")
        if auth != f"Bearer {GOOD_TOKEN}":
            return 401, {"error": "Invalid credentials in Authorization header"}
        if path == "/api/repos/create":
            request = json.loads(body)
            repo_id = f"{request['organization']}/{request['name']}"
            if repo_id in self.repos:
                return 409, {"error": "You already created this dataset repo", "url": f"{self.endpoint}/{repo_id}"}
            self.repos[repo_id] = {"type": request.get("type"), "private": request.get("private"), "files": {}}
            return 200, {"url": f"{self.endpoint}/datasets/{repo_id}"}
        if path == "/api/validate-yaml":
            content = json.loads(body)["content"]
            if not content.startswith("---\n") or "configs:" not in content.split("---")[1]:
                return 400, {"errors": [{"message": "no configs in the YAML header"}]}
            return 200, {"errors": [], "warnings": []}
        parts = path.split("/")  # ['', 'api', 'datasets', org, name, action, revision]
        if len(parts) == 7 and parts[2] == "datasets":
            repo_id = f"{parts[3]}/{parts[4]}"
            if repo_id not in self.repos:
                return 404, {"error": "Repository not found"}
            if parts[5] == "preupload":
                files = json.loads(body)["files"]
                return 200, {"files": [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False}
                                       for f in files]}
            if parts[5] == "commit":
                lines = [json.loads(line) for line in body.splitlines() if line.strip()]
                header = next(line["value"] for line in lines if line["key"] == "header")
                files = {line["value"]["path"]: base64.b64decode(line["value"]["content"])
                         for line in lines if line["key"] == "file"}
                self.repos[repo_id]["files"].update(files)
                oid = f"{len(self.commits) + 1:040x}"
                self.commits.append({"repo_id": repo_id, "summary": header["summary"], "files": files})
                return 200, {"commitUrl": f"{self.endpoint}/datasets/{repo_id}/commit/{oid}", "commitOid": oid,
                             "pullRequestUrl": None}
        return 404, {"error": f"unknown endpoint {path}"}

    def __enter__(self):
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def folder(tmp_path) -> Path:
    rows = make_rows(12, seed=5)
    write_parquet_folder({"train": rows[:9], "test": rows[9:]}, tmp_path / "much")
    return tmp_path / "much"


@pytest.fixture
def hub(monkeypatch):
    import huggingface_hub.constants

    # Other tests set HF_HUB_OFFLINE=1 for the session; this server is local, so allow it here only.
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    with FakeHub() as server:
        monkeypatch.setenv("HF_ENDPOINT", server.endpoint)
        yield server


def test_push_creates_the_repo_and_one_commit(hub, folder, capsys, tmp_path_factory):
    token_file = tmp_path_factory.mktemp("secret") / "token"
    token_file.write_text(GOOD_TOKEN + "\n")
    argv = ["push", "--out", str(folder.parent), "--repo-id", "me/MUCH", "--token-file", str(token_file),
            "--endpoint", hub.endpoint]
    assert main(argv) == 0
    paths = [r["path"] for r in hub.requests]
    assert paths[0] == "/api/repos/create"
    assert "/api/validate-yaml" in paths and paths[-1] == "/api/datasets/me/MUCH/commit/main"
    assert "/api/datasets/me/MUCH/preupload/main" in paths
    assert hub.repos["me/MUCH"]["type"] == "dataset"
    [commit] = hub.commits
    expected = {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    assert commit["files"] == expected  # byte for byte, every shard and the card
    assert commit["summary"] == "MUCH builder 0.1.0: test=3, train=9 rows"
    validated = json.loads(next(r["body"] for r in hub.requests if r["path"] == "/api/validate-yaml"))
    assert validated["content"] == (folder / "README.md").read_text() and validated["repoType"] == "dataset"
    assert "committed to me/MUCH" in capsys.readouterr().out
    # A second push to the existing repo: create_repo's 409 is fine (exist_ok), one more commit.
    assert main(argv) == 0
    assert len(hub.commits) == 2


def test_refused_token_is_a_clear_error(hub, folder, capsys, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_revoked")  # read from the environment, never from the command line
    assert main(["push", "--out", str(folder.parent), "--repo-id", "me/MUCH"]) == 2
    assert re.search(r"refused the token \(HTTP 401\).*me/MUCH", capsys.readouterr().err)
    assert hub.requests and not hub.commits and not hub.repos


def test_invalid_card_is_refused_before_any_upload(hub, folder):
    card = folder / "README.md"
    card.write_text("# no YAML header\n")
    with pytest.raises(push.PushError, match="Invalid metadata|no configs"):
        push.push_folder(folder, "me/MUCH", token=GOOD_TOKEN, endpoint=hub.endpoint)
    assert not hub.commits


def test_dry_run_contacts_nobody(hub, folder, capsys):
    assert main(["push", "--out", str(folder.parent), "--repo-id", "me/MUCH", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert not hub.requests
    for path in push.folder_files(folder):
        assert path.as_posix() in out
    assert "MUCH builder 0.1.0: test=3, train=9 rows" in out and hub.endpoint in out


def test_split_counts_and_missing_card(folder, tmp_path):
    assert push.split_counts(folder) == {"train": 9, "test": 3}
    assert sum(1 for _ in folder.glob("data/*/*.parquet")) >= 2
    with pytest.raises(FileNotFoundError, match="run `python -m builder export`"):
        push.folder_files(tmp_path / "empty")
    assert schema.HUB_REPO_ID == "orailix/MUCH"  # the default name users load; push never assumes it


def test_token_is_not_a_command_line_value(hub, folder, capsys):
    assert main(["push", "--out", str(folder.parent), "--repo-id", "me/MUCH", "--token", GOOD_TOKEN]) == 2
    assert "--token is not accepted" in capsys.readouterr().err and not hub.requests


@pytest.mark.parametrize("where", ["file", "folder"])
def test_links_leaving_the_folder_are_refused(hub, folder, tmp_path_factory, where):
    outside = tmp_path_factory.mktemp("outside")
    (outside / "id_rsa").write_text("PRIVATE")
    link = folder / ("data/leak.parquet" if where == "file" else "data/leak")
    link.symlink_to(outside / "id_rsa" if where == "file" else outside)
    try:
        with pytest.raises(ValueError, match="symbolic link .* outside"):
            push.folder_files(folder)
        assert main(["push", "--out", str(folder.parent), "--repo-id", "me/MUCH"]) == 2
        assert not hub.commits
    finally:
        link.unlink()


def test_links_inside_the_folder_are_fine(folder):
    link = folder / "data" / "again.md"
    link.symlink_to(folder / "README.md")
    try:
        assert "data/again.md" in [p.as_posix() for p in push.folder_files(folder)]
    finally:
        link.unlink()
