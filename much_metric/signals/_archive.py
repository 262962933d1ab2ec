"""The submission format: reading an untrusted archive (a zip of a MUCH-signals folder) without trusting anything
in it. The leaderboard server (package ``much_leaderboard``) stores and re-scores what this reader accepts.

The archive is read in memory, entry by entry, with every limit checked before the bytes are used:

* the archive's size (:attr:`ArchiveLimits.max_archive_bytes`), its number of entries, each entry's and the total
  uncompressed size, each entry's compression ratio (zip bombs) -- the sizes are counted while decompressing, the
  header's claims are not trusted;
* names: UTF-8 only, no absolute path, no drive letter, no ``..``, no backslash, no control character, no duplicate;
  symbolic links (zip entries whose Unix mode is a link), encrypted entries and any file other than ``*.parquet``,
  ``*.jsonl``, ``timings.json``, ``hardware.json``, ``submission.json`` and ``README.md`` are refused (no pickle, no
  code: nothing in a submission is ever imported, unpickled or executed);
* internals packs are never uploaded: a ``*.safetensors`` file or a ``manifest.json`` of an internals pack
  (``"format": "much-internals/..."``) is refused with a message saying so (the signals computed from a pack are
  submitted instead);
* ``submission.json`` (optional) says what the method needs beyond the probabilities: ``{"internals":
  ["attention", "hidden_states"]}`` (a subset of :data:`SUBMISSION_INTERNALS`; absent or empty: probabilities only),
  read into :attr:`ParsedSubmission.internals`; and what each signal cost, as the submitter declares it:
  ``{"cost": {"<signal>": {"seconds_per_claim": 0.002, "machine": "1 x A100", "note": "5 samples per answer"}}}``
  (:class:`much_metric.signals.DeclaredCost`, read into :attr:`ParsedSubmission.costs`; the server cannot measure an
  upload, so the board labels it declared);
* files the board does not use (``README.md``, hidden files such as ``.DS_Store``, ``__MACOSX/`` forks) are kept in
  the stored archive, so each is bounded too (:attr:`ArchiveLimits.max_unused_bytes`, by its compressed and uncompressed
  size; a README is also UTF-8 text);
* JSONL: UTF-8, each line at most :attr:`ArchiveLimits.max_line_bytes`; JSON files small, UTF-8, plain objects;
  ``timings.json`` names only signals the archive holds;
* parquet: opened from memory with pyarrow, footer and key-value metadata size-limited, the schema must be exactly
  ``generation_id: string``, optional ``signal_name: string``, ``values: list<float|double>`` (no nested or
  extension types, no metadata key but MUCH's per-sample ``much.samples`` and signal-level ``much.signal``), row count
  and row groups bounded.

Files that pass are written under their own (checked) base names to a fresh temporary folder and read with the
toolkit's own signal-file reader, which checks every record (non-empty, finite values); a (generation_id,
signal_name) pair given twice is refused. The metadata of a learned detector's signal (keys
``training_generation_ids`` and ``detector``, see :attr:`ParsedSubmission.learned`), per sample or for the whole
signal as ``much run --signals learned:DIR --out OUT`` writes it, is read and checked too.
"""

from __future__ import annotations

import dataclasses
import io
import json
import re
import stat
import zipfile
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from much_metric.signals._archive_limits import DEFAULT_LIMITS, SIGNAL_NAME_PATTERN, ArchiveLimits, SubmissionRejected
from much_metric.signals._archive_signals import parse_signal_files

__all__ = ["ArchiveLimits", "ParsedSubmission", "SubmissionRejected", "read_archive", "SIGNAL_NAME_PATTERN",
           "SUBMISSION_INTERNALS"]

_SIGNAL_SUFFIXES = (".parquet", ".jsonl")
_SUBMISSION_FILE = "submission.json"
_JSON_FILES = ("timings.json", "hardware.json", _SUBMISSION_FILE)
#: What a submission may declare it needs of the model's internals (``submission.json``'s ``"internals"``).
SUBMISSION_INTERNALS = ("attention", "hidden_states")
_PACK_REFUSAL = ("internals packs (attention weights, hidden states) are never uploaded to the leaderboard: submit "
                 "the signal files computed from the pack (`much run --internals PACK --out FOLDER`) and declare what "
                 'the method needs in submission.json ({"internals": ["attention", "hidden_states"]})')
