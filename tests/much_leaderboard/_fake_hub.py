"""The push tests' fake hub (tests/builder/test_push.py), extended with what the leaderboard also uses: the file
listing (``GET /api/datasets/{repo}/tree/{rev}``), file downloads (``GET /datasets/{repo}/resolve/{rev}/{path}``)
and injected failures of the commit endpoint (HTTP 500 for the next ``fail_commits`` commits)."""

from __future__ import annotations

import json
import urllib.parse
from http.server import BaseHTTPRequestHandler

from tests.builder.test_push import GOOD_TOKEN, FakeHub

__all__ = ["LeaderboardHub", "GOOD_TOKEN"]


class LeaderboardHub(FakeHub):
    def __init__(self) -> None:
        super().__init__()
        self.fail_commits = 0
        hub = self
        base = self.server.RequestHandlerClass

        class Handler(base):
            def do_POST(self):  # noqa: N802
                path = urllib.parse.urlsplit(self.path).path
                if path.endswith("/commit/main") and hub.fail_commits > 0:
                    hub.fail_commits -= 1
                    length = int(self.headers.get("Content-Length") or 0)
                    body = self.rfile.read(length)
                    hub.requests.append({"method": "POST", "path": path, "headers": dict(self.headers),
                                         "body": body, "failed": True})
                    self._send(500, b'{"error": "Internal Error (injected)"}')
                    return
                super().do_POST()

            def do_GET(self):  # noqa: N802
                split = urllib.parse.urlsplit(self.path)
                hub.requests.append({"method": "GET", "path": split.path, "headers": dict(self.headers), "body": b""})
                status, data = hub.get(split.path, dict(self.headers))
                self._send(status, data)

            def _send(self, status: int, data: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        assert issubclass(Handler, BaseHTTPRequestHandler)
        self.server.RequestHandlerClass = Handler

    def get(self, path: str, headers: dict) -> tuple[int, bytes]:
        auth = {k.lower(): v for k, v in headers.items()}.get("authorization", "")
        if auth != f"Bearer {GOOD_TOKEN}":
            return 401, b'{"error": "Invalid credentials"}'
        parts = urllib.parse.unquote(path).split("/")
        if len(parts) >= 7 and parts[1:3] == ["api", "datasets"] and parts[5] == "tree":
            repo = self.repos.get(f"{parts[3]}/{parts[4]}")
            if repo is None:
                return 404, b'{"error": "Repository not found"}'
            listing = [{"type": "file", "path": p, "size": len(d), "oid": f"{abs(hash(p)):040x}"[:40]}
                       for p, d in sorted(repo["files"].items())]
            return 200, json.dumps(listing).encode()
        if len(parts) >= 7 and parts[1] == "datasets" and parts[4] == "resolve":
            repo = self.repos.get(f"{parts[2]}/{parts[3]}")
            file = "/".join(parts[6:])
            if repo is None or file not in repo["files"]:
                return 404, b'{"error": "Entry not found"}'
            return 200, repo["files"][file]
        return 404, json.dumps({"error": f"unknown endpoint {path}"}).encode()
