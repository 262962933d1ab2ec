"""export: split rule of docs/reference-behaviour.md#hub-columns / filter.jsonl, rows files, parquet folder loadable
with plain datasets."""

from __future__ import annotations

import json
import os
import re

import pytest

from builder.cli import main
from builder.export import collect_rows, split_of
from builder.store import read_store
from much_dataset import schema
from much_dataset.synthetic import make_rows
from much_dataset.validation import InvalidSampleError

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")


def _write(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def _artifacts(out, n=24, *, disagree=(1, 5), an1=(2, 3, 7), wide=(4,)):
    """Builder artifacts for ``n`` synthetic rows; returns the rows."""
    rows = make_rows(n, seed=3)
    generations, segments, gpt4o, gpt41, human0, human1 = [], [], [], [], [], []
    for index, row in enumerate(rows):
        gid = row[schema.GENERATION_ID]
        generation = {k: row[k] for k in schema.HUB_COLUMNS[:9]}
        # sampled token ranked 24: one row with 25 candidates (docs/reference-behaviour.md#captured-distribution)
        if index in wide:
            generation[schema.LOGITS_TOKEN_IDS][0] = generation[schema.LOGITS_TOKEN_IDS][0] + [99_999]
            generation[schema.LOGITS_VALUES][0] = generation[schema.LOGITS_VALUES][0] + [0.0]
        generations.append(generation)
        segments.append({schema.GENERATION_ID: gid, schema.TOKEN_CHUNKS: row[schema.TOKEN_CHUNKS],
                         schema.STOPWORD_MASK: row[schema.STOPWORD_MASK], "segmenter": "0.2.1"})
        labels = list(row[schema.LABELS])
        gpt4o.append({schema.GENERATION_ID: gid, "judge": "gpt-4o", schema.LABELS: labels})
        other = [-v for v in labels[:-1]] + [1] if index in disagree else labels
        gpt41.append({schema.GENERATION_ID: gid, "judge": "gpt-4.1", schema.LABELS: other})
        if index in an1:
            human0.append({schema.GENERATION_ID: gid, "annotator": "an0", schema.LABELS: labels})
            human1.append({schema.GENERATION_ID: gid, "annotator": "an1", schema.LABELS: labels})
    _write(out / "generations.jsonl", generations)
    _write(out / "segments.jsonl", segments)
    _write(out / "labels.gpt-4o.jsonl", gpt4o)
    _write(out / "labels.gpt-4.1.jsonl", gpt41)
    _write(out / "human.an0.jsonl", human0)
    _write(out / "human.an1.jsonl", human1)
    _write(out / "configs.jsonl", [{"generation_config": "synthetic", "model_name": "synthetic/model",
                                    "temperature": 1.0, "seed": 1234, "top_p": 0.9, "top_k": 20,
                                    "max_new_tokens": 500}])
    return rows


def test_split_rule_without_filter(tmp_path):
    rows = _artifacts(tmp_path)
    split, report = collect_rows(tmp_path)
    ids = [r[schema.GENERATION_ID] for r in rows]
    by_id = {r[schema.GENERATION_ID]: name for name, members in split.items() for r in members}
    assert {i for i, g in enumerate(ids) if by_id[g] == "trash"} == {1, 4, 5}
    assert {i for i, g in enumerate(ids) if by_id[g] == "test"} == {2, 3, 7}
    assert len(split["train"]) == len(rows) - 6 and report["label_judge"] == "gpt-4o"
    trash = {r[schema.GENERATION_ID]: r for r in split["trash"]}[ids[1]]
    # docs/reference-behaviour.md#trash-dataset layout
    assert schema.LABELS not in trash and trash["gpt-4o"] != trash["gpt-4.1"]
    test = {r[schema.GENERATION_ID]: r for r in split["test"]}[ids[2]]
    assert test[schema.HUMAN_LABELS_1] == test[schema.LABELS] == rows[2][schema.LABELS]
    train = split["train"][0]
    assert train[schema.HUMAN_LABELS_0] == [0] and train[schema.HUMAN_LABELS_1] == [0]


def test_split_of_reasons():
    generation = make_rows(1, seed=0)[0]
    assert split_of("g", generation, {"a": [1, 1], "b": [1, 1]}, set())[0] == "train"
    assert split_of("g", generation, {"a": [1, 1], "b": [-1, 1]}, {"an1"})[0] == "trash"
    assert split_of("g", generation, {"a": [1, 1]}, {"an0", "an1"})[0] == "test"
    assert split_of("g", generation, {"a": [1, 1]}, set(), eos_ids={12345})[1].startswith("no final EOS")
    assert split_of("g", {**generation, "finished": False}, {"a": [1, 1]}, set())[0] == "trash"


def test_filter_file_decides_the_split(tmp_path):
    rows = _artifacts(tmp_path)
    ids = [r[schema.GENERATION_ID] for r in rows]
    decisions = {ids[0]: "test", ids[1]: "train", ids[4]: "train"}  # ids[4] has 25 candidates: forced to trash
    _write(tmp_path / "filter.jsonl", [{schema.GENERATION_ID: g, "split": decisions.get(g, "train"), "reason": "x"}
                                       for g in ids[:-1]])  # the last one is not filtered yet
    split, report = collect_rows(tmp_path)
    by_id = {r[schema.GENERATION_ID]: name for name, members in split.items() for r in members}
    assert by_id[ids[0]] == "test" and by_id[ids[1]] == "train" and by_id[ids[4]] == "trash"
    assert report["skipped"] == {ids[-1]: "not in filter.jsonl"}
    _write(tmp_path / "filter.jsonl", [{schema.GENERATION_ID: ids[0], "split": "dev"}])
    with pytest.raises(ValueError, match=rf"{ids[0]}.*'split'"):
        collect_rows(tmp_path)


def test_export_writes_rows_and_a_loadable_folder(tmp_path):
    import datasets

    rows = _artifacts(tmp_path)
    assert main(["export", "--out", str(tmp_path)]) == 0
    first = {split: (tmp_path / "rows" / f"{split}.jsonl").read_bytes() for split in ("train", "test", "trash")}
    assert len(list(read_store(tmp_path / "rows" / "train.jsonl"))) == len(rows) - 6
    assert [c["generation_config"] for c in read_store(tmp_path / "rows" / "configs.jsonl")] == ["synthetic"]
    loaded = datasets.load_dataset(str(tmp_path / "much"))
    assert {split: len(loaded[split]) for split in loaded} == {"train": len(rows) - 6, "test": 3}
    assert loaded["train"].features == schema.features()
    fr = datasets.load_dataset(str(tmp_path / "much"), "fr", split="train")
    assert set(fr["lang"]) == {"fr"}
    original = {r[schema.GENERATION_ID]: r for r in rows}
    for row in loaded["test"]:
        assert row[schema.TOKEN_CHUNKS] == original[row[schema.GENERATION_ID]][schema.TOKEN_CHUNKS]
        assert row[schema.LABELS] == original[row[schema.GENERATION_ID]][schema.LABELS]
    card = (tmp_path / "much" / "README.md").read_text()
    assert card.startswith("---\n") and "configs:" in card and "dataset_info:" in card
    assert "| train | " in card and f"| {len(rows) - 6} |" in card and "`synthetic`" in card
    assert "$" not in card.split("---", 2)[2].replace("$ ", "")  # every placeholder filled
    # Idempotent: a rerun rewrites the same bytes.
    assert main(["export", "--out", str(tmp_path)]) == 0
    assert first == {s: (tmp_path / "rows" / f"{s}.jsonl").read_bytes() for s in first}


def test_a_bad_row_names_the_sample_and_keeps_the_old_folder(tmp_path):
    rows = _artifacts(tmp_path)
    assert main(["export", "--out", str(tmp_path)]) == 0
    before = (tmp_path / "much" / "README.md").read_bytes()
    bad_id = rows[0][schema.GENERATION_ID]
    labels = list(read_store(tmp_path / "labels.gpt-4o.jsonl"))
    labels[0][schema.LABELS] = labels[0][schema.LABELS] + [1]  # one label too many
    _write(tmp_path / "labels.gpt-4o.jsonl", labels)
    _write(tmp_path / "labels.gpt-4.1.jsonl", [dict(r, judge="gpt-4.1") for r in labels])
    assert main(["export", "--out", str(tmp_path)]) == 2  # one line, exit 2 (the builder's error contract)
    with pytest.raises(InvalidSampleError) as error:
        main(["--traceback", "export", "--out", str(tmp_path)])
    assert error.value.generation_id == bad_id and error.value.field == "labels"
    assert (tmp_path / "much" / "README.md").read_bytes() == before
    # no temporary folder left (the empty lock file .much.lock stays by design: locks must outlive their holders)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".much")] == [".much.lock"]


def test_single_judge_and_forced_split(tmp_path, capsys):
    _artifacts(tmp_path)
    (tmp_path / "labels.gpt-4.1.jsonl").unlink()
    (tmp_path / "labels.gpt-4o.jsonl").rename(tmp_path / "labels.mushroom.jsonl")
    assert main(["export", "--out", str(tmp_path), "--split", "test"]) == 0
    assert len(list(read_store(tmp_path / "rows" / "test.jsonl"))) == 23  # the 25-candidate row goes to trash
    assert not list(read_store(tmp_path / "rows" / "train.jsonl"))
    assert main(["export", "--out", str(tmp_path), "--judge", "gpt-4o"]) == 2
    assert re.search(r"(?m)^builder export: error: --judge gpt-4o: no labels.gpt-4o.jsonl \(label files present: "
                     r"labels.mushroom.jsonl\)", capsys.readouterr().err)


def test_engine_of_serving_rows_is_kept_in_the_configs_record(tmp_path):
    # The hub columns drop generate --engine vllm|openai's per-row engine fields: rows/configs.jsonl keeps them.
    rows = _artifacts(tmp_path)
    generations = list(read_store(tmp_path / "generations.jsonl"))
    sampling = {"temperature": 1.0, "top_p": 1.0, "top_k": 0, "logprobs": 24}
    for index, generation in enumerate(generations):
        engine = "vllm" if index % 2 else "openai"
        version = "9.9.9-trash-only" if index == 1 else "0.32.0"  # row 1 is trashed: its engine is not published
        generation.update(engine=engine, engine_version=version, sampling=sampling, dtype="float32")
    _write(tmp_path / "generations.jsonl", generations)
    assert main(["export", "--out", str(tmp_path), "--no-check"]) == 0
    published = {r[schema.GENERATION_ID] for split in ("train", "test")
                 for r in read_store(tmp_path / "rows" / f"{split}.jsonl")}
    assert len(published) == len(rows) - 3 and all("engine" not in r for r in read_store(tmp_path / "rows" /
                                                                                         "train.jsonl"))
    (config,) = read_store(tmp_path / "rows" / "configs.jsonl")
    assert sorted(config["engines"], key=lambda e: e["engine"]) == [
        {"engine": "openai", "engine_version": "0.32.0", "sampling": sampling, "dtype": "float32"},
        {"engine": "vllm", "engine_version": "0.32.0", "sampling": sampling, "dtype": "float32"}]
