"""A signal file's recorded cost is validated like its values (issue 54): a NaN, an infinity or a negative anywhere in
the cost record -- the derived per-claim/per-token seconds and the machines' fields included -- is refused naming the
field, not read as a cost."""

from __future__ import annotations

import re

import pytest


@pytest.fixture(scope="module")
def signal_file(tmp_path_factory):
    import much_dataset
    from much_metric.baselines import compute_signals

    out = tmp_path_factory.mktemp("signals")
    compute_signals(much_dataset.load("sample", split="test").select(range(3)), ["max_likelihood"], out=out,
                    progress=False)
    return out / "max_likelihood.parquet"


@pytest.mark.parametrize(("field", "bad", "named"), [
    ("wall_seconds", float("nan"), "'wall_seconds'"),
    ("wall_seconds_per_claim", float("nan"), "'wall_seconds_per_claim'"),
    ("cpu_seconds_per_token", -1.0, "'cpu_seconds_per_token'"),
    ("machines", [{"cpus": float("nan")}], "'machines[0].cpus'"),
    ("machines", [{"threads": {"torch": float("inf")}}], "'machines[0].threads.torch'"),
])
def test_a_damaged_cost_record_is_refused_naming_the_field(signal_file, field, bad, named):
    from much_metric.signals import cost_of, read_signal_metadata, write_signal_metadata

    metadata = read_signal_metadata(signal_file)
    assert cost_of(metadata) is not None  # the record as written reads back
    write_signal_metadata(signal_file, {**metadata, "cost": {**metadata["cost"], field: bad}})
    try:
        with pytest.raises(ValueError, match=re.escape(f"cost field {named}")):
            cost_of(read_signal_metadata(signal_file))
    finally:
        write_signal_metadata(signal_file, metadata)
