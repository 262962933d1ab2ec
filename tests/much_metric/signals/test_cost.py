"""The cost a signal file records (issue #48): the format (signal metadata ``cost``, readable by every reader and by
the submission archive reader), a submitter's declared cost, and the Pareto front the report draws."""

from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import pytest

from much_metric.report import pareto_front
from much_metric.signals import (
    COST_KEY,
    DeclaredCost,
    SignalCost,
    SubmissionRejected,
    cost_of,
    format_seconds,
    machine_record,
    read_archive,
    read_signal_metadata,
    read_signals,
    write_signal_metadata,
    write_signals,
)


def _cost(**changes):
    base = dict(wall_seconds=2.0, cpu_seconds=3.0, n_samples=10, n_tokens=400, n_claims=50, forward_passes=7,
                machines=(machine_record(),))
    return SignalCost(**{**base, **changes})


def test_a_cost_round_trips_with_per_claim_and_per_token_seconds():
    cost = _cost()
    stored = json.loads(json.dumps(cost.to_dict()))
    assert stored["wall_seconds_per_claim"] == 2.0 / 50 and stored["cpu_seconds_per_token"] == 3.0 / 400
    assert stored["forward_passes"] == 7 and stored["samples"] == stored["model_calls"] == 0
    assert stored["machines"][0]["threads"]["cpus_available"] >= 1 and stored["machines"][0]["cpus"] >= 1
    assert SignalCost.from_dict(stored) == cost
    assert cost_of({COST_KEY: stored}) == cost and cost_of({}) is None
    assert np.isnan(_cost(n_claims=None).seconds_per_claim)


def test_two_parts_of_a_resumed_signal_add_up():
    total = _cost().plus(_cost(wall_seconds=1.0, n_claims=30, machines=({"system": "other"},)))
    assert (total.wall_seconds, total.n_claims, total.n_samples, total.forward_passes) == (3.0, 80, 20, 14)
    assert len(total.machines) == 2
    with pytest.raises(ValueError, match="top-5 to one computed on top-None"):
        _cost().plus(_cost(top_k=5))


@pytest.mark.parametrize(("field", "value"), [("wall_seconds", -1), ("n_claims", 1.5), ("forward_passes", True),
                                              ("cpu_seconds", "3"), ("machines", "here")])
def test_a_malformed_cost_is_named(field, value):
    with pytest.raises(ValueError, match=f"'{field}'"):
        SignalCost.from_dict({**_cost().to_dict(), field: value})


def test_the_cost_rides_in_the_signal_metadata_readers_ignore(tmp_path):
    path = tmp_path / "mine.parquet"
    write_signals(path, [{"generation_id": "g1", "signal_name": "mine", "values": [0.1, 0.2]}])
    write_signal_metadata(path, {COST_KEY: _cost().to_dict()})
    assert list(read_signals(path)) == ["mine"]  # a plain MUCH-signals file for the reader
    assert cost_of(read_signal_metadata(path)) == _cost()
    import pyarrow.parquet as pq

    assert pq.read_table(path).column_names == ["generation_id", "signal_name", "values"]


def _zip(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def test_the_archive_reader_reads_recorded_and_declared_costs(tmp_path):
    path = tmp_path / "mine.parquet"
    write_signals(path, [{"generation_id": "g1", "signal_name": "mine", "values": [0.1, 0.2]}])
    write_signal_metadata(path, {COST_KEY: _cost().to_dict()})
    recorded = read_archive(_zip({"mine.parquet": path.read_bytes()}))
    assert recorded.costs == {"mine": _cost()}
    declared = {"cost": {"mine": {"seconds_per_claim": 0.004, "machine": "1 x A100", "note": "5 samples"}}}
    parsed = read_archive(_zip({"mine.parquet": path.read_bytes(), "submission.json": json.dumps(declared).encode()}))
    assert parsed.costs == {"mine": DeclaredCost(seconds_per_claim=0.004, machine="1 x A100", note="5 samples")}


@pytest.mark.parametrize(("declared", "message"), [
    ({"cost": {"other": {"seconds_per_claim": 1}}}, r'submission.json "cost": signal\(s\) \[.other.\] are not in'),
    ({"cost": {"mine": {"seconds_per_claim": -1}}}, r"'seconds_per_claim' must be a number in \[0, inf\)"),
    ({"cost": {"mine": {"seconds_per_claim": 1, "gpu": "x"}}}, r"unknown declared cost field\(s\) \['gpu'\]"),
    ({"cost": {"mine": {"seconds_per_claim": 1, "note": "a\nb"}}}, "'note' must be one line of text"),
    ({"cost": []}, '"cost" must be an object'),
    ({"costs": {}}, r"unknown key\(s\) \['costs'\]"),
])
def test_a_bad_declared_cost_is_refused_with_its_reason(declared, message):
    record = json.dumps({"generation_id": "g1", "signal_name": "mine", "values": [0.1]}).encode() + b"\n"
    with pytest.raises(SubmissionRejected, match=message):
        read_archive(_zip({"mine.jsonl": record, "submission.json": json.dumps(declared).encode()}))


def test_a_malformed_recorded_cost_is_refused(tmp_path):
    path = tmp_path / "mine.parquet"
    write_signals(path, [{"generation_id": "g1", "signal_name": "mine", "values": [0.1, 0.2]}])
    write_signal_metadata(path, {COST_KEY: {"wall_seconds": "fast"}})
    with pytest.raises(SubmissionRejected, match="signal 'mine': its signal metadata's 'cost': .*'wall_seconds'"):
        read_archive(_zip({"mine.parquet": path.read_bytes()}))


def test_the_pareto_front_is_what_no_other_point_beats():
    rng = np.random.default_rng(0)
    for _ in range(50):
        n = int(rng.integers(1, 9))
        cost, value = rng.integers(0, 4, n).astype(float), rng.integers(0, 4, n).astype(float)
        brute = [not any(cost[j] <= cost[i] and value[j] >= value[i] and (cost[j] < cost[i] or value[j] > value[i])
                         for j in range(n) if j != i) for i in range(n)]
        assert pareto_front(cost, value).tolist() == brute
    assert pareto_front([1.0, np.nan], [0.5, 0.9]).tolist() == [True, False]


def test_seconds_are_written_with_their_unit():
    assert [format_seconds(s) for s in (2.5, 0.0123, 3.1e-6, 4e-10, None, float("nan"))] == \
        ["2.5 s", "12.3 ms", "3.1 µs", "0.4 ns", "—", "—"]
