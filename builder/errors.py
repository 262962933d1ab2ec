"""Exceptions of the builder steps. Helpers raise them; only :func:`builder.cli.main` turns them into a message
(``builder <step>: error: ...`` on stderr) and exit code 2."""

from __future__ import annotations

from pathlib import Path

__all__ = ["BuilderError", "AuthenticationError", "require_input"]


class BuilderError(ValueError):
    """A step cannot run as asked (bad option, missing input, refused credentials ...)."""


class AuthenticationError(BuilderError):
    """A server refused the credentials (HTTP 401/403): every further call would fail the same way."""


def require_input(path: str | Path, *, made_by: str) -> Path:
    """``path`` if it is a file; else a :class:`BuilderError` naming it and the step that writes it."""
    path = Path(path)
    if not path.is_file():
        where = "" if path.parent.is_dir() else f" (the folder {path.parent} does not exist: check --out)"
        raise BuilderError(f"missing input {path}{where}; run `python -m builder {made_by}` first")
    return path
