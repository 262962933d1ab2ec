"""Label files (much_dataset.label_files) and splits whose labels are withheld (loaded without label columns)."""

from __future__ import annotations

import json
import os
import re

import pytest

from much_dataset import schema
from much_dataset.label_files import (
    LabelFile,
    LabelFileError,
    checksum_path,
    read_label_file,
    rows_fingerprint,
    write_label_file,
)
from much_dataset.synthetic import make_rows


def _labels(rows):
    return {r[schema.GENERATION_ID]: {name: list(r[name]) for name in schema.LABEL_COLUMNS} for r in rows}


def _file(labels, rows_sha256):
    return LabelFile(name="private", rows=labels, columns=schema.LABEL_COLUMNS, rows_sha256=rows_sha256)


def test_a_label_file_round_trips_and_is_tied_to_its_rows(tmp_path):
    rows = make_rows(12, seed=1)
    path = tmp_path / "labels.json"
    digest = write_label_file(path, _file(_labels(rows), rows_fingerprint(rows)))
    assert checksum_path(path).read_text() == f"{digest}  labels.json\n"
    assert oct(path.stat().st_mode & 0o777) == "0o600"  # a hidden split's labels: owner only
    found = read_label_file(path, rows=rows)
    assert found.sha256 == digest and found.columns == schema.LABEL_COLUMNS
    assert {gid: dict(v) for gid, v in found.rows.items()} == _labels(rows)
    assert found.n_claims == sum(len(r[schema.TOKEN_CHUNKS]) for r in rows)
    # other rows (one token changed): refused, by fingerprint
    other = [dict(r) for r in rows]
    other[3] = {**other[3], schema.OUTPUT_TOKENS: [*other[3][schema.OUTPUT_TOKENS][:-1], 7]}
    with pytest.raises(LabelFileError, match="made for other rows"):
        read_label_file(path, rows=other)


def test_a_changed_or_unsigned_label_file_is_refused(tmp_path):
    rows = make_rows(6, seed=2)
    path = tmp_path / "labels.json"
    write_label_file(path, _file(_labels(rows), rows_fingerprint(rows)))
    document = json.loads(path.read_text())
    first = next(iter(document["rows"]))
    document["rows"][first]["labels"][0] *= -1
    path.write_text(json.dumps(document))
    with pytest.raises(LabelFileError, match="SHA-256 is not the one in labels.json.sha256") as error:
        read_label_file(path)
    assert "[" not in str(error.value)  # no label value in the message
    checksum_path(path).unlink()
    with pytest.raises(LabelFileError, match="no labels.json.sha256 next to it"):
        read_label_file(path)
    assert read_label_file(path, require_checksum=False).rows[first]["labels"] == document["rows"][first]["labels"]


def test_bad_label_values_and_counts_name_the_row(tmp_path):
    rows = make_rows(4, seed=3)
    labels = _labels(rows)
    gid = rows[1][schema.GENERATION_ID]
    path = tmp_path / "labels.json"
    with pytest.raises(LabelFileError, match=rf"generation_id={gid!r}, column 'labels': labels must be -1 or 1"):
        write_label_file(path, _file({**labels, gid: {**labels[gid], "labels": [2] * len(labels[gid]["labels"])}},
                                     ""))
    short = {**labels, gid: {**labels[gid], "labels": labels[gid]["labels"][:-1] or [1, 1]}}
    write_label_file(path, _file(short, rows_fingerprint(rows)))
    with pytest.raises(LabelFileError, match=rf"generation_id={gid!r}, column 'labels': \d+ labels for \d+ claims"):
        read_label_file(path, rows=rows)


def test_a_split_without_label_columns_loads_and_validates(tmp_path):
    import much_dataset
    from much_dataset.card import write_parquet_folder
    from much_dataset.validation import validate_rows

    rows = make_rows(20, seed=4)
    public = [{name: r[name] for name in schema.UNLABELLED_COLUMNS} for r in rows]
    validate_rows(public)  # no label column at all: valid
    with pytest.raises(ValueError, match=r"lack the column\(s\) \['human_labels_1'\]"):
        validate_rows([{k: v for k, v in r.items() if k != schema.HUMAN_LABELS_1} for r in rows])
    write_parquet_folder({"test": public}, tmp_path / "hidden")
    loaded = much_dataset.load(str(tmp_path / "hidden"), split="test")
    assert sorted(loaded.column_names) == sorted(schema.UNLABELLED_COLUMNS) and len(loaded) == 20
    assert loaded.features[schema.LOGITS_VALUES] == schema.features()[schema.LOGITS_VALUES]
    with pytest.raises(ValueError, match="either labelled or a split whose labels are withheld"):
        write_parquet_folder({"test": public, "train": rows}, tmp_path / "mixed")


def test_the_schema_is_the_one_list_of_label_columns():
    assert set(schema.LABEL_COLUMNS) <= schema.LABEL_DERIVED_FIELDS
    assert not set(schema.UNLABELLED_COLUMNS) & schema.LABEL_DERIVED_FIELDS
    assert set(schema.UNLABELLED_COLUMNS) | set(schema.LABEL_COLUMNS) == set(schema.COLUMNS)
    assert schema.missing_label_columns(schema.UNLABELLED_COLUMNS) == list(schema.LABEL_COLUMNS)
    assert list(schema.features(with_labels=False)) == list(schema.UNLABELLED_COLUMNS)


@pytest.mark.skipif(os.name != "posix", reason="symbolic links")
def test_a_label_file_reached_through_a_link_inside_the_published_folder_is_refused(tmp_path):
    """The upload of a published folder follows its links: a link to the label file (or to its folder) inside the
    published folder publishes the labels although the file itself lies elsewhere."""
    from much_dataset.label_files import check_outside_published

    published, secrets = tmp_path / "published", tmp_path / "secrets"
    published.mkdir()
    secrets.mkdir()
    labels = secrets / "labels.json"
    labels.write_text("{}")
    check_outside_published(labels, published)  # elsewhere: accepted
    (published / "labels.json").symlink_to(labels)
    (published / "secrets").symlink_to(secrets, target_is_directory=True)
    for through_link in (published / "labels.json", published / "secrets" / "labels.json"):
        with pytest.raises(LabelFileError, match=f"{re.escape(str(through_link))} is inside the published folder"):
            check_outside_published(through_link, published)
    (secrets / "rows").symlink_to(published, target_is_directory=True)  # the folder named through a link
    with pytest.raises(LabelFileError, match="is inside the published folder"):
        check_outside_published(published / "labels.json", secrets / "rows")
