"""``much-leaderboard archive PUBLIC PRIVATE --out submission.zip``: one submission covering the public and the
private rows of a board with a hidden split (docs/leaderboard.md#hidden-split).

A submitter computes a method's signals on the public data and on the withheld split (``much run --source ...
--out DIR`` twice, or their own code writing MUCH-signals files), then this command writes the archive the board
takes: each signal file holds both folders' values (a signal of one folder only is refused: the board scores every
signal on the public split, and a private split scored on some signals only is a subset the submitter chose), the
per-sample metadata of both, the public folder's signal-level metadata, ``timings.json``, ``hardware.json`` and
``submission.json`` (the costs and the method are those measured on the public rows). The two folders must not share
a ``generation_id``. Nothing is uploaded; the archive is read back with the board's own reader
(:func:`much_metric.signals.read_archive`) before it is kept.
"""

from __future__ import annotations

import io
import tempfile
import zipfile
from pathlib import Path

__all__ = ["write_submission_archive"]

#: Files of a MUCH-signals folder copied from the public folder as they are.
_COPIED = ("timings.json", "hardware.json", "submission.json")
_SUFFIXES = (".parquet", ".jsonl")


def _signal_files(folder: Path, flag: str) -> dict[str, Path]:
    if not folder.is_dir():
        raise ValueError(f"{flag} {folder}: not a folder (a MUCH-signals folder: much run --out DIR)")
    files = {p.stem: p for p in sorted(folder.iterdir())
             if p.suffix.lower() in _SUFFIXES and not p.name.startswith(".")}
    if not files:
        raise ValueError(f"{flag} {folder}: no .parquet or .jsonl signal file")
    return files


def _merged_file(public: Path, private: Path, target: Path) -> set[str]:
    """``target``: the records and per-sample metadata of both files, the public file's signal-level metadata;
    returns the private file's generation_ids."""
    from much_metric.signals import (
        add_sample_metadata,
        read_sample_metadata,
        read_signal_metadata,
        read_signals,
        write_signal_metadata,
        write_signals,
    )

    first, second = read_signals(public), read_signals(private)
    if set(first) != set(second):
        raise ValueError(f"{public} holds signal(s) {sorted(first)}, {private} {sorted(second)}: one file per signal "
                         "with the same signals on both splits")
    shared = {gid for name in first for gid in set(first[name]) & set(second.get(name, {}))}
    if shared:
        raise ValueError(f"{public} and {private} share {len(shared)} generation_id(s) (e.g. {sorted(shared)[0]!r}): "
                         "give the public split's folder and the private split's folder")
    write_signals(target, {name: {**first[name], **second[name]} for name in first})
    samples = {**read_sample_metadata(public), **read_sample_metadata(private)}
    if samples:
        add_sample_metadata(target, samples)
    signal_level = read_signal_metadata(public)
    if signal_level:
        write_signal_metadata(target, signal_level)
    return {gid for per_sample in second.values() for gid in per_sample}


def write_submission_archive(public: str | Path, private: str | Path, out: str | Path) -> dict[str, int]:
    """Write the archive (module docstring) to ``out``; returns ``{signal file stem: private samples}``. Raises
    ``ValueError`` (one line naming the folder or file) for folders that do not make one submission."""
    from much_metric.fileio import atomic_write_bytes
    from much_metric.signals import read_archive

    public, private, out = Path(public), Path(private), Path(out)
    if out.suffix.lower() != ".zip":
        raise ValueError(f"--out {out}: the archive's name must end in .zip")
    mine, theirs = _signal_files(public, "PUBLIC"), _signal_files(private, "PRIVATE")
    if set(mine) != set(theirs):
        only = sorted(set(mine) ^ set(theirs))
        raise ValueError(f"signal file(s) {only} in one folder only ({public}: {sorted(mine)}; {private}: "
                         f"{sorted(theirs)}): compute every signal on both splits")
    counts = {}
    buffer = io.BytesIO()
    with tempfile.TemporaryDirectory() as scratch, zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for stem, path in mine.items():
            target = Path(scratch) / path.name
            counts[stem] = len(_merged_file(path, theirs[stem], target))
            archive.write(target, path.name)
        for name in _COPIED:
            if (public / name).is_file():
                archive.write(public / name, name)
    data = buffer.getvalue()
    read_archive(data)  # the board's own reader: an archive it would refuse is never written
    atomic_write_bytes(out, data)
    return counts
