"""``much run --signals ktc``: the sample's shipped statistics by default (the output names their corpus), the
``--neighbours`` forms (file, per-tokenizer folder, MODEL=PATH) resolved to the right statistics per sample, and
clear errors."""

from __future__ import annotations

import json

import numpy as np
import pytest

from much_dataset.schema import GENERATION_CONFIG, GENERATION_ID, MUCH_GENERATION_CONFIGS
from much_metric.baselines import KTCConfig, NeighbourStats, PerSampleNeighbours, ktc, load_neighbours
from much_metric.baselines.methods.ktc import SAMPLE_NEIGHBOURS
from much_metric.benchmark.resources import neighbours_for_run
from much_metric.cli import main
from much_metric.signals import read_signals

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
GEMMA = "google/gemma-3-4b-it"


def _config_of(model: str) -> str:
    return next(cid for cid, c in MUCH_GENERATION_CONFIGS.items() if c["model"] == model)


def _stats(tokenizer: str, seed: int) -> NeighbourStats:
    rng = np.random.default_rng(seed)
    neighbours = rng.integers(0, 50, (50, 4)).astype(np.int32)
    return NeighbourStats(neighbours, np.ones((50, 4), np.int64), tokenizer=tokenizer, corpus=f"corpus {seed}",
                          n_tokens=100)


def _much_dataset() -> dict[str, list[str]]:
    return {GENERATION_ID: ["a", "b", "c"], GENERATION_CONFIG: [_config_of(LLAMA), _config_of(GEMMA),
                                                                  _config_of(LLAMA)]}


def test_sample_run_prints_ktc_with_its_corpus_and_matches_the_library(tmp_path, capsys):
    out = tmp_path / "signals"
    report = tmp_path / "table.json"
    assert main(["run", "--source", "sample", "--split", "test", "--signals", "ktc", "--bootstrap", "40",
                 "--no-progress", "--out", str(out), "--file-format", "jsonl", "--json", str(report)]) == 0
    text = capsys.readouterr().out
    assert "KTC neighbour statistics (shipped with the sample): SmolLM2-135M-Instruct: Mu-SHROOM test split" in text
    row = next(line for line in text.splitlines() if line.startswith("KTC"))
    assert "%" in row and "[" in row  # runtime relative to generation, metric with its interval
    payload = json.loads(report.read_text())
    (result,) = payload["results"]
    assert result["signal_name"] == KTCConfig(nu=4, tau=0.3).signal_name and 0 < result["uq_seconds"]
    assert 0.5 < result["roc_auc"] < 1

    import much_dataset

    sample = much_dataset.load("sample", split="test")
    want = ktc(sample, KTCConfig(nu=4, tau=0.3), neighbours=load_neighbours(SAMPLE_NEIGHBOURS))
    written = read_signals(out)[result["signal_name"]]
    for gid, values in zip(sample[GENERATION_ID], want, strict=True):
        np.testing.assert_array_equal(written[gid], values)

    # The same file given explicitly: same scores (the run reuses nothing: another --out).
    assert main(["run", "--source", "sample", "--split", "test", "--signals", "ktc", "--bootstrap", "0",
                 "--no-progress", "--neighbours", str(SAMPLE_NEIGHBOURS), "--out", str(tmp_path / "again"),
                 "--file-format", "jsonl"]) == 0
    assert "KTC neighbour statistics: SmolLM2-135M-Instruct" in capsys.readouterr().out
    again = read_signals(tmp_path / "again")[result["signal_name"]]
    assert all(np.array_equal(again[gid], written[gid]) for gid in written)


def test_folder_of_per_tokenizer_files_maps_each_sample_to_its_model(tmp_path):
    _stats(LLAMA, 1).save(tmp_path / "llama31.npz")
    _stats("gemma-3-4b-it", 2).save(tmp_path / "whatever.npz")  # matched by the last part of the model id
    _stats("gpt2", 3).save(tmp_path / "gpt2.npz")
    notes: list[str] = []
    got = neighbours_for_run([str(tmp_path)], _much_dataset(), notes)
    assert isinstance(got, PerSampleNeighbours)
    assert got.key_of == {"a": LLAMA, "b": GEMMA, "c": LLAMA}
    assert got.stats[LLAMA].corpus == "corpus 1" and got.stats[GEMMA].corpus == "corpus 2"
    assert any("gpt2" in note and "not used" in note for note in notes)
    assert any(note.startswith(f"KTC neighbour statistics for {LLAMA}: ") and "corpus 1" in note for note in notes)


def test_model_equals_path_pairs_and_a_missing_model(tmp_path):
    _stats(LLAMA, 1).save(tmp_path / "l.npz")
    notes: list[str] = []
    got = neighbours_for_run([f"{LLAMA}={tmp_path / 'l.npz'}"], _much_dataset(), notes)
    assert set(got.stats) == {LLAMA} and got.key_of["b"] == GEMMA
    assert any(f"no neighbour statistics for {GEMMA}" in note for note in notes)


def test_one_file_for_several_models_is_an_error(tmp_path):
    _stats(LLAMA, 1).save(tmp_path / "l.npz")
    with pytest.raises(ValueError, match="one statistics file for samples of 2 generating models"):
        neighbours_for_run([str(tmp_path / "l.npz")], _much_dataset(), [])
    single = {GENERATION_ID: ["a"], GENERATION_CONFIG: [_config_of(LLAMA)]}
    assert isinstance(neighbours_for_run([str(tmp_path / "l.npz")], single, []), NeighbourStats)
    with pytest.raises(FileNotFoundError, match="no such file or folder"):
        neighbours_for_run([str(tmp_path / "missing.npz")], single, [])
    assert neighbours_for_run(None, single, []) is None  # not the sample: no default


def test_run_errors_exit_2(capsys, tmp_path):
    assert main(["run", "--source", "sample", "--split", "test", "--signals", "ktc", "--bootstrap", "0",
                 "--no-progress", "--neighbours", str(tmp_path / "none.npz")]) == 2
    assert "much run: error: neighbour statistics" in capsys.readouterr().err
