"""Every attack on the submission endpoint is refused with a message naming the rule, and nothing is stored."""

from __future__ import annotations

import io
import json
import pickle
import re
import zipfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from much_leaderboard import Leaderboard
from much_metric.signals import ArchiveLimits as Limits
from much_metric.signals import SubmissionRejected, read_archive
from tests.much_leaderboard._helpers import jsonl_bytes, make_zip, store_is_empty, valid_archive

FORM = {"method": "attack", "authors": "", "link": "", "needs": []}


def _parquet(table: pa.Table) -> bytes:
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    return buffer.getvalue()


def _refused(tmp_path: Path, evaluation, archive: bytes, match: str, *, limits: Limits | None = None,
             form: dict | None = None) -> str:
    board = Leaderboard(tmp_path / "store", data=evaluation, limits=limits or Limits())
    outcome = board.submit(archive, form or FORM)
    assert outcome.status == "rejected", outcome
    assert outcome.message.startswith("rejected: ")
    assert re.search(match, outcome.message), outcome.message
    assert store_is_empty(tmp_path / "store")
    return outcome.message


def test_valid_archive_is_accepted(tmp_path, evaluation, signals):
    board = Leaderboard(tmp_path / "store", data=evaluation)
    outcome = board.submit(valid_archive(signals), FORM)
    assert outcome.status == "accepted" and outcome.signals == ["my_method"]
    [row] = board.store.rows()
    assert row["metrics"]["overall"]["n_samples"] == 606 and row["metrics"]["seconds"] == 1.5


def test_archive_over_the_size_limit(tmp_path, evaluation, signals):
    _refused(tmp_path, evaluation, valid_archive(signals), r"bytes, more than the limit of 1,000",
             limits=Limits(max_archive_bytes=1000))


def test_zip_bomb_by_ratio(tmp_path, evaluation):
    bomb = make_zip({"bomb.jsonl": b"\0" * (20 * 2**20)})
    assert len(bomb) < 100_000
    _refused(tmp_path, evaluation, bomb, r"compression ratio \d+:1 above 100:1 \(zip bomb\)")


def test_zip_bomb_header_lies_about_its_size(tmp_path, evaluation):
    # the central directory says 10 bytes; the stream inflates to 5 MiB: counted while reading, never trusted
    data = bytearray(make_zip({"bomb.jsonl": b"\0" * (5 * 2**20)}))
    real = (5 * 2**20).to_bytes(4, "little")
    data = bytes(data).replace(real, (10).to_bytes(4, "little"))
    message = _refused(tmp_path, evaluation, data, r"zip bomb|unreadable archive entry")
    assert "bomb.jsonl" in message or "unreadable" in message


def test_too_many_entries(tmp_path, evaluation):
    _refused(tmp_path, evaluation, make_zip({f"s{k}.jsonl": b"" for k in range(40)}),
             r"40 entries, more than the limit of 32")


def test_huge_central_directory_is_refused_before_parsing(tmp_path, evaluation, monkeypatch):
    archive = make_zip({f"s{k}.jsonl": b"" for k in range(20_000)}, compression=zipfile.ZIP_STORED)
    monkeypatch.setattr(zipfile, "ZipFile", lambda *a, **k: pytest.fail("zipfile parsed the central directory"))
    _refused(tmp_path, evaluation, archive, r"20,000 entries, more than the limit of 32")


@pytest.mark.parametrize("name", ["../evil.jsonl", "a/../../evil.jsonl"])
def test_path_traversal(tmp_path, evaluation, signals, name):
    _refused(tmp_path, evaluation, make_zip({name: jsonl_bytes(signals)}), r"path traversal")


@pytest.mark.parametrize("name", ["/etc/evil.jsonl", "C:/evil.jsonl"])
def test_absolute_path(tmp_path, evaluation, signals, name):
    _refused(tmp_path, evaluation, make_zip({name: jsonl_bytes(signals)}), r"absolute path")


