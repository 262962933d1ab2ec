"""``python -m builder export --withhold-labels``: a private split made from part of the embedded sample (the
``hidden_split`` fixture runs the export) publishes rows without any label or label-derived field, and a label file
for the server."""

from __future__ import annotations

import json
import shutil

import pytest

from builder.cli import main
from much_dataset import schema


def test_the_published_rows_hold_every_detector_column_and_no_label(hidden_split):
    import pyarrow.parquet as pq

    import much_dataset

    shards = sorted(hidden_split.private.rglob("*.parquet"))
    assert len(shards) == 4
    for shard in shards:
        table = pq.read_table(shard)
        assert table.column_names == list(schema.UNLABELLED_COLUMNS)
        metadata = b" ".join(table.schema.metadata.values()).decode()
        for field in schema.LABEL_DERIVED_FIELDS:  # not a column, nor in the stored features
            assert f'"{field}"' not in metadata, field
    card = (hidden_split.private / "README.md").read_text(encoding="utf-8")
    assert "Labels withheld: a hidden test split" in card
    assert "| `labels` |" not in card and "human_labels_0`, `human_labels_1` |" not in card
    assert "- name: labels" not in card and "- name: human_labels_0" not in card  # the YAML features
    counts = next(line for line in card.splitlines() if line.startswith("| test |"))
    assert counts.endswith("| — |")  # no count of hallucinated claims
    loaded = much_dataset.load(str(hidden_split.private), split="test")
    assert len(loaded) == len(hidden_split.private_ids) and set(loaded["generation_id"]) == hidden_split.private_ids


def test_the_label_file_holds_the_labels_of_exactly_those_rows(hidden_split):
    import much_dataset
    from much_dataset.label_files import read_label_file

    rows = much_dataset.load(str(hidden_split.private), split="test")
    found = read_label_file(hidden_split.labels, rows=rows)
    assert oct(hidden_split.labels.stat().st_mode & 0o777) == "0o600"
    assert found.columns == schema.LABEL_COLUMNS
    sample = much_dataset.load("sample", split="test")
    truth = {r["generation_id"]: r for r in sample if r["generation_id"] in hidden_split.private_ids}
    assert set(found.rows) == set(truth)
    for gid, labels in found.rows.items():
        assert {name: labels[name] for name in schema.LABEL_COLUMNS} == {
            name: list(truth[gid][name]) for name in schema.LABEL_COLUMNS}
    assert not hidden_split.labels.resolve().is_relative_to(hidden_split.private.resolve())


def test_withheld_export_flags_are_checked_before_any_work(hidden_split, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    for name in ("generations.jsonl", "segments.jsonl", "labels.mushroom.jsonl", "configs.jsonl"):
        shutil.copy(hidden_split.out / name, out / name)
    common = ["export", "--out", str(out), "--split", "test", "--judge", "mushroom", "--no-check"]
    assert main([*common, "--private-labels", str(tmp_path / "l.json")]) == 2
    assert "--private-labels goes with --withhold-labels" in capsys.readouterr().err
    assert main([*common, "--withhold-labels", "--private-labels", str(out / "much" / "labels.json")]) == 2
    assert "inside the published folder" in capsys.readouterr().err
    assert main([*common, "--withhold-labels", "--private-labels", str(out / "generations.jsonl")]) == 2
    assert "exists and is not a label file this step wrote" in capsys.readouterr().err
    assert not (out / "much").exists() and not (out / "rows").exists()
    assert main([*common, "--withhold-labels"]) == 0  # default <out>/private/labels.json
    first = (out / "private" / "labels.json.sha256").read_text()
    assert main([*common, "--withhold-labels"]) == 0  # a rerun rewrites the same file
    assert (out / "private" / "labels.json.sha256").read_text() == first
    assert json.loads((out / "private" / "labels.json").read_text())["n_rows"] == len(hidden_split.private_ids)


@pytest.mark.parametrize("rule", ["hard", "reference"])
def test_the_sample_label_sources_come_from_mushroom_and_the_rows_own_tokens(rule):
    """Differential check: under the hard rule the recomputation gives the sample's own ``labels`` for all 606
    rows; under the reference (soft) rule it gives the shipped ``label_sources/soft.json``."""
    import much_dataset
    from builder.label_sources import mushroom_label_source
    from much_dataset.label_files import read_label_file
    from much_dataset.loader import SAMPLE_DIR
    from much_metric.models import load_tokenizer
    from much_metric.mushroom import read_records
    from tests.assets import MUSHROOM_DIR

    sample = much_dataset.load("sample", split="test")
    labels = mushroom_label_source(sample, read_records([MUSHROOM_DIR]), load_tokenizer("smollm2"),
                                   rule=rule)
    if rule == "hard":
        assert labels == {r["generation_id"]: list(r["labels"]) for r in sample}
        return
    shipped = read_label_file(SAMPLE_DIR / "label_sources" / "soft.json", rows=sample)
    assert {gid: row["labels"] for gid, row in shipped.rows.items()} == labels
    differ = sum(labels[r["generation_id"]] != list(r["labels"]) for r in sample)
    assert differ > 100  # a different labelling, not a copy


def test_a_withheld_export_publishes_a_test_split(hidden_split, tmp_path, capsys):
    """The card calls it a hidden test split: rows the export rule puts in train (no an1 label here) are published
    in test, and --split train is refused."""
    import much_dataset

    out = tmp_path / "out"
    out.mkdir()
    for name in ("generations.jsonl", "segments.jsonl", "labels.mushroom.jsonl", "configs.jsonl"):
        shutil.copy(hidden_split.out / name, out / name)
    common = ["export", "--out", str(out), "--judge", "mushroom", "--no-check", "--withhold-labels"]
    assert main([*common, "--split", "train"]) == 2
    assert "--withhold-labels publishes a hidden test split: --split train contradicts it" in capsys.readouterr().err
    assert main(common) == 0  # --split auto: every row would be train by the export rule
    assert "export: train=0 test=288" in capsys.readouterr().out
    loaded = much_dataset.load(str(out / "much"))
    assert list(loaded) == ["test"] and set(loaded["test"]["generation_id"]) == hidden_split.private_ids
    card = (out / "much" / "README.md").read_text(encoding="utf-8")
    assert "a hidden test split" in card and "| train |" not in card
    assert "much-leaderboard archive PUBLIC PRIVATE" in " ".join(card.split())
