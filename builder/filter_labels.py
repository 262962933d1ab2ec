"""Label records entering ``filter`` and ``export``: the judges' ``labels.<judge>.jsonl`` and the annotators'
``human.<annotator>.jsonl``, read once and checked where they enter.

A label file is refused (:class:`builder.errors.BuilderError`, exit 2), naming the file, the ``generation_id`` and
the field, when

* its name gives an empty judge or annotator (``labels..jsonl``);
* a record is not an object with a non-empty string ``generation_id``;
* its ``labels`` is missing, ``null``, not a non-empty list, or holds anything but the integers -1 (hallucinated)
  and +1 (``0``, ``7``, ``true``, ``1.0`` and ``null`` are refused: a judge or annotator that produced them is broken,
  and reading them as a label would move a claim between classes in silence);
* two records name one ``generation_id`` (one record per row and judge: which of two verdicts is the judge's cannot be
  told, so neither is kept);
* a judge's file exists but holds no record (``required``: an ``annotate`` whose every call failed leaves one; read as
  "no labels" it would trash every row as ``missing_labels``, a bad input reported as a failed run);
* a record names a ``generation_id`` that is not among the rows (``rows``: the segmented generations). ``annotate``,
  ``import-mushroom`` and ``human`` only label segmented rows, so such a record is a label file of another run or of
  rows since removed: dropping it in silence would hide that the file and the rows do not belong together.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any

from builder.errors import BuilderError
from builder.store import read_store
from much_dataset.schema import GENERATION_ID, LABELS

__all__ = ["LABEL_VALUES", "label_files", "read_label_records"]

#: The only label values a label file may hold: -1 hallucinated (the positive class), +1 supported.
LABEL_VALUES = (-1, 1)


def label_files(out: Path, *, prefix: str = "labels") -> dict[str, Path]:
    """``key -> <prefix>.<key>.jsonl`` in ``out`` (failure files excluded), sorted by key; a file whose key is empty
    (``labels..jsonl``) is refused."""
    found = {}
    for path in sorted(Path(out).glob(f"{prefix}.*.jsonl")):
        if path.name.endswith(".failures.jsonl"):
            continue
        key = path.name.removeprefix(f"{prefix}.").removesuffix(".jsonl")
        if not key.strip():
            raise BuilderError(f"{path}: a label file needs a non-empty name between '{prefix}.' and '.jsonl' (the "
                               "judge or annotator it holds the labels of); rename it")
        found[key] = path
    return found


def _check_labels(path: Path, gid: str, values: Any) -> None:
    where = f"{path}: generation_id={gid!r}, field {LABELS!r}"
    if values is None:
        raise BuilderError(f"{where}: null; expected a list of labels -1 (hallucinated) or +1")
    if not isinstance(values, list) or not values:
        raise BuilderError(f"{where}: expected a non-empty list of labels -1 or +1, got {type(values).__name__}")
    for position, value in enumerate(values):
        if isinstance(value, bool) or not isinstance(value, int) or value not in LABEL_VALUES:
            raise BuilderError(f"{where}, claim {position}: {value!r} is not a label; labels are -1 (hallucinated) "
                               "or +1")


#: How many unknown generation_ids a refusal shows (the count is always given).
_SHOWN_IDS = 3


def _owner(path: Path) -> str:
    """``judge 'KEY'`` or ``annotator 'KEY'``: whose labels ``labels.KEY.jsonl`` / ``human.KEY.jsonl`` holds."""
    prefix, _, rest = path.name.partition(".")
    return f"{'annotator' if prefix == 'human' else 'judge'} {rest.removesuffix('.jsonl')!r}"


def _check_known(path: Path, records: dict[str, Any], rows: Collection[str]) -> None:
    unknown = sorted(gid for gid in records if gid not in rows)
    if not unknown:
        return
    shown = ", ".join(repr(gid) for gid in unknown[:_SHOWN_IDS])
    more = f" and {len(unknown) - _SHOWN_IDS} more" if len(unknown) > _SHOWN_IDS else ""
    raise BuilderError(f"{path}: {len(unknown)} record(s) of {_owner(path)} name a generation_id that is not among the "
                       f"{len(rows)} segmented rows (segments.jsonl): {shown}{more}; a label file of another run or of "
                       "rows since removed: remove those records (or the file) and run again")


def read_label_records(path: Path, *, rows: Collection[str] | None = None,
                       required: bool = False) -> dict[str, dict[str, Any]]:
    """The records of one label file by ``generation_id``, each checked (module docstring); an absent file has
    none. ``rows``: the generation_ids the records must be among; ``required``: an existing file must hold a
    record."""
    path = Path(path)
    records: dict[str, dict[str, Any]] = {}
    for number, record in enumerate(read_store(path), start=1):
        gid = record.get(GENERATION_ID) if isinstance(record, dict) else None
        if not isinstance(gid, str) or not gid:
            raise BuilderError(f"{path}: record {number}: field {GENERATION_ID!r} must be a non-empty string, got "
                               f"{gid!r}")
        _check_labels(path, gid, record.get(LABELS))
        if gid in records:
            who = path.name.partition(".")[2].removesuffix(".jsonl")
            raise BuilderError(f"{path}: generation_id={gid!r} has two records (one per row and judge or annotator: "
                               f"{who!r}); keep the right one and remove the other")
        records[gid] = record
    if required and not records and path.is_file():
        failures = path.with_name(path.name.removesuffix(".jsonl") + ".failures.jsonl")
        why = f" (its failures: {failures.name})" if failures.is_file() else ""
        raise BuilderError(f"{path}: no label record of {_owner(path)}{why}; rerun `python -m builder annotate` for "
                           "that judge, or remove the file to leave the judge out")
    if rows is not None:
        _check_known(path, records, rows)
    return records