_PACK_FORMAT = re.compile(rb'"format"\s*:\s*"much-internals')
#: Parquet key-value metadata a signal file may carry: pyarrow's and pandas' own, and MUCH's per-sample
#: (``much.samples``) and signal-level (``much.signal``, a learned detector's training rows) metadata.
_ALLOWED_METADATA = {b"ARROW:schema", b"pandas", b"much.samples", b"much.signal"}


@dataclass
class ParsedSubmission:
    """What a valid archive holds: ``signals`` ``{signal_name: {generation_id: float64 values}}``, the timings
    (``{signal_name: {"seconds": float, ...}}``), the free-form hardware description, and ``learned``: for each
    signal a learned detector wrote, ``{"detector": {"kind", "protocol", "fold"}, "training_generation_ids":
    frozenset}`` (the rows it was trained and validated on, from the per-sample metadata), and ``internals``: what
    the method declares it needs of the model's internals (``submission.json``)."""

    signals: dict[str, dict[str, Any]]
    timings: dict[str, dict[str, Any]]
    hardware: dict[str, Any]
    learned: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    #: What the method needs of the model's internals (``submission.json``), in :data:`SUBMISSION_INTERNALS` order;
    #: empty: probabilities only.
    internals: tuple[str, ...] = ()
    #: Signal name -> what it cost: a :class:`~much_metric.signals.DeclaredCost` (``submission.json``'s ``"cost"``)
    #: or, when the submission declares none, the :class:`~much_metric.signals.SignalCost` its file records (``much
    #: run --out``): both the submitter's word; the server measures only what it computes itself.
    costs: dict[str, Any] = dataclasses.field(default_factory=dict)


def _check_name(info: zipfile.ZipInfo) -> PurePosixPath:
    raw = info.filename
    if not info.flag_bits & 0x800 and not raw.isascii():
        # zipfile decodes names without the UTF-8 flag as cp437: such a name was not written as UTF-8
        raise SubmissionRejected(f"archive entry {raw!r}: file names must be UTF-8 (set the zip's UTF-8 flag)")
    if any(ord(c) < 32 or c == "\x7f" for c in raw):
        raise SubmissionRejected(f"archive entry {raw!r}: control character in the file name")
    if "\\" in raw:
        raise SubmissionRejected(f"archive entry {raw!r}: backslash in the file name")
    if raw.startswith("/") or re.match(r"^[A-Za-z]:", raw):
        raise SubmissionRejected(f"archive entry {raw!r}: absolute path")
    path = PurePosixPath(raw)
    if any(part in ("..", ".") for part in path.parts):
        raise SubmissionRejected(f"archive entry {raw!r}: path traversal ('..') in the file name")
    return path


def _is_link(info: zipfile.ZipInfo) -> bool:
    mode = info.external_attr >> 16
    return info.create_system == 3 and stat.S_ISLNK(mode)


def _read_entry(archive: zipfile.ZipFile, info: zipfile.ZipInfo, limits: ArchiveLimits, budget: int) -> bytes:
    cap = min(limits.max_entry_bytes, budget)
    if info.file_size > cap:
        raise SubmissionRejected(f"archive entry {info.filename!r}: {info.file_size:,} bytes uncompressed, more than "
                                 f"the limit of {cap:,}")
    if info.compress_size and info.file_size / info.compress_size > limits.max_ratio:
        raise SubmissionRejected(f"archive entry {info.filename!r}: compression ratio "
                                 f"{info.file_size / info.compress_size:.0f}:1 above {limits.max_ratio:.0f}:1 "
                                 "(zip bomb)")
    chunks, size = [], 0
    with archive.open(info) as handle:  # the header's sizes are checked above, the real ones here
        while chunk := handle.read(2**20):
            size += len(chunk)
            if size > cap or size > limits.max_ratio * max(info.compress_size, 1):
                raise SubmissionRejected(f"archive entry {info.filename!r}: decompresses past its declared size or "
                                         f"the ratio limit of {limits.max_ratio:.0f}:1 (zip bomb)")
            chunks.append(chunk)
    return b"".join(chunks)


def _check_jsonl(name: str, data: bytes, limits: ArchiveLimits) -> None:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise SubmissionRejected(f"{name}:{line}: not UTF-8 text ({error.reason})") from None
    start, line = 0, 1
    while start < len(data):
        end = data.find(b"\n", start)
        end = len(data) if end < 0 else end
        if end - start > limits.max_line_bytes:
            raise SubmissionRejected(f"{name}:{line}: line of {end - start:,} bytes, more than the limit of "
                                     f"{limits.max_line_bytes:,}")
        start, line = end + 1, line + 1


