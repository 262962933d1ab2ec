"""replay / verify: re-forwarding stored texts rebuilds the embedded sample's probabilities (SmolLM2), within float32
rounding: the sample was computed on another CPU (tests/_floats.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from builder import replay
from builder.cli import main
from builder.store import read_store
from builder.verify import compare_probabilities
from much_dataset import schema
from tests._floats import SAME_PROBABILITIES
from tests.builder import _smollm

SAMPLE = Path(__file__).resolve().parents[2] / "much_dataset" / "sample" / "data" / "en" / "test-00000-of-00001.parquet"
# How scripts/data/make_sample.py built the sample: import-mushroom with the SmolLM2 observer, plain user chat, T = 1,
# the observed token swapped into the 24th slot when ranked lower.
SAMPLE_OPTIONS = {"temperature": 1.0, "prompt_style": "user", "out_of_top": "swap"}


def _sample_rows(n: int) -> list[dict]:
    return list(replay.read_rows(SAMPLE))[:n]


def test_replay_rebuilds_the_embedded_sample_within_float_rounding():
    llm = _smollm.smollm2()
    for row in _sample_rows(3):
        ids, probs = replay.replay_row(llm, row, **SAMPLE_OPTIONS)
        # the bits depend on the CPU's kernel path (1.25e-5 apart between AVX2 and AVX-512), not on the code: the same
        # probabilities within the project's tolerance, and the same candidates except where two are that close
        report = compare_probabilities(row[schema.LOGITS_TOKEN_IDS], row[schema.LOGITS_VALUES], ids, probs,
                                       tolerance=SAME_PROBABILITIES)
        assert report["id_mismatches"] == 0 and report["max_abs_diff"] <= SAME_PROBABILITIES, report
        assert [len(i) for i in ids] == [len(i) for i in row[schema.LOGITS_TOKEN_IDS]]


def test_replay_at_another_temperature_differs_as_softmax_says():
    import numpy as np

    llm = _smollm.smollm2()
    row = _sample_rows(1)[0]
    ids, probs = replay.replay_row(llm, row, **{**SAMPLE_OPTIONS, "temperature": 0.5, "out_of_top": "append"})
    # p_T(i) = p_1(i)^(1/T) / Z: the ratio of two candidates' probabilities is squared at T = 0.5
    for s_ids, s_probs, r_ids, r_probs in zip(row[schema.LOGITS_TOKEN_IDS], row[schema.LOGITS_VALUES], ids, probs,
                                              strict=True):
        assert r_ids[:23] == s_ids[:23]
        np.testing.assert_allclose(r_probs[1] / r_probs[0], (s_probs[1] / s_probs[0]) ** 2, rtol=1e-3)


def test_replay_out_of_top_modes():
    llm = _smollm.smollm2()
    row = {**_sample_rows(1)[0]}
    row[schema.OUTPUT_TOKENS] = [row[schema.OUTPUT_TOKENS][0], 49000]  # a token the model surely ranks low
    extend_ids, _ = replay.replay_row(llm, row, **{**SAMPLE_OPTIONS, "out_of_top": "extend"})
    append_ids, _ = replay.replay_row(llm, row, **{**SAMPLE_OPTIONS, "out_of_top": "append"})
    swap_ids, _ = replay.replay_row(llm, row, **{**SAMPLE_OPTIONS, "out_of_top": "swap"})
    assert len(extend_ids[1]) > 25 and extend_ids[1][-1] == 49000
    assert len(append_ids[1]) == 25 and append_ids[1][-1] == 49000 and append_ids[1][:24] == extend_ids[1][:24]
    assert len(swap_ids[1]) == 24 and swap_ids[1][-1] == 49000 and swap_ids[1][:23] == extend_ids[1][:23]


def test_replay_cli_resumes_and_verify_flags_a_tampered_row(tmp_path, capsys, one_smollm2_load):
    gguf = _smollm.gguf_path()
    common = ["--model", gguf, "--prompt-style", "user", "--out-of-top", "swap"]
    assert main(["replay", "--out", str(tmp_path), "--source", str(SAMPLE), "--limit", "2", *common]) == 0
    rows = list(read_store(tmp_path / "replay.jsonl"))
    assert [r[schema.GENERATION_ID] for r in rows] == [r[schema.GENERATION_ID] for r in _sample_rows(2)]
    for replayed, stored in zip(rows, _sample_rows(2), strict=True):  # the same candidates but for near-ties
        assert compare_probabilities(stored[schema.LOGITS_TOKEN_IDS], stored[schema.LOGITS_VALUES],
                                     replayed[schema.LOGITS_TOKEN_IDS], replayed[schema.LOGITS_VALUES],
                                     tolerance=SAME_PROBABILITIES)["id_mismatches"] == 0
    assert main(["replay", "--out", str(tmp_path), "--source", str(SAMPLE), "--limit", "2", *common]) == 0
    assert "2 done, 0 to go" in capsys.readouterr().out
    assert len(list(read_store(tmp_path / "replay.jsonl"))) == 2

    tampered = [dict(r) for r in _sample_rows(2)]
    tampered[1][schema.LOGITS_VALUES] = [list(p) for p in tampered[1][schema.LOGITS_VALUES]]
    tampered[1][schema.LOGITS_VALUES][3][0] += 1e-3
    source = tmp_path / "tampered.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in tampered))
    assert main(["verify", "--out", str(tmp_path), "--source", str(source), "--rows", "2", *common]) == 1
    report = json.loads((tmp_path / "verify.json").read_text())
    # the 1e-3 added, give or take the sample's float32 drift on this CPU (tests/_floats.py)
    assert report["rows"] == 2 and report["max_abs_diff"] == pytest.approx(1e-3, abs=SAME_PROBABILITIES)


def test_compare_counts_real_id_differences_but_not_near_ties():
    stored_ids, stored_probs = [[1, 2, 3]], [[0.5, 0.25, 0.25]]
    same = compare_probabilities(stored_ids, stored_probs, [[1, 3, 2]], [[0.5, 0.25, 0.25]], tolerance=1e-6)
    swapped = compare_probabilities(stored_ids, stored_probs, [[2, 1, 3]], [[0.5, 0.25, 0.25]], tolerance=1e-6)
    assert (same["id_mismatches"], swapped["id_mismatches"]) == (0, 1)
    with pytest.raises(ValueError, match="2 stored positions"):
        compare_probabilities(stored_ids * 2, stored_probs * 2, stored_ids, stored_probs, tolerance=0)


def _tamper(row: dict, how: str) -> dict:
    row = {**row, schema.GENERATION_ID: f"{row[schema.GENERATION_ID]}-{how}"}
    ids = [list(i) for i in row[schema.LOGITS_TOKEN_IDS]]
    probs = [list(p) for p in row[schema.LOGITS_VALUES]]
    if how == "dropped_24th":
        ids[2], probs[2] = ids[2][:23], probs[2][:23]
    elif how == "dropped_eos":
        row[schema.OUTPUT_TOKENS] = list(row[schema.OUTPUT_TOKENS][:-1])
        ids, probs = ids[:-1], probs[:-1]
        row[schema.TOKEN_CHUNKS] = [[i for i in c if i < len(ids)] for c in row[schema.TOKEN_CHUNKS]]
        row[schema.TOKEN_CHUNKS] = [c for c in row[schema.TOKEN_CHUNKS] if c]
    elif how == "changed_output":
        row[schema.OUTPUT] = row[schema.OUTPUT].replace(" ", "  ", 1)
    elif how == "nan":
        probs[1][5] = float("nan")
    elif how == "token_id_1e9":  # #44: not re-forwarded (an IndexError in the embedding, the "bug" exit, before)
        row[schema.OUTPUT_TOKENS] = [*row[schema.OUTPUT_TOKENS][:3], 10**9, *row[schema.OUTPUT_TOKENS][4:]]
    return {**row, schema.LOGITS_TOKEN_IDS: ids, schema.LOGITS_VALUES: probs}


def test_verify_checks_the_whole_row_and_names_the_rule(tmp_path, capsys, one_smollm2_load):
    """#37/#31/#44: a dropped 24th candidate, a dropped EOS, a changed output text, a stored NaN and a token id
    outside the vocabulary are refused (exit 1,
    generation_id, position and rule named); the untouched rows verify OK."""
    gguf = _smollm.gguf_path()
    common = ["--model", gguf, "--prompt-style", "user", "--out-of-top", "swap"]
    rows = _sample_rows(2)
    expected = {"dropped_24th": ("candidates", 2), "dropped_eos": ("eos", None), "changed_output": ("output", None),
                "nan": ("probabilities", 1), "token_id_1e9": ("token_ids", 3)}
    source = tmp_path / "rows.jsonl"
    tampered = [_tamper(rows[0], how) for how in expected]
    source.write_text("".join(json.dumps(r) + "\n" for r in [*rows, *tampered]))
    assert main(["verify", "--out", str(tmp_path / "ok"), "--source", str(source), "--rows", "2", *common]) == 0
    capsys.readouterr()
    assert main(["verify", "--out", str(tmp_path / "bad"), "--source", str(source), "--rows", "7", *common]) == 1
    printed = capsys.readouterr().out
    report = json.loads((tmp_path / "bad" / "verify.json").read_text())
    assert report["failed_rows"] == 5
    by_row: dict[str, list] = {}
    for problem in report["problems"]:
        by_row.setdefault(problem["generation_id"], []).append(problem)
    assert set(by_row) == {r[schema.GENERATION_ID] for r in tampered}
    for how, (rule, position) in expected.items():
        gid = f"{rows[0][schema.GENERATION_ID]}-{how}"
        found = [p for p in by_row[gid] if p["rule"] == rule]
        assert found, (how, by_row[gid])
        if position is not None:
            assert found[0]["position"] == position
        assert f"generation_id={gid!r}" in printed and f"rule {rule}" in printed
    assert "DIFFERENT" in printed


@pytest.mark.parametrize("case, message", [("empty", "no rows to verify"), ("tolerance", "--tolerance")])
def test_verify_refuses_an_empty_source_and_a_negative_tolerance(tmp_path, capsys, case, message):
    source = tmp_path / "rows.jsonl"
    source.write_text("" if case == "empty" else json.dumps(_sample_rows(1)[0]) + "\n")
    extra = ["--tolerance", "-1"] if case == "tolerance" else []
    assert main(["verify", "--out", str(tmp_path), "--source", str(source), "--model", "unused.gguf",
                 *extra]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "verify.json").exists()
