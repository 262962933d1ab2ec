"""Label files: the labels of a split kept apart from its rows (a hidden split's, or another label source's).

A split whose labels are withheld is published without its label columns (:data:`much_dataset.schema.LABEL_COLUMNS`);
its labels go to a *label file* that only the leaderboard server reads (``much-leaderboard serve --private-labels``).
The same format carries an alternative *label source* of published rows (the embedded sample's soft Mu-SHROOM
labels, ``much_dataset/sample/label_sources/soft.json``), for the board's rank correlation between label sources.

Format ``much-labels/1``, one JSON object (UTF-8)::

    {"format": "much-labels/1", "name": "private", "description": "...",
     "rows_sha256": "<rows_fingerprint of the rows these labels belong to>",
     "columns": ["labels", "human_labels_0", "human_labels_1"],
     "n_rows": 303, "n_claims": 5480,
     "rows": {"<generation_id>": {"labels": [1, -1, ...], "human_labels_0": [0], ...}, ...}}

and next to it ``<file>.sha256``, one line ``<sha256 of the file's bytes>  <file name>`` (the ``sha256sum`` format,
so ``sha256sum -c`` checks it too). :func:`read_label_file` checks the digest, the format, every row's labels (-1 /
+1, or the no-human-label sentinel ``[0]`` in ``human_labels_*``) and, given the rows, that they are the ones the file
was made for (same ``generation_id`` set, same tokens and claims: :func:`rows_fingerprint`) with one label per claim.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from much_dataset import schema

__all__ = ["FORMAT", "LabelFile", "LabelFileError", "rows_fingerprint", "write_label_file", "read_label_file",
           "checksum_path", "check_outside_published"]

FORMAT = "much-labels/1"
_SUFFIX = ".sha256"


class LabelFileError(ValueError):
    """A label file cannot be used: unreadable, tampered with (digest), malformed, or made for other rows. The
    message names the file and what is wrong, never a label value."""


@dataclass(frozen=True)
class LabelFile:
    """A read label file: ``rows`` maps each ``generation_id`` to its label columns (lists of ints)."""

    name: str
    rows: Mapping[str, Mapping[str, list[int]]] = field(repr=False)
    columns: tuple[str, ...] = (schema.LABELS,)
    rows_sha256: str = ""
    description: str = ""
    sha256: str = ""

    @property
    def n_claims(self) -> int:
        """Claims the file labels (EOS claims included): the length of every row's ``labels``."""
        return sum(len(row[schema.LABELS]) for row in self.rows.values())


def checksum_path(path: str | Path) -> Path:
    """Where the digest of the label file ``path`` is kept: ``<path>.sha256``."""
    path = Path(path)
    return path.with_name(path.name + _SUFFIX)


def check_outside_published(path: str | Path, folder: str | Path) -> None:
    """A label file must not lie inside the folder of the rows it labels when that folder is published (``builder
    push`` uploads the whole folder, a hub mirror or a Space serves it): :class:`LabelFileError` naming both. The one
    rule of ``builder export --withhold-labels`` and ``much-leaderboard serve --private-labels``. Both the path as
    written and the file it resolves to are checked: a link inside the folder is published with the file's bytes
    (an upload follows it), and a link to the folder puts the file there."""
    places = {Path(os.path.abspath(path)), Path(path).resolve()}
    folders = {Path(os.path.abspath(folder)), Path(folder).resolve()}
    if any(place.is_relative_to(root) for place in places for root in folders):
        raise LabelFileError(f"{path} is inside the published folder {folder}: the labels would be published with "
                             "the rows; keep them elsewhere (default <out>/private/labels.json)")


def rows_fingerprint(rows: Any) -> str:
    """SHA-256 over every row's ``generation_id``, ``output_tokens`` and ``token_chunks``, in ``generation_id``
    order: what ties a label file to the rows it labels (a ``datasets.Dataset`` or a sequence of row mappings;
    labels are not read)."""
    columns = (schema.GENERATION_ID, schema.OUTPUT_TOKENS, schema.TOKEN_CHUNKS)
    if hasattr(rows, "select_columns"):
        data = rows.select_columns(list(columns)).to_dict()
        records = list(zip(*(data[name] for name in columns), strict=True))
    else:
        records = [tuple(row[name] for name in columns) for row in rows]
    digest = hashlib.sha256()
    for gid, tokens, chunks in sorted(records, key=lambda record: str(record[0])):
        digest.update(json.dumps([str(gid), [int(t) for t in tokens], [[int(i) for i in chunk] for chunk in chunks]],
                                 separators=(",", ":")).encode("utf-8"))
        digest.update(b"\n")
    return digest.hexdigest()


def _check_row(path: Path, gid: str, row: Any, columns: Sequence[str], n_chunks: int | None) -> dict[str, list[int]]:
    if not isinstance(row, Mapping) or set(row) != set(columns):
        raise LabelFileError(f"{path}: generation_id={gid!r}: expected the columns {list(columns)}")
    out = {}
    for name in columns:
        values = row[name]
        if not isinstance(values, list) or not values or not all(type(v) is int for v in values):
            raise LabelFileError(f"{path}: generation_id={gid!r}, column {name!r}: not a non-empty list of integers")
        if name != schema.LABELS and values == list(schema.NO_HUMAN_LABEL):
            out[name] = values
            continue
        if not set(values) <= schema.LABEL_VALUES:
            raise LabelFileError(f"{path}: generation_id={gid!r}, column {name!r}: labels must be "
                                 f"{schema.HALLUCINATED} or {schema.CORRECT}")
        if n_chunks is not None and len(values) != n_chunks:
            raise LabelFileError(f"{path}: generation_id={gid!r}, column {name!r}: {len(values)} labels for "
                                 f"{n_chunks} claims of the rows")
        out[name] = values
    return out


