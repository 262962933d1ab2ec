"""Values for generation_ids that the dataset does not hold are never dropped silently (#22): the API warns with how
many and which, the table records them, ``much evaluate`` prints a note."""

from __future__ import annotations

import numpy as np
import pytest

from much_dataset import schema
from much_dataset.synthetic import make_rows
from much_metric.report import EvaluationOptions, evaluate_signals
from much_metric.scoring import MuchMetricWarning


@pytest.fixture(scope="module")
def rows():
    return make_rows(30, seed=5)


def _signal(rows, n_unknown):
    rng = np.random.default_rng(0)
    values = {r[schema.GENERATION_ID]: rng.random(len(r[schema.OUTPUT_TOKENS])) for r in rows}
    values.update({f"stranger-{k:03d}": rng.random(3) for k in range(n_unknown)})
    return {"x": values}


def test_unknown_ids_are_counted_and_named(rows):
    with pytest.warns(MuchMetricWarning, match=r"signal 'x' \(f\.jsonl\): 100 generation_id\(s\) are not in the "
                                               r"dataset and are ignored: 'stranger-000', 'stranger-001'"):
        table = evaluate_signals(rows, _signal(rows, 100),
                                 evaluation=EvaluationOptions(bootstrap=None), source="f.jsonl")
    assert table.unknown == {"x": [f"stranger-{k:03d}" for k in range(100)]}
    assert table.coverage == {"x": 1.0}  # the dataset's samples are all covered


def test_no_unknown_id_no_warning(rows, recwarn):
    table = evaluate_signals(rows, _signal(rows, 0), evaluation=EvaluationOptions(bootstrap=None))
    assert table.unknown == {"x": []}
    assert not [w for w in recwarn if "not in the dataset" in str(w.message)]


def test_much_evaluate_prints_how_many_and_which(tmp_path, capsys, monkeypatch):
    import much_dataset
    from much_metric.cli import main
    from much_metric.signals import write_signals

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    sample = much_dataset.load("sample", split="test")
    records = [{"generation_id": gid, "signal_name": "ml", "values": 1 - np.array([v[0] for v in values])}
               for gid, values in zip(sample[schema.GENERATION_ID], sample[schema.LOGITS_VALUES], strict=True)]
    records += [{"generation_id": f"other-{k}", "signal_name": "ml", "values": [0.5]} for k in range(12)]
    write_signals(tmp_path / "s.jsonl", records)
    assert main(["evaluate", "--source", "sample", "--scores", str(tmp_path / "s.jsonl"), "--bootstrap", "0"]) == 0
    out = capsys.readouterr().out
    assert "note: ml: 12 generation_ids of the signal file are not in the dataset and are ignored: 'other-0'" in out
    assert "(and 2 more)" in out
