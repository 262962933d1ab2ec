"""Signals computed from an internals pack record that pack; a resumed ``much run --out`` never mixes two packs'
values in one file, and ``much evaluate --internals PACK`` refuses files computed from another pack."""

from __future__ import annotations

import pytest

import much_dataset
from much_metric.cli import main
from much_metric.signals import (
    INTERNALS_PACK_KEY,
    internals_pack_record,
    read_signal_metadata,
    read_signals,
    write_signal_metadata,
)
from tests.much_metric.baselines._packs import write_random_pack


@pytest.fixture(scope="module")
def english():
    return much_dataset.load("sample", config="en", split="test")


@pytest.fixture(scope="module")
def packs(english, tmp_path_factory):
    """Two packs of the same rows built differently (the second one also keeps the attention diagonal)."""
    first, second = tmp_path_factory.mktemp("pack-a"), tmp_path_factory.mktemp("pack-b")
    write_random_pack(first, english)
    write_random_pack(second, english, attention_to_self=True)
    return first, second


def _run(pack, out, *extra):
    return main(["run", "--source", "sample", "--config", "en", "--internals", str(pack), "--signals", "rauq",
                 "--bootstrap", "0", "--no-progress", "--out", str(out), *extra])


def test_fingerprint_ignores_the_rows_and_follows_the_computation(english, packs, tmp_path):
    first, second = (much_dataset.load_internals(p) for p in packs)
    assert first.fingerprint != second.fingerprint
    half = tmp_path / "half"
    write_random_pack(half, english.select(range(20)))
    grown = much_dataset.load_internals(half)
    assert len(grown) == 20 < len(first) and grown.fingerprint == first.fingerprint


def test_resume_from_another_pack_is_refused_and_evaluate_checks_the_pack(packs, tmp_path, capsys):
    first, second = packs
    out = tmp_path / "signals"
    assert _run(first, out) == 0
    (path,) = out.glob("rauq.*")
    recorded = read_signal_metadata(path)[INTERNALS_PACK_KEY]
    assert recorded == internals_pack_record(much_dataset.load_internals(first))
    before = read_signals(path)
    capsys.readouterr()

    assert _run(second, out) == 2  # the stored values are the first pack's: never mixed with the second's
    err = capsys.readouterr().err
    assert str(path) in err and "computed from another internals pack" in err
    assert read_signals(path).keys() == before.keys()
    assert _run(first, out) == 0  # the same pack resumes (nothing left to compute)
    capsys.readouterr()

    evaluate = ["evaluate", "--source", "sample", "--config", "en", "--scores", str(out), "--bootstrap", "0"]
    assert main([*evaluate, "--internals", str(first)]) == 0
    assert "RAUQ computed from it (checked)" in " ".join(capsys.readouterr().out.split())
    assert main([*evaluate, "--internals", str(second)]) == 2
    assert "computed from another internals pack" in capsys.readouterr().err
    assert main(evaluate) == 0  # without --internals nothing is checked

    write_signal_metadata(path, {})  # a file written before the record existed: its pack is unknown
    capsys.readouterr()
    assert _run(first, out) == 2
    assert "does not record the internals pack" in capsys.readouterr().err
