"""Atomic file writes and the output-path rules shared by the metric, the baselines, the CLI and the builder.

Writes. A reader never sees half a file: data goes to a temporary file ``.<name>.XXXXXXXX.tmp`` in the same folder,
is fsynced, then renamed over the target with ``os.replace`` (atomic on POSIX and Windows). On POSIX the temporary is
locked (``flock``) by its writer until it is renamed, so a cleaner (``builder/_locks.clean_stale``) can tell the
leftover of a killed writer (lock free) from a temporary that a live process is still writing. The temporary is
created with mode ``0o666`` and the kernel applies the umask, as a plain ``open()`` would: the process umask is never
read by switching it (``os.umask`` is process-wide, so switching it races with every other thread's file creation).

Output rules (:func:`check_outputs`, run by every ``much`` command and every builder step before any work; the
rules are stated for users in ``docs/cli.md``, "Outputs, inputs and deadlines"):

1. an output never overwrites an input: not the same file (links resolved), not a file inside an input folder, a
   folder that is replaced as a whole holds no input, and an input is never one of the files an output folder
   writes (its ``owns``: ``builder verify --source D/verify.json --out D`` is refused, and so is ``much evaluate
   --internals P --json P/manifest.json``);
2. an output is a regular file or a folder: a link, a device node, a FIFO or a socket at the output path is refused
   (``atomic_write_bytes`` refuses them too), never silently replaced by a regular file;
3. a folder that is replaced as a whole holds only files the command itself writes (a folder with other files in it
   is refused, nothing is deleted), and an output file never lands on a name that another output folder of the same
   command writes;
4. two outputs of one command are never the same path.

A failed write (``ENOSPC``, ``EIO``) raises ``OSError``; the command lines turn it into one line and a non-zero exit.
"""

from __future__ import annotations

import os
import secrets
import stat
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no advisory locks, the temporary is only renamed
    fcntl = None

__all__ = ["atomic_write_bytes", "atomic_write_text", "make_private_name", "Output", "UnsafeOutputError",
           "check_outputs", "check_writable_target"]

#: Characters of the random part of a temporary's name (8 of them, as ``tempfile`` does).
_NAME_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789_"


class UnsafeOutputError(ValueError):
    """An output path that would overwrite an input, a foreign file, a link or a device (the message says which)."""


def make_private_name(prefix: str, suffix: str = "") -> str:
    """``<prefix>XXXXXXXX<suffix>`` with 8 random characters of ``[a-z0-9_]`` (the pattern cleaners look for)."""
    return prefix + "".join(secrets.choice(_NAME_CHARS) for _ in range(8)) + suffix


def _kind(mode: int) -> str | None:
    """What a non-regular, non-folder file is, or ``None`` for a regular file or a folder."""
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return None


def check_writable_target(path: str | os.PathLike, *, option: str = "output", folder: bool = False) -> None:
    """Refuse an output path that is a link, a device, a pipe or a socket (or a folder where a file is expected, a
    file where a folder is expected): writing there would replace it by a regular file or write into something that
    is not the user's file."""
    path = Path(path)
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    kind = _kind(mode)
    if kind is not None:
        target = f" to {os.readlink(path)}" if stat.S_ISLNK(mode) else ""
        raise UnsafeOutputError(f"{option} {path}: is {kind}{target}, not a regular "
                                f"{'folder' if folder else 'file'}; name a plain path instead (nothing was written)")
    if folder and not stat.S_ISDIR(mode):
        raise UnsafeOutputError(f"{option} {path}: is a file, expected a folder")
    if not folder and stat.S_ISDIR(mode):
        raise UnsafeOutputError(f"{option} {path}: is a folder, expected a file path")


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically (parent folders are created).

    Refuses (:class:`UnsafeOutputError`) a ``path`` that is a link, a device, a pipe or a socket. A failed write
    (a full disk) raises ``OSError`` and leaves ``path`` as it was.
    """
    path = Path(path)
    check_writable_target(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        tmp = path.parent / make_private_name(f".{path.name}.", ".tmp")
        try:
            # 0o666 minus the umask, applied by the kernel: what a plain open() gives, without reading the umask.
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
            break
        except FileExistsError:  # pragma: no cover - 37**8 names
            continue
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
            if fcntl is not None:
                os.replace(tmp, path)  # still locked: a cleaner never sees an unlocked temporary of a live writer
        if fcntl is None:  # pragma: no cover - Windows cannot rename an open file
            os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Replace ``path`` with ``text`` (UTF-8) atomically."""
    atomic_write_bytes(path, text.encode("utf-8"))


