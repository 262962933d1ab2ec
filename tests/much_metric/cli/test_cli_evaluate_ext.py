"""``much evaluate --rank --spans --calibrate-on --report --figures`` end to end on the embedded sample."""

from __future__ import annotations

import json

import numpy as np
import pytest

import much_dataset
from much_dataset import schema
from much_metric import mushroom
from much_metric.cli import main
from much_metric.report._evaluation import dataset_columns
from much_metric.report._spans import DEFAULT_MUSHROOM, match_mushroom
from much_metric.signals import write_signals


@pytest.fixture(scope="module")
def sample():
    return much_dataset.load("sample", split="test")


@pytest.fixture(scope="module")
def scores(sample, tmp_path_factory):
    folder = tmp_path_factory.mktemp("signals")
    rng = np.random.default_rng(0)
    records = []
    for gid, values in zip(sample[schema.GENERATION_ID], sample[schema.LOGITS_VALUES], strict=True):
        top = np.array([v[0] for v in values])
        records.append({"generation_id": gid, "signal_name": "max_likelihood", "values": 1 - top})
        records.append({"generation_id": gid, "signal_name": "noise", "values": rng.random(len(top))})
    write_signals(folder / "signals.parquet", records)
    (folder / "timings.json").write_text(json.dumps({"max_likelihood": {"seconds": 0.5}}))
    return folder


def test_every_sample_row_matches_its_mushroom_record(sample):
    columns = sample.select_columns(["lang", "prompt", "output"]).to_dict()
    records = [r for f in sorted(DEFAULT_MUSHROOM.glob("*.jsonl")) for r in mushroom.read_mushroom_jsonl(f)]
    matched = match_mushroom(columns, records)
    assert len(matched) == len(sample)
    assert len({r["id"] for r in matched.values()}) == len(sample)  # one record per row


def test_rank_spans_calibration_report(sample, scores, tmp_path, capsys):
    report, figures, out_json = tmp_path / "r.html", tmp_path / "fig", tmp_path / "m.json"
    code = main(["evaluate", "--source", "sample", "--scores", str(scores), "--rank", "roc_auc", "--spans",
                 "--calibrate-on", "0.5", "--by", "lang", "--bootstrap", "50", "--report", str(report),
                 "--figures", str(figures), "--json", str(out_json), "--generation-time", "100"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "[floor: random]" in out and "[floor: constant]" in out and "coverage" in out
    assert "leaderboard by roc_auc" in out and "pairwise paired-bootstrap p-values" in out
    assert "0.500s (0.500%)" in out  # runtime relative to the given generation time
    assert "[mark_all]" in out and "IoU fr" in out
    payload = json.loads(out_json.read_text())
    spans = payload["spans"]
    assert spans["n_items"] + spans["n_fit_items"] == len(sample)
    # the baselines are the task scorer's on the evaluation half
    assert 0 < spans["baselines"]["mark_all"]["iou"] < 1
    assert spans["methods"]["max_likelihood (product)"]["cor"] > spans["methods"]["noise (product)"]["cor"]
    assert {c["signal_name"] for c in payload["calibration"]} == {"max_likelihood", "noise"}
    assert payload["leaderboard"]["rows"][0]["method"] == "max_likelihood (product)"
    page = report.read_text()
    for section in ("Leaderboard", "Calibration", "Mu-SHROOM spans", "Glossary", "PRR@50%"):
        assert section in page
    names = {p.name for p in figures.iterdir()}
    assert {"methods_product.png", "methods_product.svg", "reliability.png", "reliability.svg",
            "max_likelihood_by_lang.svg"} <= names


def test_cli_errors(scores, capsys):
    assert main(["evaluate", "--source", "sample", "--scores", str(scores), "--labels", "human_labels_0",
                 "--bootstrap", "0"]) == 2
    assert "no sample of the dataset has ground truth" in capsys.readouterr().err
    assert main(["evaluate", "--source", "sample", "--scores", str(scores), "--rank", "accuracy"]) == 2
    assert "unknown --rank metric 'accuracy'" in capsys.readouterr().err
    assert main(["evaluate", "--source", "sample", "--scores", str(scores), "--calibrate-on", "train",
                 "--bootstrap", "0"]) == 2
    assert "use a fraction" in capsys.readouterr().err


def test_dataset_columns_has_the_human_label_columns(sample):
    assert {schema.HUMAN_LABELS_0, schema.HUMAN_LABELS_1} <= set(dataset_columns(sample))
