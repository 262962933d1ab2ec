"""``much evaluate`` end to end on a synthetic MUCH split and a MUCH-signals file.

``much_dataset.load`` belongs to the dataset engineer; these tests replace it with a stand-in returning a typed
synthetic ``datasets`` split, and check the arguments it receives.
"""

import json

import numpy as np
import pytest

import much_dataset
from much_dataset import schema
from much_dataset.synthetic import make_rows
from much_metric.scoring import Bootstrap
from much_metric.scoring._api import score, select_samples
from much_metric.signals._files import write_signals


def _main(argv):
    from much_metric.cli import main  # the real entry point: it turns expected errors into one line and exit 2

    return main(argv)


@pytest.fixture(scope="module")
def split():
    import datasets

    rows = make_rows(160, seed=4)
    for index, row in enumerate(rows[:40]):
        row[schema.GENERATION_CONFIG] = "Q6U-toJrtxVpeYhI11BKiQ" if index % 2 else "bESSWQcqIaYZslTy7sy1Hg"
        row[schema.HUMAN_LABELS_0] = row[schema.LABELS]
        row[schema.HUMAN_LABELS_1] = row[schema.LABELS] if index % 4 else [1] * len(row[schema.LABELS])
    return rows, datasets.Dataset.from_list(rows, features=schema.features())


@pytest.fixture()
def loader(monkeypatch, split):
    import datasets

    calls = []

    def fake_load(source, config="all", split=None):
        calls.append((source, config, split))
        return datasets.DatasetDict({"train": split_ds.select(range(100)), "test": split_ds.select(range(100, 160))})

    split_ds = split[1]
    # the fake loader stands in for the hub: offline, the preflight does not probe the hub for "some/folder"
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    # setitem, not setattr: the real loader may not exist yet, and getattr would try to import it.
    monkeypatch.setitem(much_dataset.__dict__, "load", fake_load)
    return calls


@pytest.fixture(scope="module")
def signal_file(tmp_path_factory, split):
    rows, _ = split
    records = []
    for row in rows:
        probs = np.asarray(row[schema.LOGITS_VALUES])
        records.append({"generation_id": row[schema.GENERATION_ID], "signal_name": "max_likelihood",
                        "values": (1 - probs[:, 0]).tolist()})
        if row is not rows[0]:  # one sample lacks this signal
            records.append({"generation_id": row[schema.GENERATION_ID], "signal_name": "random",
                            "values": np.random.default_rng(len(records)).random(len(probs)).tolist()})
    path = tmp_path_factory.mktemp("signals") / "signals.parquet"
    write_signals(path, records)
    return path, records


def test_table_json_and_report(loader, split, signal_file, tmp_path, capsys):
    path, records = signal_file
    out_json, out_html = tmp_path / "metrics.json", tmp_path / "report.html"
    code = _main(["evaluate", "--source", "sample", "--scores", str(path), "--aggregator", "product",
                  "--aggregator", "max", "--by", "lang", "--by", "model", "--bootstrap", "50",
                  "--json", str(out_json), "--report", str(out_html)])
    assert code == 0
    assert loader == [("sample", "all", None)]
    printed = capsys.readouterr().out
    assert "random: 1 samples have no values" in printed
    # A registered signal is shown under its one table label (as in `much run`); an unknown name as it is.
    first_block = printed[printed.index("\nmethod "):].strip().split("\n\n")[0]  # a wide table is split in blocks
    table_rows = [line.replace("Max Likelihood", "Max-Likelihood").split()[:2] for line in first_block.splitlines()
                  if line.startswith(("Max Likelihood", "random"))]
    assert table_rows == [["Max-Likelihood", "product"], ["Max-Likelihood", "max"], ["random", "product"],
                          ["random", "max"]]
    assert "lang=fr" in printed and "model=google/gemma-3-4b-it" in printed and "model=unknown (synthetic)" in printed

    # Paired: every row is on the samples both signals cover (the one "random" lacks is left out of every row).
    assert ("paired: every row is scored on the same 159 of the 160 samples with ground truth; 1 left out: 1 without "
            "values of random") in " ".join(printed.split())
    metrics = json.loads(out_json.read_text())["results"]
    rows = split[0][1:]
    expected = score([r["values"] for r in records if r["signal_name"] == "max_likelihood"][1:],
                     [r[schema.TOKEN_CHUNKS] for r in rows], [r[schema.LABELS] for r in rows],
                     stopword_mask=[r[schema.STOPWORD_MASK] for r in rows], aggregation="max",
                     by={"lang": [r[schema.LANG] for r in rows]}, bootstrap=Bootstrap(n_resamples=50)).to_dict()
    got = next(m for m in metrics if m["signal_name"] == "max_likelihood" and m["aggregator"] == "max")
    for key in ("roc_auc", "pr_auc", "tpr_at_fpr_10", "n_claims"):
        assert got[key] == pytest.approx(expected[key], rel=1e-6)
        assert got["by"]["lang"]["de"][key] == pytest.approx(expected["by"]["lang"]["de"][key], rel=1e-6)
    assert got["intervals"]["roc_auc"] == pytest.approx(expected["intervals"]["roc_auc"], rel=1e-6)
    random_metrics = next(m for m in metrics if m["signal_name"] == "random")
    assert random_metrics["n_samples"] == len(rows) == 159
    page = out_html.read_text()
    assert page.count("data:image/png;base64,") >= 4 and "Max Likelihood" in page
    assert "paired: every row is scored on the same 159 of the 160 samples" in page  # the page says it too


