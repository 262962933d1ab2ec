"""human: seeded selection, the label prompt (undo / redo / quit), saving after each sample, resuming; via stdin."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builder import human
from builder.cli import build_parser
from builder.store import read_store
from tests import assets
from tests.builder.fake_servers import write_sample_artifacts

REPO = Path(__file__).resolve().parents[2]


@settings(deadline=None, max_examples=50)
@given(st.sets(st.text("abcdef0123", min_size=1, max_size=6), max_size=40), st.integers(0, 45), st.data())
def test_draw_annotation_sample_is_the_seeded_shuffle_of_sorted_ids(ids, size, data):
    ids = list(ids)
    eligible = set(data.draw(st.lists(st.sampled_from(ids), unique=True)) if ids else [])
    order = sorted(ids)
    expected = [order[i] for i in np.random.RandomState(53).permutation(len(order))]  # independent: permutation
    expected = [gid for gid in expected if gid in eligible][:size]
    data.draw(st.randoms()).shuffle(ids)  # input order must not matter
    assert human.draw_annotation_sample(ids, eligible.__contains__, size) == expected
    # a bigger sample extends a smaller one (annotators can be asked for more later)
    assert human.draw_annotation_sample(ids, eligible.__contains__, size + 3)[: len(expected)] == expected


def _feed(answers):
    answers = iter(answers)

    def input_fn(prompt):
        try:
            return next(answers)
        except StopIteration:
            raise EOFError from None
    return input_fn


@pytest.mark.parametrize("answers, expected", [
    (["1", "-1", "y", ""], [1, -1, 1]),
    (["n", "no", "+1", ""], [-1, -1, 1]),
    (["1", "u", "-1", "1", "1", ""], [-1, 1, 1]),           # undo mid-sample
    (["1", "1", "1", "u", "-1", ""], [1, 1, -1]),           # undo at the confirmation prompt
    (["u", "maybe", "h", "1", "1", "1", "r", "-1", "-1", "-1", ""], [-1, -1, -1]),  # bad input, help, redo
    (["1", "q"], None),                                      # quit
    (["1", "1"], None),                                      # stdin closed
    (["1", "1", "1", "q"], None),                            # quit at confirmation
])
def test_ask_labels(answers, expected):
    printed = []
    assert human.ask_labels(3, input_fn=_feed(answers), print_fn=printed.append) == expected
    if "h" in answers:
        assert any("Edge cases" in p for p in printed)
    if answers[0] == "u":
        assert "nothing to undo in this sample" in printed


@pytest.fixture()
def artifacts(tmp_path):
    write_sample_artifacts(tmp_path, assets.llama3_tokenizer())
    segments = {r["generation_id"]: len(r["token_chunks"]) for r in read_store(tmp_path / "segments.jsonl")}
    for judge in ("gpt-4o", "gpt-4.1"):
        (tmp_path / f"labels.{judge}.jsonl").write_text("".join(
            json.dumps({"generation_id": g, "labels": [1] * n}) + "\n" for g, n in segments.items()))
    (tmp_path / "context.jsonl").write_text("".join(
        json.dumps({"generation_id": g, "chunks": [f"CHUNK-FOR-{g}"]}) + "\n" for g in segments))
    (tmp_path / "wiki.jsonl").write_text(json.dumps({"wiki_url": "https://en.wikipedia.org/wiki/Canberra",
                                                     "infobox": {"name": "Canberra-INFOBOX"}}) + "\n")
    return tmp_path, segments


def _expected_selection(out, segments, size):
    english = [r["generation_id"] for r in read_store(out / "generations.jsonl") if r["lang"] == "en"]
    usable = {"gen00", "gen01", "gen02", "gen06"}  # gen04 has no EOS, gen05 ranks a token 25th
    return human.draw_annotation_sample(english, usable.__contains__, size)


def test_human_saves_each_sample_and_resumes(artifacts):
    out, segments = artifacts
    selection = _expected_selection(out, segments, 3)
    argv = ["human", "--out", str(out), "--annotator", "an0", "--lang", "en", "--size", "3",
            "--tokenizer", str(assets.llama3_tokenizer_json())]
    args = build_parser().parse_args(argv)
    first = selection[0]
    answers = ["-1"] + ["1"] * (segments[first] - 2) + [""] + ["1", "q"]  # one sample, then quit mid-sample
    printed = []
    assert human.run(args, input_fn=_feed(answers), print_fn=printed.append) == 0
    rows = list(read_store(out / "human.an0.jsonl"))
    assert [r["generation_id"] for r in rows] == [first]
    assert rows[0]["labels"] == [-1] + [1] * (segments[first] - 2) + [1] and rows[0]["annotator"] == "an0"
    text = "\n".join(printed)
    assert "Edge cases" in text and "CHUNK-FOR-" + first in text and "# Claims\n# 0 :" in text
    assert "3 samples selected" in text and "stopped; 1 samples saved" in text

    # resume: the next two samples, nothing asked again for the first
    answers = [a for gid in selection[1:] for a in ["1"] * (segments[gid] - 1) + [""]]
    printed = []
    assert human.run(args, input_fn=_feed(answers), print_fn=printed.append) == 0
    rows = list(read_store(out / "human.an0.jsonl"))
    assert [r["generation_id"] for r in rows] == selection
    assert "1 already done, 2 to go" in "\n".join(printed)


def test_human_through_real_stdin(artifacts):
    out, segments = artifacts
    selection = _expected_selection(out, segments, 1)
    gid = selection[0]
    stdin = "\n".join(["n"] * (segments[gid] - 1) + [""]) + "\n"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run(
        [sys.executable, "-m", "builder", "human", "--out", str(out), "--annotator", "an1", "--lang", "en",
         "--size", "1", "--tokenizer", str(assets.llama3_tokenizer_json())],
        input=stdin, capture_output=True, text=True, cwd=REPO, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    generation = next(r for r in read_store(out / "generations.jsonl") if r["generation_id"] == gid)
    assert f"# Question\n{generation['prompt']}" in result.stdout and f"CHUNK-FOR-{gid}" in result.stdout
    rows = list(read_store(out / "human.an1.jsonl"))
    assert rows[0]["generation_id"] == gid and rows[0]["labels"] == [-1] * (segments[gid] - 1) + [1]
    assert "done: 1 samples of 'en' labelled by an1" in result.stdout