def write_label_file(path: str | Path, label_file: LabelFile, *, mode: int = 0o600) -> str:
    """Write ``label_file`` (its ``rows`` map each ``generation_id`` to ``{column: labels}`` for every one of its
    ``columns``) and its ``.sha256``, each atomically (a temporary file renamed into place); returns the digest.
    ``mode``: the files' permissions (default owner-only: a hidden split's labels; 0o644 for a published label
    source)."""
    path = Path(path)
    columns = tuple(label_file.columns)
    if not columns or not set(columns) <= set(schema.LABEL_COLUMNS) or schema.LABELS not in columns:
        raise ValueError(f"columns must include 'labels' and be among {list(schema.LABEL_COLUMNS)}, got {columns}")
    rows = {str(gid): _check_row(path, str(gid), {k: [int(v) for v in row[k]] for k in row}, columns, None)
            for gid, row in sorted(label_file.rows.items())}
    document = {"format": FORMAT, "name": label_file.name, "description": label_file.description,
                "rows_sha256": label_file.rows_sha256, "columns": list(columns), "n_rows": len(rows),
                "n_claims": sum(len(row[schema.LABELS]) for row in rows.values()), "rows": rows}
    data = (json.dumps(document, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")
    digest = hashlib.sha256(data).hexdigest()
    path.parent.mkdir(parents=True, exist_ok=True)
    _atomic_write(path, data, mode)
    _atomic_write(checksum_path(path), f"{digest}  {path.name}\n".encode(), mode)
    return digest


def _atomic_write(path: Path, data: bytes, mode: int) -> None:
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.chmod(temporary, mode)
        with os.fdopen(handle, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _checked_digest(path: Path, data: bytes, require_checksum: bool) -> str:
    digest = hashlib.sha256(data).hexdigest()
    sums = checksum_path(path)
    if sums.is_file():
        if sums.read_text(encoding="utf-8").split()[:1] != [digest]:
            raise LabelFileError(f"{path}: its SHA-256 is not the one in {sums.name} (changed or damaged since it was "
                                 "written; export it again)")
    elif require_checksum:
        raise LabelFileError(f"{path}: no {sums.name} next to it (the export writes both; copy both to the server)")
    return digest


def _chunks_of(path: Path, rows: Any, document: Mapping[str, Any], entries: Mapping[str, Any]) -> dict[str, int]:
    """``{generation_id: number of claims}`` of ``rows``, after checking they are the rows the file was made for."""
    fingerprint = rows_fingerprint(rows)
    if fingerprint != document.get("rows_sha256"):
        raise LabelFileError(f"{path}: made for other rows (rows_sha256 {str(document.get('rows_sha256'))[:12]}... "
                             f"!= {fingerprint[:12]}... of the rows given): pair it with the split it was exported "
                             "with")
    table = rows if hasattr(rows, "column_names") else None
    ids = table[schema.GENERATION_ID] if table is not None else [r[schema.GENERATION_ID] for r in rows]
    chunk_lists = table[schema.TOKEN_CHUNKS] if table is not None else [r[schema.TOKEN_CHUNKS] for r in rows]
    chunks = {str(gid): len(c) for gid, c in zip(ids, chunk_lists, strict=True)}
    if set(chunks) != set(entries):
        raise LabelFileError(f"{path}: holds labels for {len(entries)} generation_id(s), the rows are {len(chunks)}; "
                             "they must be the same set")
    return chunks


def read_label_file(path: str | Path, *, rows: Any = None, require_checksum: bool = True) -> LabelFile:
    """Read and check a label file (module docstring). ``rows``: the rows it must belong to (a dataset or row
    mappings with ``generation_id``, ``output_tokens``, ``token_chunks``): same fingerprint, one label per claim.
    ``require_checksum``: the ``.sha256`` file must exist and match (default; a label source shipped inside a
    package may pass False, its digest is then only checked when present). Raises :class:`LabelFileError`."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as error:
        raise LabelFileError(f"{path}: cannot read the label file ({error.strerror or error})") from None
    digest = _checked_digest(path, data, require_checksum)
    try:
        document = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise LabelFileError(f"{path}: not a JSON label file") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise LabelFileError(f"{path}: not a {FORMAT} label file")
    columns = document.get("columns")
    if not isinstance(columns, list) or schema.LABELS not in columns or not set(columns) <= set(schema.LABEL_COLUMNS):
        raise LabelFileError(f"{path}: 'columns' must include 'labels' and be among {list(schema.LABEL_COLUMNS)}")
    entries = document.get("rows")
    if not isinstance(entries, dict) or not entries:
        raise LabelFileError(f"{path}: 'rows' must be a non-empty mapping generation_id -> labels")
    chunks = None if rows is None else _chunks_of(path, rows, document, entries)
    checked = {str(gid): _check_row(path, str(gid), row, columns, None if chunks is None else chunks[str(gid)])
               for gid, row in entries.items()}
    return LabelFile(name=str(document.get("name") or path.stem), rows=checked, columns=tuple(columns),
                     rows_sha256=str(document.get("rows_sha256") or ""),
                     description=str(document.get("description") or ""), sha256=digest)