def _check_parquet(name: str, data: bytes, limits: ArchiveLimits) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    if len(data) < 12 or data[:4] != b"PAR1" or data[-4:] != b"PAR1":
        raise SubmissionRejected(f"{name}: not a parquet file (no PAR1 magic)")
    footer = int.from_bytes(data[-8:-4], "little")
    if footer > limits.max_footer_bytes or footer > len(data) - 8:
        raise SubmissionRejected(f"{name}: parquet footer of {footer:,} bytes (limit {limits.max_footer_bytes:,})")
    try:
        parquet = pq.ParquetFile(io.BytesIO(data))
        metadata, schema = parquet.metadata, parquet.schema_arrow
    except (pa.ArrowException, OSError, ValueError) as error:
        raise SubmissionRejected(f"{name}: not a readable parquet file ({error})") from None
    extra = schema.metadata or {}
    unknown = sorted(key.decode("utf-8", "replace") for key in extra if key not in _ALLOWED_METADATA)
    if unknown:
        raise SubmissionRejected(f"{name}: unexpected parquet metadata key(s) {unknown}")
    if sum(len(k) + len(v) for k, v in extra.items()) > limits.max_metadata_bytes:
        raise SubmissionRejected(f"{name}: parquet key-value metadata larger than {limits.max_metadata_bytes:,} bytes")
    if metadata.num_rows > limits.max_rows or metadata.num_row_groups > limits.max_row_groups:
        raise SubmissionRejected(f"{name}: {metadata.num_rows:,} rows in {metadata.num_row_groups:,} row groups "
                                 f"(limits {limits.max_rows:,} and {limits.max_row_groups:,})")
    expected = {"generation_id": "string", "signal_name": "string", "values": "list<float|double>"}
    fields = {field.name: field for field in schema}
    for field_name, field in fields.items():
        kind = field.type
        ok = (field_name in ("generation_id", "signal_name") and kind in (pa.string(), pa.large_string())) or (
            field_name == "values" and (pa.types.is_list(kind) or pa.types.is_large_list(kind))
            and kind.value_type in (pa.float32(), pa.float64()))
        if not ok or field.metadata:
            wanted = expected.get(field_name, "no such column")
            raise SubmissionRejected(f"{name}: column {field_name!r} has type {kind} (expected {wanted}; nested, "
                                     "extension and annotated types are refused)")
    missing = [key for key in ("generation_id", "values") if key not in fields]
    if missing:
        raise SubmissionRejected(f"{name}: parquet signal file lacks column(s) {missing}")


