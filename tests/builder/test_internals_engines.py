"""builder internals --engine: the engine is part of the pack's identity, --engine vllm refuses what it cannot store
(attention, the post-norm last index) before loading anything, and the attention methods name a hidden-states-only
pack and the array it lacks. The vLLM pass itself is tested against the transformers one in test_vllm_internals.py
(run by scripts/run_vllm_tests.sh: this environment has no vLLM)."""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from builder import internals
from builder.cli import main
from builder.internals_store import check_identity, commit_rows, pack_identity, write_shard
from much_dataset import schema
from much_dataset.internals import load_internals
from tests.builder import _smollm

SAMPLE = Path(__file__).resolve().parents[2] / "much_dataset" / "sample" / "data" / "en" / "test-00000-of-00001.parquet"


@pytest.mark.parametrize("flags", [["--attention-to-self"], ["--attention-window", "4"],
                                   ["--attention-to-self", "--attention-window", "2"]])
def test_vllm_engine_refuses_attention_options_before_anything_is_written(tmp_path, capsys, flags):
    out = tmp_path / "pack"
    assert main(["internals", "--engine", "vllm", "--source", str(SAMPLE), "--model", "no-such-model", "--out",
                 str(out), "--limit", "1", *flags]) == 2
    err = capsys.readouterr().err
    assert "--engine vllm stores hidden states only" in err and "--engine transformers" in err
    for flag in flags:
        if flag.startswith("--"):
            assert flag in err
    assert not out.exists()


