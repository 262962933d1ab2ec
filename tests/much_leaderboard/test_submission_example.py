"""Issue 57: the leaderboard page's submission example submits a method the registry does not hold (it scored the
registry's probability_margin under a new name) and writes the timings that give its row a cost."""

from __future__ import annotations

import json
import zipfile

import numpy as np

from tests.test_docs_commands import page_steps


def test_the_example_is_a_new_method_with_its_timings(tmp_path, monkeypatch):
    import much_dataset
    from much_metric.baselines import available, resolve, token_arrays
    from much_metric.baselines.runtime import read_timings
    from much_metric.signals import read_signals

    block = next(step.text for step in page_steps("docs/leaderboard.md")
                 if step.kind == "python" and "write_submission.py" in step.text)
    monkeypatch.chdir(tmp_path)
    exec(compile(block, "write_submission.py", "exec"), {"__name__": "__main__"})
    with zipfile.ZipFile(tmp_path / "submission.zip") as archive:
        names = set(archive.namelist())
    assert {"timings.json", "hardware.json"} <= names
    (name,) = [n.rsplit(".", 1)[0] for n in names if n.endswith((".parquet", ".jsonl"))]
    timings = read_timings(tmp_path / "my-method" / "timings.json")
    assert timings[name]["seconds"] > 0 and timings[name]["n_samples"] == 606
    assert json.loads((tmp_path / "my-method" / "hardware.json").read_text())
    try:
        resolve(name)
        registered = True
    except ValueError:
        registered = False
    assert not registered and name not in available()
    # not a registry method's values under another name: none of the probability-only defaults gives them
    values = read_signals(tmp_path / "my-method")[name]
    data = much_dataset.load("sample", split="test")
    arrays = token_arrays(data)
    mine = np.concatenate([values[g] for g in arrays.generation_ids])
    for signal in ("probability_margin", "max_likelihood", "token_likelihood", "token_entropy_24"):
        computed = resolve(signal).compute(arrays, {}, {})
        theirs = np.concatenate(computed) if isinstance(computed, list) else np.asarray(computed, dtype=float)
        assert not np.allclose(mine, theirs), signal