def _check_json(name: str, data: bytes, limits: ArchiveLimits) -> dict[str, Any]:
    if len(data) > limits.max_json_bytes:
        raise SubmissionRejected(f"{name}: {len(data):,} bytes, more than the limit of {limits.max_json_bytes:,}")
    try:
        value = json.loads(data.decode("utf-8"), parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    except UnicodeDecodeError as error:
        raise SubmissionRejected(f"{name}: not UTF-8 text ({error.reason})") from None
    except (ValueError, RecursionError) as error:
        raise SubmissionRejected(f"{name}: not valid JSON ({str(error)[:120]})") from None
    if not isinstance(value, dict):
        raise SubmissionRejected(f"{name}: must hold a JSON object")
    return value


def _check_timings(timings: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out = {}
    for signal, entry in timings.items():
        seconds = entry.get("seconds") if isinstance(entry, dict) else None
        if not isinstance(seconds, int | float) or isinstance(seconds, bool) or not 0 <= seconds < 1e9:
            raise SubmissionRejected(f"timings.json: {signal!r} needs a finite number of 'seconds' >= 0")
        out[str(signal)] = {"seconds": float(seconds)}
    return out


def _check_internals(value: dict[str, Any]) -> tuple[str, ...]:
    unknown = sorted(set(value) - {"internals", "cost"})
    if unknown:
        raise SubmissionRejected(f"{_SUBMISSION_FILE}: unknown key(s) {[k[:40] for k in unknown[:5]]} (it holds "
                                 '{"internals": [...], "cost": {...}})')
    declared = value.get("internals", [])
    if not isinstance(declared, list) or not all(isinstance(v, str) and v in SUBMISSION_INTERNALS for v in declared):
        raise SubmissionRejected(f'{_SUBMISSION_FILE}: "internals" must be a list among {list(SUBMISSION_INTERNALS)}')
    return tuple(kind for kind in SUBMISSION_INTERNALS if kind in declared)


def _declared_costs(value: dict[str, Any]) -> dict[str, Any]:
    """``submission.json``'s ``"cost"``: signal name -> :class:`~much_metric.signals.DeclaredCost`."""
    from much_metric.signals._cost import DeclaredCost

    declared = value.get("cost", {})
    if not isinstance(declared, dict):
        raise SubmissionRejected(f'{_SUBMISSION_FILE}: "cost" must be an object {{"<signal>": {{"seconds_per_claim": '
                                 "number, ...}}")
    costs = {}
    for signal, entry in declared.items():
        try:
            costs[str(signal)] = DeclaredCost.from_dict(entry)
        except ValueError as error:
            raise SubmissionRejected(f'{_SUBMISSION_FILE}: "cost" of {str(signal)[:80]!r}: {error}') from None
    return costs


def _refuse_pack(archive: zipfile.ZipFile, info: zipfile.ZipInfo, base: str, limits: ArchiveLimits) -> None:
    """An internals pack's shard or manifest: refused with the reason (never stored)."""
    if base.lower().endswith(".safetensors"):
        raise SubmissionRejected(f"archive entry {info.filename!r}: a safetensors file; {_PACK_REFUSAL}")
    if base == "manifest.json" and _PACK_FORMAT.search(_read_entry(archive, info, limits, limits.max_total_bytes)):
        raise SubmissionRejected(f"archive entry {info.filename!r}: the manifest of an internals pack; {_PACK_REFUSAL}")


def _check_unused(info: zipfile.ZipInfo, limits: ArchiveLimits) -> None:
    # a file the board keeps in the stored archive but never uses: bounded by its header sizes (it is never
    # decompressed; the compressed size bounds what is stored whatever the header claims uncompressed)
    size = max(info.file_size, info.compress_size)
    if size > limits.max_unused_bytes:
        raise SubmissionRejected(f"archive entry {info.filename!r}: {size:,} bytes; a file the leaderboard does not "
                                 f"use (README, hidden or macOS files) may hold at most {limits.max_unused_bytes:,}")


def _entries(archive: zipfile.ZipFile, limits: ArchiveLimits) -> dict[str, bytes]:
    infos = archive.infolist()
    if len(infos) > limits.max_entries:
        raise SubmissionRejected(f"the archive has {len(infos):,} entries, more than the limit of {limits.max_entries}")
    files: dict[str, bytes] = {}
    budget = limits.max_total_bytes
    for info in infos:
        path = _check_name(info)
        if _is_link(info):
            raise SubmissionRejected(f"archive entry {info.filename!r}: symbolic links are refused")
        if info.is_dir():
            continue
        if info.flag_bits & 0x1:
            raise SubmissionRejected(f"archive entry {info.filename!r}: encrypted entries are refused")
        _refuse_pack(archive, info, path.name, limits)
        if len(path.parts) > 2:
            raise SubmissionRejected(f"archive entry {info.filename!r}: put the files at the top of the archive or "
                                     "in one folder")
        base = path.name
        if base.startswith(".") or base in ("__MACOSX",) or path.parts[0] == "__MACOSX":
            _check_unused(info, limits)
            continue  # hidden files (.DS_Store) and macOS resource forks: bounded, never read
        if not (base.lower().endswith(_SIGNAL_SUFFIXES) or base in _JSON_FILES or base == "README.md"):
            raise SubmissionRejected(f"archive entry {info.filename!r}: unexpected file (a submission holds "
                                     "<signal>.parquet or .jsonl files, timings.json, hardware.json, submission.json "
                                     "and README.md; nothing else -- no pickle, no code)")
        if base in files:
            raise SubmissionRejected(f"archive entry {info.filename!r}: two files named {base!r}")
        if base == "README.md":
            _check_unused(info, limits)
        data = _read_entry(archive, info, limits, budget)
        budget -= len(data)
        files[base] = data
    if "README.md" in files:
        try:
            files["README.md"].decode("utf-8")
        except UnicodeDecodeError as error:
            raise SubmissionRejected(f"README.md: not UTF-8 text ({error.reason})") from None
    return files


def _check_declared_entries(data: bytes, limits: ArchiveLimits) -> None:
    end = data.rfind(b"PK\x05\x06", max(0, len(data) - 65_557))  # end of central directory (22 bytes + comment)
    if end < 0 or end + 22 > len(data):
        return  # not a zip: zipfile says so with its own message
    declared = int.from_bytes(data[end + 10:end + 12], "little")
    if declared != 0xFFFF and declared > limits.max_entries:  # 0xFFFF: zip64, counted after opening
        raise SubmissionRejected(f"the archive has {declared:,} entries, more than the limit of {limits.max_entries}")


def read_archive(data: bytes, *, limits: ArchiveLimits = DEFAULT_LIMITS) -> ParsedSubmission:
    """Validate and parse a submission archive (zip bytes).

    Raises
    ------
    SubmissionRejected
        With a message naming the entry (and line) and the rule it breaks. Nothing is written outside a temporary
        folder that is removed before returning.

    Examples
    --------
    A zip of one JSONL signal file (one record per sample: ``generation_id``, ``signal_name``, ``values``):

    >>> import io, json, zipfile
    >>> from much_metric.signals import SubmissionRejected, read_archive
    >>> records = [{"generation_id": "en-1", "signal_name": "mine", "values": [0.1, 0.9, 0.0]}]
    >>> buffer = io.BytesIO()
    >>> with zipfile.ZipFile(buffer, "w") as archive:
    ...     archive.writestr("mine.jsonl", "".join(json.dumps(r) + chr(10) for r in records))
    ...     archive.writestr("timings.json", json.dumps({"mine": {"seconds": 1.5}}))
    >>> parsed = read_archive(buffer.getvalue())
    >>> parsed.signals["mine"]["en-1"].tolist(), parsed.timings["mine"]["seconds"]
    ([0.1, 0.9, 0.0], 1.5)

    An entry that would land outside its folder is refused, with the reason:

    >>> attack = io.BytesIO()
    >>> with zipfile.ZipFile(attack, "w") as archive:
    ...     archive.writestr("../escape.jsonl", "{}")
    >>> try:
    ...     read_archive(attack.getvalue())
    ... except SubmissionRejected as error:
    ...     print(error)
    archive entry '../escape.jsonl': path traversal ('..') in the file name
    """
    if not isinstance(data, bytes | bytearray):
        raise TypeError(f"the archive must be bytes, got {type(data).__name__}")
    if len(data) > limits.max_archive_bytes:
        raise SubmissionRejected(f"the archive is {len(data):,} bytes, more than the limit of "
                                 f"{limits.max_archive_bytes:,}")
    _check_declared_entries(data, limits)  # before zipfile parses a central directory of any length
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, ValueError, OSError) as error:
        raise SubmissionRejected(f"not a zip archive ({error})") from None
    with archive:
        try:
            files = _entries(archive, limits)
        except (zipfile.BadZipFile, NotImplementedError, RuntimeError, EOFError, OSError) as error:
            raise SubmissionRejected(f"unreadable archive entry ({error})") from None
    signal_files = {name: blob for name, blob in files.items() if name.lower().endswith(_SIGNAL_SUFFIXES)}
    if not signal_files:
        raise SubmissionRejected("the archive holds no .parquet or .jsonl signal file")
    for name, blob in signal_files.items():
        stem = name.rsplit(".", 1)[0]
        if not SIGNAL_NAME_PATTERN.match(stem):
            raise SubmissionRejected(f"{name!r}: file names may use letters, digits and _ . + @ - (80 at most)")
        (_check_jsonl if name.lower().endswith(".jsonl") else _check_parquet)(name, blob, limits)
    timings = _check_timings(_check_json("timings.json", files["timings.json"], limits)) \
        if "timings.json" in files else {}
    hardware = _check_json("hardware.json", files["hardware.json"], limits) if "hardware.json" in files else {}
    submission = _check_json(_SUBMISSION_FILE, files[_SUBMISSION_FILE], limits) if _SUBMISSION_FILE in files else {}
    internals = _check_internals(submission)
    declared = _declared_costs(submission)
    signals, learned, recorded = parse_signal_files(signal_files, limits)
    for what, names in (("timings.json", timings), (f'{_SUBMISSION_FILE} "cost"', declared)):
        absent = sorted(set(names) - set(signals))
        if absent:
            raise SubmissionRejected(f"{what}: signal(s) {[a[:80] for a in absent[:5]]} are not in the archive "
                                     f"(it holds {sorted(signals)[:8]})")
    return ParsedSubmission(signals=signals, timings=timings, hardware=hardware, learned=learned,
                            internals=internals, costs={**recorded, **declared})
