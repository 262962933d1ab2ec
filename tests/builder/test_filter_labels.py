"""Labels entering ``builder filter`` and ``builder export`` (:mod:`builder.filter_labels`): values in {-1, +1},
one record per (row, judge), non-empty judge names, ``null`` refused as bad input -- exit 2 with a message naming the
file, the generation_id and the field, never a silent label or a ``TypeError``."""

from __future__ import annotations

import json

import pytest

from builder.cli import main
from builder.store import read_store
from tests import assets
from tests.builder.fake_servers import write_sample_artifacts


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory):
    out = tmp_path_factory.mktemp("labels_entering")
    write_sample_artifacts(out, assets.llama3_tokenizer())
    return out


def _copy(artifacts, tmp_path):
    for name in ("generations.jsonl", "segments.jsonl", "configs.jsonl"):
        (tmp_path / name).write_bytes((artifacts / name).read_bytes())
    return {r["generation_id"]: len(r["token_chunks"]) for r in read_store(tmp_path / "segments.jsonl")}


def _write(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def _agreeing(tmp_path, chunks, *judges):
    for judge in judges:
        _write(tmp_path / f"labels.{judge}.jsonl", [{"generation_id": g, "labels": [1] * n} for g, n in chunks.items()])


def _bad(chunks, gid, labels):
    return [{"generation_id": g, "labels": labels if g == gid else [1] * n} for g, n in chunks.items()]


@pytest.mark.parametrize("step", ["filter", "export"])
@pytest.mark.parametrize(("value", "shown"), [(0, "0"), (7, "7"), (None, "None"), (True, "True"), (1.0, "1.0")])
def test_a_label_value_outside_minus_one_plus_one_is_refused(artifacts, tmp_path, capsys, step, value, shown):
    chunks = _copy(artifacts, tmp_path)
    _agreeing(tmp_path, chunks, "alpha")
    labels = [1] * chunks["gen01"]
    labels[1] = value
    _write(tmp_path / "labels.beta.jsonl", _bad(chunks, "gen01", labels))
    extra = ["--judge", "alpha", "--no-check"] if step == "export" else []
    assert main([step, "--out", str(tmp_path), *extra]) == 2
    err = capsys.readouterr().err
    assert "labels.beta.jsonl: generation_id='gen01', field 'labels', claim 1: " + shown in err
    assert "-1 (hallucinated) or +1" in err


@pytest.mark.parametrize("step", ["filter", "export"])
def test_a_null_label_list_is_bad_input_not_a_crash(artifacts, tmp_path, capsys, step):
    chunks = _copy(artifacts, tmp_path)
    _agreeing(tmp_path, chunks, "alpha")
    _write(tmp_path / "labels.beta.jsonl", _bad(chunks, "gen03", None))
    extra = ["--judge", "alpha", "--no-check"] if step == "export" else []
    assert main([step, "--out", str(tmp_path), *extra]) == 2  # was TypeError, exit 1
    err = capsys.readouterr().err
    assert "labels.beta.jsonl: generation_id='gen03', field 'labels': null" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("step", ["filter", "export"])
def test_two_records_of_one_row_and_judge_are_refused_naming_both(artifacts, tmp_path, capsys, step):
    chunks = _copy(artifacts, tmp_path)
    _agreeing(tmp_path, chunks, "alpha")
    records = [{"generation_id": g, "labels": [1] * n} for g, n in chunks.items()]
    records.append({"generation_id": "gen02", "labels": [-1] * chunks["gen02"]})  # a conflicting second verdict
    _write(tmp_path / "labels.gpt-4.1.jsonl", records)
    extra = ["--judge", "alpha", "--no-check"] if step == "export" else []
    assert main([step, "--out", str(tmp_path), *extra]) == 2
    err = capsys.readouterr().err
    assert "labels.gpt-4.1.jsonl: generation_id='gen02' has two records" in err
    assert "'gpt-4.1'" in err  # the judge, by its whole name


@pytest.mark.parametrize("step", ["filter", "export"])
def test_a_judge_without_a_name_is_refused(artifacts, tmp_path, capsys, step):
    chunks = _copy(artifacts, tmp_path)
    _agreeing(tmp_path, chunks, "alpha", "beta")
    _agreeing(tmp_path, chunks, "")  # labels..jsonl
    assert (tmp_path / "labels..jsonl").is_file()
    extra = ["--judge", "alpha", "--no-check"] if step == "export" else []
    assert main([step, "--out", str(tmp_path), *extra]) == 2
    assert "labels..jsonl: a label file needs a non-empty name" in capsys.readouterr().err


def test_a_human_label_file_is_checked_alike(artifacts, tmp_path, capsys):
    chunks = _copy(artifacts, tmp_path)
    _agreeing(tmp_path, chunks, "alpha", "beta")
    _write(tmp_path / "human.an1.jsonl", [{"generation_id": "gen00", "labels": [0] * chunks["gen00"]}])
    assert main(["export", "--out", str(tmp_path), "--judge", "alpha", "--no-check"]) == 2
    assert "human.an1.jsonl: generation_id='gen00', field 'labels', claim 0: 0 is not a label" in \
        capsys.readouterr().err


def test_good_labels_still_pass_both_steps(artifacts, tmp_path, capsys):
    chunks = _copy(artifacts, tmp_path)
    _agreeing(tmp_path, chunks, "alpha", "beta")
    assert main(["filter", "--out", str(tmp_path)]) == 0
    assert main(["export", "--out", str(tmp_path), "--no-check"]) == 0
    kept = [r for split in ("train", "test") for r in read_store(tmp_path / "rows" / f"{split}.jsonl")]
    assert kept and all(set(r["labels"]) <= {-1, 1} for r in kept)


@pytest.mark.parametrize("step", ["filter", "export"])
def test_an_empty_judge_file_is_bad_input_naming_file_and_judge(artifacts, tmp_path, capsys, step):
    chunks = _copy(artifacts, tmp_path)
    _agreeing(tmp_path, chunks, "alpha")
    (tmp_path / "labels.beta.jsonl").write_text("")  # what an annotate whose every call failed leaves
    extra = ["--judge", "alpha", "--no-check"] if step == "export" else []
    assert main([step, "--out", str(tmp_path), *extra]) == 2  # filter: was "nothing to export", exit 1
    err = capsys.readouterr().err
    assert "labels.beta.jsonl: no label record of judge 'beta'" in err
    assert not (tmp_path / "filter.jsonl").exists()


def _with_strangers(chunks, strangers):
    return [*({"generation_id": g, "labels": [1] * n} for g, n in chunks.items()),
            *({"generation_id": g, "labels": [1, 1]} for g in strangers)]


@pytest.mark.parametrize("step", ["filter", "export"])
@pytest.mark.parametrize("n_strangers", [1, 5])
def test_labels_of_rows_that_are_not_there_are_refused(artifacts, tmp_path, capsys, step, n_strangers):
    chunks = _copy(artifacts, tmp_path)
    _agreeing(tmp_path, chunks, "alpha")
    strangers = [f"other{i}" for i in range(n_strangers)]
    _write(tmp_path / "labels.beta.jsonl", _with_strangers(chunks, strangers))
    extra = ["--judge", "alpha", "--no-check"] if step == "export" else []
    assert main([step, "--out", str(tmp_path), *extra]) == 2  # were ignored without a word
    err = capsys.readouterr().err
    assert f"labels.beta.jsonl: {n_strangers} record(s) of judge 'beta' name a generation_id" in err
    assert all(repr(gid) in err for gid in strangers[:3])
    assert all(repr(gid) not in err for gid in strangers[3:])  # a few shown, the rest counted
    assert ("and 2 more" in err) == (n_strangers == 5)


@pytest.mark.parametrize("step", ["filter", "export"])
def test_human_labels_of_rows_that_are_not_there_are_refused(artifacts, tmp_path, capsys, step):
    chunks = _copy(artifacts, tmp_path)
    _agreeing(tmp_path, chunks, "alpha", "beta")
    _write(tmp_path / "human.an1.jsonl", [{"generation_id": "gone", "labels": [1]}])
    extra = ["--judge", "alpha", "--no-check"] if step == "export" else []
    assert main([step, "--out", str(tmp_path), *extra]) == 2
    assert "human.an1.jsonl: 1 record(s) of annotator 'an1' name a generation_id" in capsys.readouterr().err
