"""Persisting the leaderboard in a Hugging Face dataset repository (a Space's disk is not kept across restarts).

Each accepted submission is mirrored as ONE commit of two files, ``submissions/<sha256>/archive.zip`` (the bytes
submitted) and ``submissions/<sha256>/entry.json`` (form, kind, the server's scores): a commit is atomic on the
hub, so the repository never holds half an entry. Failed commits (HTTP 5xx, 429, connection errors) are retried with
exponential backoff; a refused token (401/403) is not retried. At start, :meth:`HubMirror.pull` brings back every
complete entry whose archive hashes to its folder name, and the server re-scores it (stored scores are never
trusted either).

The token stays on the server side: it is held by the ``HfApi`` client only, never written to the store, a page or
a log line (error messages are scrubbed of it).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from typing import Any

__all__ = ["HubMirror", "HubError"]

_log = logging.getLogger("much_leaderboard")
_PREFIX = "submissions"


class HubError(RuntimeError):
    """The hub refused or kept failing; the message never holds the token."""


class HubMirror:
    """Mirror of a store in the dataset repository ``repo_id``.

    Parameters
    ----------
    repo_id : str
        ``owner/name`` of a dataset repository (created, private, if absent).
    token : str, optional
        Write token (default: ``$HF_TOKEN`` / the saved login, read by huggingface_hub).
    endpoint : str, optional
        Hub endpoint (default ``$HF_ENDPOINT`` or huggingface.co).
    retries : int
        Attempts per commit (>= 1).
    backoff : float
        First wait in seconds, doubled after each failed attempt.
    """

    def __init__(self, repo_id: str, *, token: str | None = None, endpoint: str | None = None, retries: int = 4,
                 backoff: float = 1.0, revision: str = "main") -> None:
        from huggingface_hub import HfApi

        if not isinstance(repo_id, str) or repo_id.count("/") != 1:
            raise ValueError(f"repo_id must be 'owner/name', got {repo_id!r}")
        if not isinstance(retries, int) or retries < 1:
            raise ValueError(f"retries must be a positive integer, got {retries!r}")
        self.repo_id, self.revision, self.retries, self.backoff = repo_id, revision, retries, backoff
        self._token = token
        self._api = HfApi(endpoint=endpoint or os.environ.get("HF_ENDPOINT") or None, token=token)
        self._created = False

    def __repr__(self) -> str:  # never shows the token
        return f"HubMirror({self.repo_id!r}, endpoint={self._api.endpoint!r})"

    def _scrub(self, text: str) -> str:
        token = self._token or os.environ.get("HF_TOKEN")
        return text.replace(token, "***") if token else text

    def _retrying(self, what: str, call: Any) -> Any:
        from huggingface_hub.errors import HfHubHTTPError

        wait = self.backoff
        for attempt in range(1, self.retries + 1):
            try:
                return call()
            except HfHubHTTPError as error:
                status = getattr(getattr(error, "response", None), "status_code", None)
                if status in (401, 403):
                    raise HubError(f"the hub refused the token (HTTP {status}) for {self.repo_id}: {what}") from None
                retryable = status is None or status >= 500 or status == 429
                message = self._scrub(str(error).splitlines()[0] if str(error) else type(error).__name__)
            except OSError as error:  # connection refused / reset / timeout
                retryable, message = True, self._scrub(f"{type(error).__name__}: {error}")
            if not retryable or attempt == self.retries:
                raise HubError(f"{what} failed after {attempt} attempt(s): {message}") from None
            _log.warning("%s failed (attempt %d/%d: %s); retrying in %.1fs", what, attempt, self.retries, message,
                         wait)
            time.sleep(wait)
            wait *= 2
        raise AssertionError("unreachable")

    def push(self, store: Any, submission: str) -> str:
        """Commit one accepted submission (archive + entry) in one commit; returns the commit URL."""
        from huggingface_hub import CommitOperationAdd

        entry = store.get(submission)
        if entry is None or entry["status"] != "accepted":
            raise ValueError(f"submission {submission[:12]} is not accepted: nothing to mirror")
        rows = {r["signal"]: r["metrics"] for r in store.rows() if r["submission"] == submission}
        payload = {"id": submission, "kind": entry["kind"], "form": entry["form"], "submitted": entry["submitted"],
                   "rows": rows, "note": "scores computed by the server; re-computed from archive.zip at load"}
        folder = f"{_PREFIX}/{submission}"
        operations = [
            CommitOperationAdd(f"{folder}/archive.zip", store.archive_path(submission).read_bytes()),
            CommitOperationAdd(f"{folder}/entry.json", json.dumps(payload, indent=1).encode("utf-8")),
        ]
        if not self._created:
            self._retrying("create_repo", lambda: self._api.create_repo(self.repo_id, repo_type="dataset",
                                                                         private=True, exist_ok=True))
            self._created = True
        info = self._retrying(f"commit of {submission[:12]}", lambda: self._api.create_commit(
            self.repo_id, operations, commit_message=f"leaderboard: add {entry['form'].get('method', '')[:60]!r}",
            repo_type="dataset", revision=self.revision))
        return str(info.commit_url)

    def _download(self, path: str) -> bytes:
        from huggingface_hub import get_session, hf_hub_url
        from huggingface_hub.utils import build_hf_headers, hf_raise_for_status

        url = hf_hub_url(self.repo_id, path, repo_type="dataset", revision=self.revision, endpoint=self._api.endpoint)

        def fetch() -> bytes:
            response = get_session().get(url, headers=build_hf_headers(token=self._token), follow_redirects=True)
            hf_raise_for_status(response)
            return response.content

        return self._retrying(f"download of {path}", fetch)

    def pull(self, store: Any) -> list[str]:
        """Add every complete hub entry missing from ``store`` as a pending submission (re-scored by
        :meth:`much_leaderboard.Leaderboard.recover`); returns their ids. An archive whose SHA-256 differs
        from its folder name is skipped with a warning."""
        from huggingface_hub.errors import RepositoryNotFoundError

        try:
            files = set(self._retrying("listing", lambda: self._api.list_repo_files(
                self.repo_id, repo_type="dataset", revision=self.revision)))
        except RepositoryNotFoundError:
            return []
        added = []
        for path in sorted(files):
            parts = path.split("/")
            if len(parts) != 3 or parts[0] != _PREFIX or parts[2] != "entry.json":
                continue
            submission = parts[1]
            if f"{_PREFIX}/{submission}/archive.zip" not in files or store.get(submission) is not None:
                continue
            data = self._download(f"{_PREFIX}/{submission}/archive.zip")
            if hashlib.sha256(data).hexdigest() != submission:
                _log.warning("hub entry %s: the archive does not hash to its name; skipped", submission[:12])
                continue
            try:
                entry = json.loads(self._download(f"{_PREFIX}/{submission}/entry.json"))
            except (ValueError, UnicodeDecodeError) as error:  # one broken entry must not stop the server's start
                entry = f"{type(error).__name__}: {str(error)[:120]}"
            if not isinstance(entry, dict):
                _log.warning("hub entry %s: entry.json is not a JSON object (%s); skipped", submission[:12],
                             entry if isinstance(entry, str) else type(entry).__name__)
                continue
            kind = "baseline" if entry.get("kind") == "baseline" else "submission"
            from much_leaderboard._service import validate_form

            try:
                form = validate_form(entry.get("form", {}))
            except ValueError:
                form = {"method": f"entry {submission[:12]}", "authors": "", "link": "", "needs": []}
            store.add_pending(data, form, kind=kind, synced=True)
            added.append(submission)
        return added