def _tiny_llama_folder(folder: Path) -> Path:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    # the sample's vocabulary (SmolLM2's): its rows' token ids must be ids of the model
    config = transformers.LlamaConfig(vocab_size=49152, hidden_size=32, intermediate_size=48, num_hidden_layers=3,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    transformers.LlamaForCausalLM(config).save_pretrained(folder)
    return folder


def test_vllm_engine_refuses_the_post_norm_index_and_a_missing_vllm(tmp_path, capsys):
    """hidden_states[L] (after the final norm) is not what vLLM extracts at L: refused, naming the valid range."""
    model = _tiny_llama_folder(tmp_path / "tiny")
    common = ["internals", "--engine", "vllm", "--source", str(SAMPLE), "--model", str(model), "--limit", "1"]
    assert main([*common, "--out", str(tmp_path / "a"), "--hidden-layers", "1,3"]) == 2
    err = capsys.readouterr().err
    assert "before the final norm" in err and "0..2" in err
    assert not (tmp_path / "a" / "manifest.json").exists()
    if importlib.util.find_spec("vllm") is None:  # the main test environment
        assert main([*common, "--out", str(tmp_path / "b"), "--hidden-layers", "1"]) == 2
        assert "--engine vllm needs vLLM" in capsys.readouterr().err
        assert not (tmp_path / "b" / "manifest.json").exists()


def test_the_engine_is_recorded_and_a_rerun_with_another_engine_is_refused(tmp_path, one_smollm2_load):
    gguf = _smollm.gguf_path()
    assert main(["internals", "--out", str(tmp_path), "--source", str(SAMPLE), "--limit", "1", "--model", gguf,
                 "--prompt-style", "user", "--hidden-layers", "6"]) == 0
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["engine"] == "transformers" and "attention_to_previous" in manifest["dtypes"]

    class Config:
        num_hidden_layers, num_attention_heads, hidden_size = manifest["n_layers"], manifest["n_heads"], 576

    def identity(engine: str) -> dict:
        options = internals.InternalsOptions(hidden_layers=(6,), prompt_style="user", engine=engine,
                                             attention=internals.ENGINES[engine].attention)
        return pack_identity(gguf, manifest["weights_sha256"], Config, options, manifest["source_sha256"])

    check_identity(tmp_path, identity("transformers"))  # the same run again: accepted
    with pytest.raises(internals.BuilderError, match="engine: pack has 'transformers', asked 'vllm'"):
        check_identity(tmp_path, identity("vllm"))
    vllm_identity = identity("vllm")
    assert vllm_identity["dtypes"] == {"hidden": "float16"} and vllm_identity["engine"] == "vllm"
    # a pack written before the engine was recorded is a transformers pack
    del manifest["engine"]
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    check_identity(tmp_path, identity("transformers"))
    with pytest.raises(internals.BuilderError, match="engine"):
        check_identity(tmp_path, identity("vllm"))


def _hidden_only_pack(folder: Path, rows: list[dict]) -> Path:
    """A pack as --engine vllm writes it (the store's own writers, hidden only), random values."""

    class Config:
        num_hidden_layers, num_attention_heads, hidden_size = 6, 3, 4

    options = internals.InternalsOptions(hidden_layers=(2,), engine="vllm", attention=False)
    identity = pack_identity("m", "0" * 64, Config, options, "f" * 64)
    rng = np.random.default_rng(0)
    arrays = {f"{r[schema.GENERATION_ID]}/hidden": rng.random((len(r[schema.OUTPUT_TOKENS]), 1, 4)).astype(np.float16)
              for r in rows}
    stored = write_shard(folder, arrays)
    commit_rows(folder, identity, stored, {r[schema.GENERATION_ID]: {"n_tokens": len(r[schema.OUTPUT_TOKENS]),
                                                                     "max_abs_diff": 0.0, "shard": stored[0]}
                                           for r in rows}, {})
    return folder


def test_attention_methods_name_a_hidden_only_pack_and_the_missing_array(tmp_path):
    from builder import replay
    from much_metric.baselines import token_arrays
    from much_metric.baselines.methods import llm_check, rauq

    rows = list(replay.read_rows(SAMPLE))[:2]
    pack = load_internals(_hidden_only_pack(tmp_path, rows))
    assert set(pack[rows[0][schema.GENERATION_ID]]) == {"hidden"} and pack.manifest["engine"] == "vllm"
    data = token_arrays(rows)
    gid = rows[0][schema.GENERATION_ID]
    manifest = str(tmp_path / "manifest.json")
    for method, name in ((rauq.rauq, "attention_to_previous"), (rauq.attention_previous, "attention_to_previous"),
                         (llm_check.llm_check_attention, "attention_to_self")):
        with pytest.raises(ValueError) as caught:
            method(data, internals=pack)
        message = str(caught.value)
        assert f"generation_id={gid!r}" in message and manifest in message and f"no {name!r} array" in message
        assert "engine vllm" in message and "--engine transformers" in message


def test_prompt_logprob_difference_compares_listed_candidates_and_counts_the_others():
    """The vLLM engine's free check on vLLM-shaped prompt log-probabilities (position i = the token at i)."""
    import math
    from collections import namedtuple

    from builder.internals_vllm import prompt_logprob_difference

    logprob = namedtuple("Logprob", "logprob")
    row = {schema.GENERATION_ID: "g", schema.OUTPUT_TOKENS: [5, 7],
           schema.LOGITS_TOKEN_IDS: [[5, 9], [7, 3]], schema.LOGITS_VALUES: [[0.6, 0.3], [0.5, 0.2]]}
    n_prompt = 3
    listed = [None, {}, {}, {5: logprob(math.log(0.61)), 9: logprob(math.log(0.3))},
              {7: logprob(math.log(0.5)), 8: logprob(math.log(0.25))}]
    worst, unchecked = prompt_logprob_difference(listed, n_prompt, row)
    assert worst == pytest.approx(0.01) and unchecked == 1  # token 3 is not in vLLM's list at position 4
    # one position off (the prompt one token shorter) compares other numbers
    assert prompt_logprob_difference(listed, n_prompt - 1, row)[1] == 4
    assert np.isnan(prompt_logprob_difference(listed, n_prompt, {schema.OUTPUT_TOKENS: [5, 7]})[0])
    with pytest.raises(ValueError, match="generation_id='g': 1 stored probability rows for 2 output tokens"):
        prompt_logprob_difference(listed, n_prompt, {**row, schema.LOGITS_TOKEN_IDS: [[5]],
                                                     schema.LOGITS_VALUES: [[0.6]]})


class _RecordingEngine:
    """A third engine, written against the protocol only: fixed hidden states, no model. It records the options it
    was built from (an InternalsEngineOptions, never the step's argparse.Namespace)."""

    built_from: list = []

    def __init__(self, options):
        type(self).built_from.append(options)
        self.config = type("Config", (), {"num_hidden_layers": 2, "num_attention_heads": 1, "hidden_size": 4})()
        self.weights = "0" * 64

    def prepare(self, options):
        self.prepared = options

    def forward(self, rows, options, basis=None):
        results = []
        for row in rows:
            n = len(row[schema.OUTPUT_TOKENS])
            hidden = np.full((n, len(options.hidden_layers), 4), 0.5, dtype=np.float16)
            results.append(({"hidden": hidden}, 0.0, np.zeros((n, len(options.hidden_layers)))))
        return results


def test_an_engine_is_one_entry_built_from_options(tmp_path, monkeypatch):
    """``python -m builder internals`` reaches its engines through the protocol (config, weights, prepare, forward),
    builds them from InternalsEngineOptions, and a new engine is one ENGINES entry."""
    from builder import internals_engine

    module = type(internals)("fake_internals_engine")
    module.RecordingEngine = _RecordingEngine
    monkeypatch.setitem(sys.modules, "fake_internals_engine", module)
    monkeypatch.setitem(internals_engine.ENGINES, "recording",
                        internals_engine.EngineEntry("fake_internals_engine", "RecordingEngine", attention=False))
    _RecordingEngine.built_from.clear()
    assert main(["internals", "--engine", "recording", "--source", str(SAMPLE), "--model", "some/model", "--out",
                 str(tmp_path / "pack"), "--limit", "2", "--hidden-layers", "1", "--dtype", "float32"]) == 0
    (options,) = _RecordingEngine.built_from
    assert options == internals_engine.InternalsEngineOptions(model="some/model", device=None, dtype="float32")
    pack = load_internals(tmp_path / "pack")
    assert len(pack) == 2 and pack.manifest["engine"] == "recording"
    with pytest.raises(TypeError, match="options must be an InternalsEngineOptions"):
        internals_engine.load_engine("recording", argparse.Namespace(model="some/model"))