def test_selection_split_and_signal_filter(loader, split, signal_file, tmp_path, capsys):
    path, _ = signal_file
    out_json = tmp_path / "m.json"
    assert _main(["evaluate", "--source", "some/folder", "--split", "train", "--selection", "manual", "--scores",
                  str(path), "--signal", "max_likelihood", "--bootstrap", "0", "--json", str(out_json)]) == 0
    assert loader[-1] == ("some/folder", "all", "train")
    (metrics,) = json.loads(out_json.read_text())["results"]
    import datasets

    both = datasets.concatenate_datasets([split[1].select(range(100)), split[1].select(range(100, 160))])
    assert metrics["n_samples"] == len(select_samples(both, manual=True)) == 30
    assert "intervals" not in metrics


def test_errors_exit_2_and_name_the_sample(loader, split, tmp_path, capsys):
    rows, _ = split
    bad = tmp_path / "bad.jsonl"
    write_signals(bad, [{"generation_id": rows[3][schema.GENERATION_ID], "signal_name": "short", "values": [0.5]}])
    assert _main(["evaluate", "--source", "sample", "--scores", str(bad), "--bootstrap", "0",
                  "--min-coverage", "0"]) == 2
    err = capsys.readouterr().err
    assert f"generation_id={rows[3][schema.GENERATION_ID]!r}" in err and "output tokens" in err
    assert _main(["evaluate", "--source", "sample", "--scores", str(tmp_path / "none.parquet")]) == 2
    assert "none.parquet: no such file or folder" in capsys.readouterr().err  # the entry point checks it first
    other = tmp_path / "other.jsonl"
    write_signals(other, [{"generation_id": "not-in-data", "signal_name": "x", "values": [0.5]}])
    assert _main(["evaluate", "--source", "sample", "--scores", str(other)]) == 2
    assert "no values for any generation_id" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        _main(["evaluate", "--source", "sample", "--scores", str(other), "--stopword-handling", "drop"])


def test_registered_in_the_much_cli():
    from much_metric import cli

    assert "evaluate" in cli.COMMANDS


def test_with_the_real_loader_on_an_export_folder(monkeypatch, tmp_path, capsys):
    """Integration with much_dataset.load (owned by the dataset engineer): an export folder of rows/*.jsonl."""
    import datasets

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "cache")
    rows = make_rows(40, seed=1)
    for row in rows[:10]:  # the test split: human-labelled, annotators agree
        row[schema.HUMAN_LABELS_0] = row[schema.HUMAN_LABELS_1] = row[schema.LABELS]
    (tmp_path / "export" / "rows").mkdir(parents=True)
    for name, part in (("train", rows[10:]), ("test", rows[:10])):
        text = "".join(json.dumps(row) + "\n" for row in part)
        (tmp_path / "export" / "rows" / f"{name}.jsonl").write_text(text)
    signals = tmp_path / "max_likelihood.jsonl"
    write_signals(signals, [{"generation_id": r[schema.GENERATION_ID], "signal_name": "max_likelihood",
                             "values": (1 - np.asarray(r[schema.LOGITS_VALUES])[:, 0]).tolist()} for r in rows])
    out_json = tmp_path / "m.json"
    assert _main(["evaluate", "--source", str(tmp_path / "export"), "--split", "test", "--scores", str(signals),
                  "--bootstrap", "0", "--json", str(out_json)]) == 0
    (metrics,) = json.loads(out_json.read_text())["results"]
    test_rows = rows[:10]
    expected = score([1 - np.asarray(r[schema.LOGITS_VALUES])[:, 0] for r in test_rows],
                     [r[schema.TOKEN_CHUNKS] for r in test_rows], [r[schema.LABELS] for r in test_rows],
                     stopword_mask=[r[schema.STOPWORD_MASK] for r in test_rows]).to_dict()
    assert metrics["n_samples"] == 10 and metrics["n_claims"] == expected["n_claims"]
    assert metrics["roc_auc"] == pytest.approx(expected["roc_auc"], abs=1e-6)