def test_symbolic_link(tmp_path, evaluation):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        info = zipfile.ZipInfo("leak.jsonl")
        info.create_system = 3
        info.external_attr = (0o120777 << 16)
        archive.writestr(info, "/etc/passwd")
    _refused(tmp_path, evaluation, buffer.getvalue(), r"symbolic links are refused")


def test_non_utf8_file_name(tmp_path, evaluation, signals):
    data = make_zip({"X.jsonl": jsonl_bytes(signals)}).replace(b"X.jsonl", b"\xe9.jsonl")
    _refused(tmp_path, evaluation, data, r"file names must be UTF-8")


def test_non_utf8_jsonl(tmp_path, evaluation):
    _refused(tmp_path, evaluation, make_zip({"m.jsonl": b'{"generation_id": "\xff\xfe"}\n'}),
             r"m.jsonl:1: not UTF-8 text")


def test_gigantic_jsonl_line(tmp_path, evaluation):
    line = b'{"generation_id": "x", "values": [' + b"0.5," * 600_000 + b"0.5]}\n"
    _refused(tmp_path, evaluation, make_zip({"m.jsonl": line}, compression=zipfile.ZIP_STORED),
             r"m.jsonl:1: line of [\d,]+ bytes, more than the limit")


def test_parquet_with_absurd_metadata(tmp_path, evaluation):
    table = pa.table({"generation_id": ["a"], "values": [[0.5]]}).replace_schema_metadata({"pandas": "x" * 1_200_000})
    _refused(tmp_path, evaluation, make_zip({"m.parquet": _parquet(table)}, compression=zipfile.ZIP_STORED),
             r"metadata larger than")


def test_parquet_with_nested_types(tmp_path, evaluation):
    table = pa.table({"generation_id": ["a"], "values": [[[0.5, 0.1]]]})
    _refused(tmp_path, evaluation, make_zip({"m.parquet": _parquet(table)}),
             r"column 'values' has type list<.*list<.*double>>.*nested")


def test_parquet_with_struct_column(tmp_path, evaluation):
    table = pa.table({"generation_id": ["a"], "values": [[0.5]], "extra": [{"a": 1}]})
    _refused(tmp_path, evaluation, make_zip({"m.parquet": _parquet(table)}), r"column 'extra'.*no such column")


