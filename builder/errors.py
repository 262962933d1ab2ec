"""Exceptions of the builder steps. Helpers raise them; only :func:`builder.cli.main` turns them into a message
(``builder <step>: error: ...`` on stderr) and exit code 2."""

from __future__ import annotations

from pathlib import Path

__all__ = ["BuilderError", "AuthenticationError", "StepStopped", "load_or_stop", "require_input"]


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


class StepStopped(BuilderError):
    """A failure that is not about one item (the model, the tokenizer, the output folder): the step stops at once
    instead of recording the same failure for every item."""


def load_or_stop(loader, source: str, /, **kwargs):
    """``loader(source, **kwargs)``; any failure becomes :class:`StepStopped` naming ``source``.

    Loading a model or tokenizer happens once per source, not per item: if it fails, every item using it would fail
    the same way, so recording each as a per-item failure (and exiting 0) hides the real problem.
    """
    try:
        return loader(source, **kwargs)
    except Exception as error:  # noqa: BLE001 - re-raised as one clear step failure
        raise StepStopped(f"cannot load {source!r}: {type(error).__name__}: {error}") from error
