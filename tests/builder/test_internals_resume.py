"""Issue #44: ``builder internals`` checks a pack against its manifest when it resumes (a damaged shard's rows are
recomputed and said, never "N done, 0 to go"), enforces the free check (a stored-probability difference above
``--tolerance`` stops the step unless ``--allow-probability-mismatch``, which the manifest records), and refuses bad
rows and options naming the option, the row and the field (exit 2) -- on a tiny random Llama (fast)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from builder import replay
from builder.cli import main
from much_dataset import schema
from much_dataset.internals import load_internals
from tests.builder.test_internals_compression import SAMPLE, tiny  # noqa: F401 -- the tiny model fixture

BUILD = ["--model", "tiny-random", "--prompt-style", "user", "--hidden-layers", "1", "--rows-per-shard", "1"]


def _build(out: Path, *extra: str) -> int:
    return main(["internals", "--out", str(out), "--source", str(SAMPLE), *BUILD, *extra])


def _files(pack: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((pack / "shards").iterdir())}


@pytest.mark.usefixtures("tiny")
def test_a_damaged_pack_is_recomputed_on_resume_and_never_reported_complete(tmp_path, capsys):
    pack = tmp_path / "pack"
    assert _build(pack, "--limit", "3", "--allow-probability-mismatch") == 0
    good, manifest = _files(pack), json.loads((pack / "manifest.json").read_text())
    first, second, third = (manifest["rows"][r[schema.GENERATION_ID]]["shard"] for r in
                            list(replay.read_rows(SAMPLE))[:3])
    capsys.readouterr()
    (pack / "shards" / first).write_bytes(good[first][:-100])  # truncated
    (pack / "shards" / second).unlink()  # deleted
    (pack / "shards" / third).write_bytes(good[third][:-1] + bytes([good[third][-1] ^ 1]))  # one bit, same size
    assert _build(pack, "--limit", "3", "--allow-probability-mismatch") == 0
    out = capsys.readouterr().out
    assert "3 done, 0 to go" not in out and "0 done, 3 to go" in out, out
    assert out.count("does not match its manifest") == 3 and "1 row(s) to recompute" in out
    for name, why in ((first, "truncated"), (second, "missing"), (third, "hash")):
        assert any(name in line and why in line for line in out.splitlines()), (name, why, out)
    assert _files(pack) == good  # recomputed bit for bit, under the same content addresses
    assert len(load_internals(pack)) == 3
    assert _build(pack, "--limit", "3", "--allow-probability-mismatch") == 0
    assert "3 done, 0 to go" in capsys.readouterr().out


@pytest.mark.usefixtures("tiny")
def test_the_free_check_stops_the_step_unless_allowed_and_recorded(tmp_path, capsys):
    """The tiny model is random: its probabilities are not the stored ones (difference near 1)."""
    pack = tmp_path / "pack"
    assert _build(pack, "--limit", "2") == 2
    err = capsys.readouterr().err
    gid = list(replay.read_rows(SAMPLE))[0][schema.GENERATION_ID]
    assert f"generation_id={gid!r}" in err and "> --tolerance 0.0001" in err and "--allow-probability-mismatch" in err
    assert err.count("\n") == 1 and not (pack / "manifest.json").exists()  # nothing stored
    assert _build(pack, "--limit", "2", "--tolerance", "1.0") == 0  # a tolerance above every difference
    assert load_internals(pack).manifest["probability_check"] == {"tolerance": 1.0, "rows_above_tolerance": 0,
                                                                  "enforced": True}
    assert _build(pack, "--limit", "3", "--allow-probability-mismatch") == 0
    check = load_internals(pack).manifest["probability_check"]
    assert check["enforced"] is False and check["tolerance"] == 1.0
    assert "stored with --allow-probability-mismatch" in capsys.readouterr().out


def _rows_file(tmp_path: Path, change) -> Path:
    rows = list(replay.read_rows(SAMPLE))[:2]
    change(rows[0])
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


@pytest.mark.parametrize("change, phrases", [
    (lambda row: row.pop(schema.OUTPUT_TOKENS), ("row 1", "generation_id=", "'output_tokens'", "missing")),
    (lambda row: row[schema.OUTPUT_TOKENS].__setitem__(2, 10**9),
     ("row 1", "'output_tokens', position 2", "1000000000", "[0, 49152)")),
    (lambda row: row.__setitem__(schema.LOGITS_VALUES, row[schema.LOGITS_VALUES][:-1]), ("'logits_values'",)),
], ids=["no-output-tokens", "token-id-1e9", "short-logits"])
@pytest.mark.usefixtures("tiny")
def test_bad_rows_are_refused_naming_the_row_and_the_field(tmp_path, capsys, change, phrases):
    source = _rows_file(tmp_path, change)
    code = main(["internals", "--out", str(tmp_path / "pack"), "--source", str(source), *BUILD])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and str(source) in err, err
    for phrase in phrases:
        assert phrase in err, err
    assert not (tmp_path / "pack" / "manifest.json").exists()


@pytest.mark.parametrize("extra, phrase", [
    (["--device", "bogus"], "--device 'bogus'"), (["--dtype", "bogus"], "--dtype 'bogus'"),
    (["--limit", "-1"], "--limit"), (["--temperature", "nan"], "--temperature"),
    (["--tolerance", "inf"], "--tolerance"), (["--tolerance", "-1"], "--tolerance"),
])
def test_bad_options_are_refused_before_the_model_is_loaded(tmp_path, capsys, monkeypatch, extra, phrase):
    from builder import _llm

    monkeypatch.setattr(_llm, "load_model", lambda *a, **k: pytest.fail("the model was loaded"))
    try:
        code = main(["internals", "--out", str(tmp_path), "--source", str(SAMPLE), *BUILD, *extra])
    except SystemExit as stop:  # refused by the option's type, as argparse does
        code = stop.code
    assert code == 2 and phrase in capsys.readouterr().err


def test_an_empty_source_is_refused(tmp_path, capsys):
    (tmp_path / "empty.jsonl").write_text("")
    assert main(["internals", "--out", str(tmp_path / "p"), "--source", str(tmp_path / "empty.jsonl"), *BUILD]) == 2
    assert "empty.jsonl" in capsys.readouterr().err and not (tmp_path / "p").exists()


@pytest.mark.usefixtures("tiny")
def test_a_pack_holding_a_nan_is_recomputed_on_resume_not_reported_done(tmp_path, capsys):
    """Issue #54: a shard rewritten under its own content address with a NaN attention weight (sizes and hashes
    match the manifest: only the value is impossible) -- the reader refuses it, so a resume must not say "3 done"."""
    from safetensors.numpy import load_file

    from builder.internals_store import write_shard

    pack = tmp_path / "pack"
    assert _build(pack, "--limit", "3", "--allow-probability-mismatch") == 0
    manifest = json.loads((pack / "manifest.json").read_text())
    gid = list(replay.read_rows(SAMPLE))[1][schema.GENERATION_ID]
    old = manifest["rows"][gid]["shard"]
    arrays = load_file(pack / "shards" / old)
    key = f"{gid}/attention_to_previous"
    spoiled = arrays[key].copy()
    spoiled.reshape(-1)[0] = 0x7FC0 if spoiled.dtype == np.int16 else np.nan  # bfloat16 NaN as raw bits, or NaN
    name, size = write_shard(pack, {**arrays, key: spoiled})
    manifest["shards"].pop(old)
    manifest["shards"][name] = {"bytes": size, "sha256": name.split(".")[0]}
    manifest["rows"][gid]["shard"] = name
    (pack / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match="not in \\[0, 1\\]"):
        load_internals(pack)[gid]
    capsys.readouterr()
    assert _build(pack, "--limit", "3", "--allow-probability-mismatch") == 0
    out = capsys.readouterr().out
    assert "2 done, 1 to go" in out and name in out and f"generation_id={gid!r}" in out, out
    reread = load_internals(pack)
    assert len(reread) == 3 and all(np.isfinite(reread[g]["attention_to_previous"]).all() for g in reread)