class _Trap:
    """Unpickling this would create the marker file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def test_pickle_in_parquet_metadata_is_never_loaded(tmp_path, evaluation):
    marker = tmp_path / "pwned"
    table = pa.table({"generation_id": ["a"], "values": [[0.5]]}).replace_schema_metadata(
        {"payload": pickle.dumps(_Trap(marker))})
    _refused(tmp_path, evaluation, make_zip({"m.parquet": _parquet(table)}), r"unexpected parquet metadata key")
    assert not marker.exists()


@pytest.mark.parametrize("name", ["model.pkl", "setup.py", "weights.pt", "scores.npy", "run.sh"])
def test_pickle_and_code_files_are_refused(tmp_path, evaluation, name):
    marker = tmp_path / "pwned"
    _refused(tmp_path, evaluation, make_zip({name: pickle.dumps(_Trap(marker))}),
             r"unexpected file.*no pickle, no code")
    assert not marker.exists()


def test_not_a_zip(tmp_path, evaluation):
    _refused(tmp_path, evaluation, b"PK\x03\x04 not really", r"not a zip archive")


def test_html_in_signal_name_is_refused(tmp_path, evaluation, signals):
    _refused(tmp_path, evaluation, make_zip({"m.jsonl": jsonl_bytes(signals, "<img src=x onerror=alert(1)>")}),
             r"signal_name .*letters, digits")


def test_deeply_nested_json(tmp_path, evaluation, signals):
    _refused(tmp_path, evaluation, make_zip({"m.jsonl": jsonl_bytes(signals), "timings.json": b"[" * 50_000},
                                               compression=zipfile.ZIP_STORED),
             r"timings.json: not valid JSON")


def test_non_finite_values(tmp_path, evaluation, signals):
    broken = {"m": dict(signals["max_likelihood"])}
    gid = next(iter(broken["m"]))
    broken["m"][gid] = np.array([np.nan, *broken["m"][gid][1:]])
    data = jsonl_bytes(broken).replace(b"NaN", b"NaN")
    _refused(tmp_path, evaluation, make_zip({"m.jsonl": data}), rf"generation_id='{gid}'.*non-finite|not a JSON")


def test_wrong_number_of_values(tmp_path, evaluation, signals):
    broken = {"m": dict(signals["max_likelihood"])}
    gid = next(iter(broken["m"]))
    broken["m"][gid] = broken["m"][gid][:-1]
    _refused(tmp_path, evaluation, make_zip({"m.jsonl": jsonl_bytes(broken)}),
             rf"does not match the evaluation data:.*{gid}")


def test_coverage_below_threshold(tmp_path, evaluation, signals):
    few = {"m": dict(list(signals["max_likelihood"].items())[:100])}
    _refused(tmp_path, evaluation, make_zip({"m.jsonl": jsonl_bytes(few)}),
             r"does not match the evaluation data:.*cover")


def test_unknown_generation_id(tmp_path, evaluation, signals):
    more = {"m": {**signals["max_likelihood"], "not-a-sample": np.array([0.5, 0.5])}}
    _refused(tmp_path, evaluation, make_zip({"m.jsonl": jsonl_bytes(more)}),
             r"1 generation_id\(s\) not in the evaluation")


@pytest.mark.parametrize(("form", "match"), [
    ({"method": ""}, r"'method' is required"),
    ({"method": "x" * 81}, r"81 characters, at most 80"),
    ({"method": "a\u202eb"}, r"invisible formatting"),
    ({"method": "m", "link": "javascript:alert(1)"}, r"http\(s\) URL"),
    ({"method": "m", "needs": ["root access"]}, r"'needs' must be a list"),
    ({"method": "m", "token": "x"}, r"unknown form field"),
])
def test_bad_form(tmp_path, evaluation, signals, form, match):
    _refused(tmp_path, evaluation, valid_archive(signals), match, form=form)


def test_read_archive_keeps_timings_and_hardware(signals):
    parsed = read_archive(valid_archive(signals, timings=2.0))
    assert parsed.timings == {"my_method": {"seconds": 2.0}} and parsed.hardware == {"device": "2 CPU cores"}
    assert set(parsed.signals) == {"my_method"} and len(parsed.signals["my_method"]) == 606
    with pytest.raises(SubmissionRejected, match="timings.json: 'my_method' needs a finite number"):
        read_archive(make_zip({"m.jsonl": jsonl_bytes(signals),
                               "timings.json": json.dumps({"my_method": {"seconds": -1}}).encode()}))


def test_token_values_outside_zero_one(tmp_path, evaluation, signals):
    scaled = {"m": {gid: v * 10 for gid, v in signals["max_likelihood"].items()}}
    _refused(tmp_path, evaluation, make_zip({"m.jsonl": jsonl_bytes(scaled)}), r"token values must lie in \[0, 1\]")


def test_an_internals_pack_is_never_uploaded(tmp_path, evaluation, signals):
    """A pack's shard or manifest beside valid signals: refused with the reason, nothing stored."""
    good = {"my_method.jsonl": jsonl_bytes(signals, "my_method")}
    manifest = json.dumps({"format": "much-internals/1", "rows": {"x": {"n_tokens": 3}}}).encode()
    _refused(tmp_path / "a", evaluation, make_zip({**good, "shards/ab12.safetensors": b"\0" * 128}),
             r"a safetensors file; internals packs .* are never uploaded")
    _refused(tmp_path / "b", evaluation, make_zip({**good, "manifest.json": manifest}),
             r"the manifest of an internals pack; internals packs .* are never uploaded")
