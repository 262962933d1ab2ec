"""Withheld labels: the export of a hidden test split (``python -m builder export --withhold-labels``).

The published folder gets the rows with every column a detector reads and no label: exactly
:data:`much_dataset.schema.UNLABELLED_COLUMNS`, chosen by name (so no judge output, human annotation, agreement
statistic, filter reason or per-claim annotation, :data:`much_dataset.schema.LABEL_DERIVED_FIELDS`, can come along),
and a card that shows no label count. The labels (``labels``, ``human_labels_0``, ``human_labels_1`` of every
published row) go to a label file for the leaderboard server (:mod:`much_dataset.label_files`: JSON + ``.sha256``,
tied to the published rows by :func:`much_dataset.label_files.rows_fingerprint`), written outside the published
folder (default ``<out>/private/labels.json``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from builder.errors import BuilderError
from much_dataset import schema
from much_dataset.label_files import LabelFile, checksum_path, rows_fingerprint, write_label_file
from much_metric.fileio import Output

__all__ = ["DEFAULT_PRIVATE_LABELS", "withhold_labels", "private_labels_outputs", "write_private_labels",
           "withheld_card_body", "check_outside"]

#: Where the label file goes, under ``--out``, unless ``--private-labels`` says otherwise.
DEFAULT_PRIVATE_LABELS = Path("private") / "labels.json"

_NOTICE = """**Labels withheld: a hidden test split.** The rows carry every column a detector reads and no label:
`labels`, `human_labels_0` and `human_labels_1` are absent, and so is any count of hallucinated claims. The labels
stay on the server of the leaderboard that ranks detectors on this split (`much-leaderboard serve --private-labels`);
compute a detector's signals with `much run --source <this folder> --out PRIVATE` (or your own code), the same signals
on the board's public data into `PUBLIC`, and submit the one archive that `much-leaderboard archive PUBLIC PRIVATE
--out submission.zip` writes. The board shows only rounded metrics over the whole split, within daily quotas."""


def withhold_labels(rows: Mapping[str, Sequence[Mapping[str, Any]]], splits: Sequence[str]
                    ) -> tuple[dict[str, list[dict[str, Any]]], dict[str, dict[str, list[int]]]]:
    """``(public rows per split, labels per generation_id)`` of the rows of ``splits``: the public rows hold the
    :data:`~much_dataset.schema.UNLABELLED_COLUMNS` only, the labels every :data:`~much_dataset.schema.LABEL_COLUMNS`
    column."""
    public: dict[str, list[dict[str, Any]]] = {}
    labels: dict[str, dict[str, list[int]]] = {}
    for split in splits:
        public[split] = []
        for row in rows.get(split, ()):
            public[split].append({name: row[name] for name in schema.UNLABELLED_COLUMNS if name in row})
            labels[str(row[schema.GENERATION_ID])] = {name: [int(v) for v in row[name]]
                                                      for name in schema.LABEL_COLUMNS}
    return public, labels


def private_labels_outputs(path: Path) -> list[Output]:
    """The label file and its digest as outputs of the step (``--private-labels``): the folder they are written
    in (it may be inside ``--out``, an input folder, so a rerun replaces them), and a refusal of any existing file
    at either path that is not an earlier label file (such as one of the step's inputs)."""
    path = Path(path)
    for target in (path, checksum_path(path)):
        if target.is_file() and not _earlier_label_file(target):
            raise BuilderError(f"--private-labels {path}: {target} exists and is not a label file this step wrote; "
                               "name another path (nothing was written)")
    names = {path.name, checksum_path(path).name}
    return [Output("--private-labels", path.parent, folder=True, owns=lambda name: name.as_posix() in names)]


def _earlier_label_file(target: Path) -> bool:
    with open(target, "rb") as handle:
        head = handle.read(256)
    if target.name.endswith(".sha256"):
        return len(head.split()) == 2 and len(head.split()[0]) == 64
    return head.startswith(b'{"format":"much-labels/1"')


def check_outside(path: Path, folder: Path) -> None:
    """The label file must not be inside the published folder (``push`` uploads the whole folder)."""
    from much_dataset.label_files import LabelFileError, check_outside_published

    try:
        check_outside_published(path, folder)
    except LabelFileError as error:
        raise BuilderError(f"--private-labels {error}") from None


def write_private_labels(path: Path, public: Mapping[str, Sequence[Mapping[str, Any]]],
                         labels: Mapping[str, Mapping[str, list[int]]], *, label_judge: str) -> str:
    """Write the label file of the public rows (all splits together); returns its SHA-256."""
    published = [row for split_rows in public.values() for row in split_rows]
    return write_label_file(path, LabelFile(
        name="private", rows=labels, columns=schema.LABEL_COLUMNS, rows_sha256=rows_fingerprint(published),
        description=f"withheld labels of {len(published)} rows (labels from {label_judge}); server only"))


def withheld_card_body(body: str) -> str:
    """The card body of a withheld export: the notice after the title, the label columns left out of its table."""
    kept = [line for line in body.splitlines()
            if not line.startswith(("| `labels` |", "| `human_labels_0`, `human_labels_1` |"))]
    title, _, rest = "\n".join(kept).partition("\n")
    return f"{title}\n\n{_NOTICE}\n{rest}\n"
