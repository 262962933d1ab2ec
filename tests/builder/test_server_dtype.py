"""The server route's dtype (issue 53): the documented server command carries the dtype of the one dtype rule,
``generate --engine openai`` records the dtype it can establish (the server's report, the maintainer's ``--dtype``,
checked against each other) and warns when it cannot, and ``verify`` names the dtype when a failure has its size."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from builder.cli import main
from builder.generation.dtype import DTYPE_SIZED_DIFFERENCE, default_dtype, dtype_hint
from builder.store import read_store
from much_dataset import schema
from tests.builder import _smollm
from tests.builder.fake_generation_server import FakeGenerationServer
from tests.builder.test_replay import SAMPLE, _sample_rows

REPO = Path(__file__).resolve().parents[2]
QUESTIONS = [{"question_id": f"q{i}", "lang": "en", "prompt": f"Question number {i}?",
              "wiki_url": f"https://en.wikipedia.org/wiki/Q{i}"} for i in range(3)]


def _generate(tmp_path: Path, server: FakeGenerationServer, *extra: str) -> int:
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    (out / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    return main(["generate", "--out", str(out), "--model", "fake-model", "--engine", "openai", "--base-url",
                 server.base_url, "--backoff", "0", "--tokenizer", "smollm2", *extra])


def _recorded(tmp_path: Path) -> tuple[set, set]:
    rows = {r.get("dtype") for r in read_store(tmp_path / "out" / "generations.jsonl")}
    configs = {c.get("dtype") for c in read_store(tmp_path / "out" / "configs.jsonl")}
    return rows, configs


def test_without_a_dtype_anywhere_the_rows_record_null_and_generate_says_so(tmp_path, capsys):
    with FakeGenerationServer() as server:  # reports no dtype, as vllm serve
        assert _generate(tmp_path, server) == 0
    captured = capsys.readouterr()
    assert "WARNING: the server's dtype is not known" in captured.err and "--dtype float32" in captured.err
    assert "dtype not known" in captured.out
    assert _recorded(tmp_path) == ({None}, {None})


def test_the_server_s_reported_dtype_is_recorded(tmp_path, capsys):
    with FakeGenerationServer(dtype="bfloat16") as server:
        assert _generate(tmp_path, server) == 0
    captured = capsys.readouterr()
    assert "WARNING" not in captured.err and "dtype bfloat16 (reported by the server)" in captured.out
    assert _recorded(tmp_path) == ({"bfloat16"}, {"bfloat16"})


def test_a_declared_dtype_is_checked_against_the_server_s(tmp_path, capsys):
    with FakeGenerationServer(dtype="bfloat16") as server:
        assert _generate(tmp_path, server, "--dtype", "float32") == 2
    err = capsys.readouterr().err
    assert "--dtype float32" in err and "reports bfloat16" in err
    assert not (tmp_path / "out" / "generations.jsonl").exists() or _recorded(tmp_path)[0] == set()
    with FakeGenerationServer(dtype="float32") as server:
        assert _generate(tmp_path, server, "--dtype", "float32") == 0
    assert "confirmed by the server" in capsys.readouterr().out
    assert _recorded(tmp_path) == ({"float32"}, {"float32"})


def test_a_declared_dtype_is_recorded_when_the_server_reports_none(tmp_path, capsys):
    with FakeGenerationServer() as server:
        assert _generate(tmp_path, server, "--dtype", "float32") == 0
    captured = capsys.readouterr()
    assert "WARNING" not in captured.err and "the server does not report its dtype" in captured.out
    assert _recorded(tmp_path) == ({"float32"}, {"float32"})


def _server_commands(text: str) -> list[str]:
    joined = text.replace("\\\n", " ")
    return [line for line in joined.splitlines() if "vllm.entrypoints.openai.api_server" in line
            and "--model" in line]


def _flag(command: str, flag: str) -> str | None:
    found = re.search(rf"{flag}[ =](\S+)", command)
    return found.group(1) if found else None


def test_the_documented_server_route_carries_the_dtype_of_the_rule():
    """docs/generation.md's server command runs the rule's CPU dtype (vLLM's "auto" would be bfloat16 there), and
    its generate command declares the same; the cluster script passes one DTYPE to both."""
    text = (REPO / "docs" / "generation.md").read_text()
    servers = _server_commands(text)
    assert servers, "docs/generation.md shows no vllm server command"
    for command in servers:
        assert _flag(command, "--dtype") == default_dtype("cpu"), command
    generates = [m.group(0) for m in re.finditer(r"python -m builder generate --engine openai[^`]*", text.replace(
        "\n", " "))]
    assert generates and all(re.search(r"--dtype float32\b", g) for g in generates), generates
    script = (REPO / "scripts" / "cluster" / "generate_vllm.sbatch").read_text()
    assert script.count('--dtype "$DTYPE"') == 2 and 'DTYPE=${DTYPE:-bfloat16}' in script


def test_dtype_hint_names_the_dtype_only_when_it_is_the_likely_cause():
    large = 10 * DTYPE_SIZED_DIFFERENCE
    assert "record no dtype" in dtype_hint(None, "float32", large) and "--dtype bfloat16" in \
        dtype_hint(None, "float32", large)
    assert "record bfloat16 but were re-forwarded in float32" in dtype_hint("bfloat16", "float32", large)
    assert dtype_hint("float32", "float32", large) == ""  # the dtype is not the cause: the values are
    assert dtype_hint(None, "float32", DTYPE_SIZED_DIFFERENCE / 10) == ""  # too small to be a dtype's


@pytest.mark.parametrize("recorded, extra, named", [(None, [], "record no dtype"),
                                                     ("bfloat16", ["--dtype", "float32"], "record bfloat16"),
                                                     ("float32", [], None)])
def test_verify_names_the_dtype_when_a_failure_has_its_size(tmp_path, capsys, one_smollm2_load, recorded, extra,
                                                            named):
    """Rows whose values are off by a dtype's size (0.02): verify fails every row, and its message names the dtype
    unless the rows record the dtype of the pass (then the values are wrong, not the dtype)."""
    rows = [dict(r) for r in _sample_rows(2)]
    for row in rows:
        row[schema.LOGITS_VALUES] = [[max(0.0, p - 0.02) for p in position] for position in row[schema.LOGITS_VALUES]]
        row.pop("dtype", None)
        if recorded:
            row["dtype"] = recorded
    source = tmp_path / "rows.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    argv = ["verify", "--out", str(tmp_path), "--source", str(source), "--rows", "2", "--model",
            _smollm.gguf_path(), "--prompt-style", "user", "--out-of-top", "swap", *extra]
    assert SAMPLE.exists() and main(argv) == 1
    out = capsys.readouterr().out
    report = json.loads((tmp_path / "verify.json").read_text())
    assert report["failed_rows"] == 2 and report["dtype"] == "float32"
    if named:
        assert "likely the dtype" in out and named in out and named in report["dtype_hint"]
    else:
        assert "likely the dtype" not in out and report["dtype_hint"] == ""