@dataclass(frozen=True)
class Output:
    """One output of a command.

    ``option`` names it in messages (``--json``). ``folder``: the command writes files inside ``path`` (``owns``
    says which relative paths are its own, e.g. ``*.parquet``); ``replaces``: the folder is replaced as a whole, so
    it may hold nothing but files the command writes (``owns``).
    """

    option: str
    path: Path
    folder: bool = False
    replaces: bool = False
    owns: Callable[[Path], bool] | None = None


def _resolved(path: Path) -> Path:
    return Path(os.path.realpath(os.path.expanduser(path)))


def _inside(child: Path, parent: Path) -> bool:
    return child == parent or parent in child.parents


def _files(folder: Path) -> Iterable[Path]:
    for root, dirs, names in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith(".")]  # hidden folders: locks and temporaries of the command
        for name in names:
            if not name.startswith("."):
                yield Path(root, name).relative_to(folder)


def _check_file(output: Output, inputs: Sequence[tuple[str, Path]]) -> None:
    check_writable_target(output.path, option=output.option)
    target = _resolved(output.path)
    for option, source in inputs:
        real = _resolved(source)
        if target == real:
            raise UnsafeOutputError(f"{output.option} {output.path}: is the input {option} {source}; writing it "
                                    "would overwrite the input (nothing was written)")
        if real.is_dir() and target.parent != target and real in target.parents and target.exists():
            raise UnsafeOutputError(f"{output.option} {output.path}: is a file of the input {option} {source}; "
                                    "writing it would overwrite the input (nothing was written)")


def _owned_inputs(output: Output, inputs: Sequence[tuple[str, Path]]) -> None:
    """Refuse an input (a file, or a file of an input folder) that lies inside ``output``'s folder under a name the
    command writes there (``output.owns``)."""
    if output.owns is None:
        return
    target = _resolved(output.path)
    for option, source in inputs:
        real = _resolved(source)
        if real.is_dir() and not _inside(real, target):  # an input folder around the output: its own files only
            continue
        files = [real / name for name in _files(real)] if real.is_dir() else [real]
        for path in files:
            if target in path.parents and output.owns(path.relative_to(target)):
                raise UnsafeOutputError(f"{output.option} {output.path}: the command writes "
                                        f"{path.relative_to(target)} there, which is "
                                        f"{'the input' if path == real else 'a file of the input'} {option} "
                                        f"{source}; writing it would overwrite the input (nothing was written)")


def _check_folder(output: Output, inputs: Sequence[tuple[str, Path]]) -> None:
    if not output.replaces:  # files are written inside it: a link to a folder is fine, a link to a device is not
        real = _resolved(output.path)
        if real.exists():
            check_writable_target(real, option=f"{output.option} {output.path} ->", folder=True)
        _owned_inputs(output, inputs)
        return
    check_writable_target(output.path, option=output.option, folder=True)
    target = _resolved(output.path)
    for option, source in inputs:
        real = _resolved(source)
        if _inside(real, target) or _inside(target, real) and real.is_file():
            raise UnsafeOutputError(f"{output.option} {output.path}: holds the input {option} {source}; the folder is "
                                    "replaced as a whole, which would delete the input (nothing was written)")
    if not target.is_dir():
        return
    foreign = [name for name in _files(target) if output.owns is None or not output.owns(name)]
    if foreign:
        shown = ", ".join(str(name) for name in foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3
                                                               else "")
        raise UnsafeOutputError(f"{output.option} {output.path}: holds {len(foreign)} file(s) this command did not "
                                f"write ({shown}); it replaces the folder as a whole, so name a new or empty folder "
                                "(nothing was deleted)")


def check_outputs(outputs: Sequence[Output], *, inputs: Sequence[tuple[str, str | os.PathLike]] = ()) -> None:
    """Apply the output rules (module docstring) to ``outputs`` against ``inputs`` (``(option, path)`` pairs; paths
    that are not local files or folders, such as hub ids, are ignored). Raises :class:`UnsafeOutputError` (a
    ``ValueError``) with a one-line reason before anything is written."""
    local = [(option, Path(os.path.expanduser(path))) for option, path in inputs
             if path not in (None, "-") and os.path.lexists(os.path.expanduser(path))]
    seen: dict[Path, str] = {}
    for output in outputs:
        (_check_folder if output.folder else _check_file)(output, local)
        target = _resolved(output.path)
        if target in seen:
            raise UnsafeOutputError(f"{output.option} {output.path}: is also {seen[target]}; give each output its own "
                                    "path")
        seen[target] = output.option
    for output in outputs:
        if output.folder:
            continue
        target = _resolved(output.path)
        for folder in outputs:
            if not folder.folder:
                continue
            root = _resolved(folder.path)
            if root in target.parents and (folder.replaces or folder.owns is None
                                           or folder.owns(target.relative_to(root))):
                raise UnsafeOutputError(f"{output.option} {output.path}: is a file that {folder.option} "
                                        f"{folder.path} writes; put it outside that folder")

