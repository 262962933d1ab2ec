"""much_metric.signals.read_archive: the submission format read directly (the attacks through the leaderboard's
store, with "nothing stored" checked after each, are tests/much_leaderboard/test_attacks.py)."""

from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from much_metric.signals import ArchiveLimits, SubmissionRejected, read_archive

DETECTOR = {"kind": "linear", "protocol": "leave-one-language-out", "fold": "de"}


def _zip(entries: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def _jsonl(records: list[dict]) -> bytes:
    return ("\n".join(json.dumps(r) for r in records) + "\n").encode()


def test_a_valid_archive_round_trips_values_timings_and_hardware():
    parsed = read_archive(_zip({"s.jsonl": _jsonl([{"generation_id": "a", "signal_name": "s", "values": [0.25, 1]},
                                                   {"generation_id": "b", "signal_name": "s", "values": [0.5]}]),
                                "timings.json": b'{"s": {"seconds": 2}}', "hardware.json": b'{"gpu": "none"}',
                                "README.md": "# méthode\n".encode()}))
    assert sorted(parsed.signals) == ["s"] and parsed.timings == {"s": {"seconds": 2.0}}
    np.testing.assert_array_equal(parsed.signals["s"]["a"], [0.25, 1.0])
    assert parsed.hardware == {"gpu": "none"} and parsed.learned == {}


def test_a_record_given_twice_is_refused_not_warned(recwarn):
    record = {"generation_id": "a", "signal_name": "s", "values": [0.5]}
    with pytest.raises(SubmissionRejected, match=r"s.jsonl: \(generation_id='a', signal_name='s'\) given twice"):
        read_archive(_zip({"s.jsonl": _jsonl([record, record])}))
    assert not recwarn.list


def test_learned_metadata_is_read_from_jsonl_and_parquet():
    ids = ["t1", "t2", "t3"]
    jsonl = _jsonl([{"generation_id": g, "signal_name": "learned_x", "values": [0.1],
                     "metadata": {"training_generation_ids": ids[:2] if g == "a" else ids[2:], "detector": DETECTOR}}
                    for g in ("a", "b")])
    parsed = read_archive(_zip({"learned_x.jsonl": jsonl}))
    assert parsed.learned == {"learned_x": {"detector": DETECTOR, "training_generation_ids": frozenset(ids)}}

    table = pa.table({"generation_id": ["a", "b"], "signal_name": ["learned_y"] * 2, "values": [[0.1], [0.2]]})
    samples = {"a": {"training_generation_ids": ids, "detector": DETECTOR}}
    buffer = io.BytesIO()
    pq.write_table(table.replace_schema_metadata({"much.samples": json.dumps(samples)}), buffer)
    parsed = read_archive(_zip({"learned_y.parquet": buffer.getvalue()}))
    assert parsed.learned["learned_y"]["training_generation_ids"] == frozenset(ids)


@pytest.mark.parametrize(("metadata", "match"), [
    ({"detector": DETECTOR}, "must list its 'training_generation_ids'"),
    ({"training_generation_ids": "t1", "detector": DETECTOR}, "must be a list of generation_id strings"),
    ({"training_generation_ids": ["t1"], "detector": "linear"}, "needs one 'detector' object"),
])
def test_malformed_learned_metadata_is_refused(metadata, match):
    archive = _zip({"l.jsonl": _jsonl([{"generation_id": "a", "signal_name": "l", "values": [0.1],
                                        "metadata": metadata}])})
    with pytest.raises(SubmissionRejected, match=match):
        read_archive(archive)


def test_timings_and_unused_files_are_checked():
    signal = _jsonl([{"generation_id": "a", "signal_name": "s", "values": [0.5]}])
    with pytest.raises(SubmissionRejected, match=r"timings.json: signal\(s\) \['ghost'\] are not in the archive"):
        read_archive(_zip({"s.jsonl": signal, "timings.json": b'{"ghost": {"seconds": 1}}'}))
    limits = ArchiveLimits(max_unused_bytes=100)
    for name in ("README.md", ".DS_Store", "__MACOSX/._s.jsonl"):
        with pytest.raises(SubmissionRejected, match="does not use .* may hold at most 100"):
            read_archive(_zip({"s.jsonl": signal, name: b"x" * 101}), limits=limits)
        assert read_archive(_zip({"s.jsonl": signal, name: b"x" * 100}), limits=limits).signals


# --- internals: what a submission declares it needs, and packs never uploaded ------------------------------------
_RECORDS = _jsonl([{"generation_id": "a", "signal_name": "s", "values": [0.25, 1]}])


def test_submission_json_declares_the_internals_a_method_needs():
    from much_metric.signals import SUBMISSION_INTERNALS

    assert SUBMISSION_INTERNALS == ("attention", "hidden_states")
    assert read_archive(_zip({"s.jsonl": _RECORDS})).internals == ()
    parsed = read_archive(_zip({"s.jsonl": _RECORDS,
                                "submission.json": b'{"internals": ["hidden_states", "attention"]}'}))
    assert parsed.internals == ("attention", "hidden_states")
    assert read_archive(_zip({"s.jsonl": _RECORDS, "submission.json": b'{"internals": []}'})).internals == ()
    for bad, match in ((b'{"internals": ["logits"]}', '"internals" must be a list among'),
                       (b'{"internals": "attention"}', '"internals" must be a list among'),
                       (b'{"needs": ["attention"]}', r"unknown key\(s\) \['needs'\]"),
                       (b"[1]", "must hold a JSON object"), (b"{", "not valid JSON")):
        with pytest.raises(SubmissionRejected, match=f"submission.json: {match}"):
            read_archive(_zip({"s.jsonl": _RECORDS, "submission.json": bad}))


def test_an_internals_pack_in_an_archive_is_refused_with_the_reason():
    manifest = json.dumps({"attention_window": 0, "format": "much-internals/1", "rows": {}}, indent=1).encode()
    for entries, match in (
            ({"s.jsonl": _RECORDS, "shards/0a1b.safetensors": b"\0" * 64}, "'shards/0a1b.safetensors': a safetensors"),
            ({"s.jsonl": _RECORDS, "pack/shards/x.SAFETENSORS": b"\0" * 8}, "a safetensors file"),
            ({"s.jsonl": _RECORDS, "manifest.json": manifest}, "'manifest.json': the manifest of an internals pack"),
            ({"s.jsonl": _RECORDS, "pack/manifest.json": manifest}, "the manifest of an internals pack")):
        with pytest.raises(SubmissionRejected, match=match) as error:
            read_archive(_zip(entries))
        assert "internals packs (attention weights, hidden states) are never uploaded" in str(error.value)
    # another manifest.json is an unexpected file like any other
    with pytest.raises(SubmissionRejected, match="'manifest.json': unexpected file"):
        read_archive(_zip({"s.jsonl": _RECORDS, "manifest.json": b'{"format": "other"}'}))
