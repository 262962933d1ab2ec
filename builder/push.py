"""push: publish the exported folder (``<out>/much``) to a Hugging Face dataset repository in ONE commit.

``python -m builder push --out DIR --repo-id org/MUCH [--private] [--dry-run]``: ``create_repo`` (exist_ok), then a
single ``create_commit`` adding every file of the folder, with a message naming the builder version and the row
counts. ``--dry-run`` lists what would be uploaded and contacts nobody. The hub endpoint is ``$HF_ENDPOINT`` (or
``--endpoint``), the token ``$HF_TOKEN``, the saved hub login, or the file named by ``--token-file`` (never a
command-line value, which ``ps`` would show). Files are uploaded only from inside the folder: a symbolic link that
points outside it is refused, so a stray link cannot publish another file of the machine.

Why not ``upload_folder``: with ``hf_xet`` installed (the default) it streams large folders in several adaptive
commits; the operations it builds are the same as here, so we build them ourselves and send exactly one commit (the
hub still checks the card's YAML with ``/api/validate-yaml`` and stores parquet files through LFS/Xet).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from builder.errors import BuilderError

__all__ = ["add_arguments", "run", "folder_files", "split_counts", "commit_message", "push_folder", "read_token",
           "PushError"]


class PushError(RuntimeError):
    """The hub refused the push (bad token, no write access, invalid card ...)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--repo-id", required=True, help="dataset repository, e.g. my-org/MUCH")
    parser.add_argument("--folder", default=None, help="folder to upload (default <out>/much)")
    parser.add_argument("--private", action="store_true")
    parser.add_argument("--token-file", default=None,
                        help="file holding the hub token (default: $HF_TOKEN or the saved `hf auth login`)")
    # A token on the command line is visible to every user in `ps`: refused with a message naming the ways above.
    parser.add_argument("--token", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--endpoint", default=None, help="hub endpoint (default: $HF_ENDPOINT or huggingface.co)")
    parser.add_argument("--revision", default="main")
    parser.add_argument("--dry-run", action="store_true", help="list what would be uploaded, contact nobody")


def folder_files(folder: Path) -> list[Path]:
    """Files to upload (relative paths, sorted); hidden files and folders are left out."""
    folder = Path(folder)
    if not (folder / "README.md").is_file():
        raise FileNotFoundError(f"{folder} has no README.md: run `python -m builder export` first")
    root = folder.resolve()
    files = []
    for path in folder.rglob("*"):
        relative = path.relative_to(folder)
        if any(part.startswith(".") for part in relative.parts):
            continue
        if path.is_symlink() or any(parent.is_symlink() for parent in path.parents if parent != folder.parent):
            target = path.resolve()
            if not target.is_relative_to(root):
                raise BuilderError(f"{path} is a symbolic link to {target}, outside {folder}: refusing to upload it")
        if path.is_file():
            files.append(relative)
    return sorted(files)


def read_token(token_file: str | None) -> str | None:
    """The token in ``token_file`` (stripped), or None: huggingface_hub then uses ``$HF_TOKEN`` / the saved login."""
    if token_file is None:
        return None
    token = Path(token_file).read_text(encoding="utf-8").strip()
    if not token:
        raise BuilderError(f"--token-file {token_file} is empty")
    return token


def split_counts(folder: Path) -> dict[str, int]:
    """Rows per split, from the parquet footers (``data/<lang>/<split>-*.parquet``)."""
    import pyarrow.parquet as pq

    counts: dict[str, int] = {}
    for path in sorted(Path(folder).glob("data/*/*.parquet")):
        split = path.name.split("-", 1)[0]
        counts[split] = counts.get(split, 0) + pq.ParquetFile(path).metadata.num_rows
    return counts


def commit_message(folder: Path) -> str:
    from builder._card import BUILDER_VERSION

    counts = split_counts(folder)
    parts = ", ".join(f"{split}={counts[split]}" for split in sorted(counts))
    return f"MUCH builder {BUILDER_VERSION}: {parts} rows"


def push_folder(folder: Path, repo_id: str, *, token: str | None = None, endpoint: str | None = None,
                private: bool = False, revision: str = "main") -> str:
    """Create the repo if needed and commit the folder in one commit; returns the commit URL."""
    from huggingface_hub import CommitOperationAdd, HfApi
    from huggingface_hub.errors import HfHubHTTPError

    folder = Path(folder)
    files = folder_files(folder)
    message = commit_message(folder)
    # huggingface_hub reads $HF_ENDPOINT once, at import; read it again so a later setting is honoured.
    api = HfApi(endpoint=endpoint or os.environ.get("HF_ENDPOINT") or None, token=token)
    try:
        api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
        operations = [CommitOperationAdd(path_in_repo=p.as_posix(), path_or_fileobj=str(folder / p)) for p in files]
        info = api.create_commit(repo_id, operations, commit_message=message, repo_type="dataset", revision=revision)
    except HfHubHTTPError as error:
        status = getattr(error.response, "status_code", None)
        if status in (401, 403):
            raise PushError(f"the hub at {api.endpoint} refused the token (HTTP {status}) for {repo_id}: check that "
                            "--token / $HF_TOKEN is valid and has write access to that namespace") from error
        raise PushError(f"push of {folder} to {repo_id} failed: {error}") from error
    except ValueError as error:  # huggingface_hub's answer to /api/validate-yaml refusing the card
        raise PushError(f"the hub refused {folder / 'README.md'}: {error}") from error
    return str(info.commit_url)


def run(args: argparse.Namespace) -> int:
    if args.token is not None:
        raise BuilderError("--token is not accepted (a command-line token is visible in `ps`): set $HF_TOKEN, run "
                           "`hf auth login`, or pass --token-file FILE")
    folder = Path(args.folder) if args.folder else Path(args.out) / "much"
    files = folder_files(folder)
    message = commit_message(folder)
    if args.dry_run:
        endpoint = args.endpoint or os.environ.get("HF_ENDPOINT", "https://huggingface.co")
        print(f"push --dry-run: would create dataset repo {args.repo_id} at {endpoint} (exist_ok, "
              f"{'private' if args.private else 'public'}) and commit {len(files)} files:")
        for path in files:
            print(f"  {(folder / path).stat().st_size:>12,d}  {path.as_posix()}")
        print(f"commit message: {message}")
        return 0
    try:
        url = push_folder(folder, args.repo_id, token=read_token(args.token_file), endpoint=args.endpoint,
                          private=args.private,
                          revision=args.revision)
    except PushError as error:
        raise BuilderError(str(error)) from error
    print(f"push: {len(files)} files committed to {args.repo_id}: {url}")
    return 0
