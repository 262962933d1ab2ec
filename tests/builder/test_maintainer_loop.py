"""The maintainer's loop end to end, as docs/builder.md runs it, on unseen questions with SmolLM2 (``--engine hf``;
the vLLM stage runs the same loop on ``--engine vllm`` rows: tests/builder/test_vllm_engine.py): questions ->
generate -> segment -> wiki (local MediaWiki stand-in) -> context (local embeddings) -> annotate (two judges named
by the maintainer, local OpenAI-compatible server) -> filter -> export -> much_dataset.load -> verify -> much run,
asserting the row counts at every step (tests/builder/_loop.py). Then ``internals`` on the same rows: in their
recorded dtype, within the tolerance; a row that differs makes it exit 1, as verify does.

One SmolLM2 load for the module (``tests/builder/_smollm.py``); every step that loads it gets that model, and the
dtype it asks for is checked to be the one the rows record.
"""

from __future__ import annotations

import json

import pytest

from builder import _llm
from builder.cli import main
from builder.store import read_store
from much_dataset import schema
from tests.builder import _smollm
from tests.builder._loop import run_loop

pytestmark = pytest.mark.slow

MODEL_NAME = "HuggingFaceTB/SmolLM2-135M-Instruct"
#: Mu-SHROOM rows (the format `questions` reads): six questions are generated, the last one is not.
MUSHROOM_ROWS = [
    {"id": "u1", "lang": "EN", "model_input": "What is the capital of Australia?",
     "wikipedia_url": "https://en.wikipedia.org/wiki/Canberra"},
    {"id": "u2", "lang": "EN", "model_input": "In which city was Marie Curie born?",
     "wikipedia_url": "https://en.wikipedia.org/wiki/Marie_Curie"},
    {"id": "u3", "lang": "FR", "model_input": "Quelle est la capitale de la France ?",
     "wikipedia_url": "https://fr.wikipedia.org/wiki/Paris"},
    {"id": "u4", "lang": "EN", "model_input": "What is the largest planet of the solar system?",
     "wikipedia_url": "https://en.wikipedia.org/wiki/Jupiter"},
    {"id": "u5", "lang": "ES", "model_input": "¿Cuál es la capital de España?",
     "wikipedia_url": "https://es.wikipedia.org/wiki/Madrid"},
    {"id": "u6", "lang": "EN", "model_input": "Who painted the Mona Lisa?",
     "wikipedia_url": "https://en.wikipedia.org/wiki/Mona_Lisa"},
    {"id": "u7", "lang": "DE", "model_input": "Wer schrieb den Faust?",
     "wikipedia_url": "https://de.wikipedia.org/wiki/Faust"},
]
GENERATED = 6


@pytest.fixture
def shared_model(monkeypatch):
    """The module's SmolLM2 for every load, recording the dtype each step asked for."""
    llm = _smollm.smollm2()
    asked: list[str | None] = []

    def load(model, *, device=None, dtype=None):
        asked.append(dtype)
        return llm

    monkeypatch.setattr(_llm, "load_model", load)
    attention = llm.model.config._attn_implementation
    yield llm, asked
    llm.model.set_attn_implementation(attention)  # internals switched the shared model to eager attention


def test_the_maintainers_loop_with_hf_rows(tmp_path, shared_model):
    llm, asked = shared_model
    out = tmp_path / "out"
    source = tmp_path / "mushroom.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in MUSHROOM_ROWS))
    assert main(["questions", "--out", str(out), "--source", str(source)]) == 0
    assert len(list(read_store(out / "questions.jsonl"))) == len(MUSHROOM_ROWS)
    gguf = _smollm.gguf_path()
    assert main(["generate", "--out", str(out), "--model", gguf, "--model-name", MODEL_NAME, "--temperature", "0.7",
                 "--max-new-tokens", "40", "--limit", str(GENERATED)]) == 0
    assert asked == ["float32"]  # the device default, asked explicitly and recorded
    assert len(list(read_store(out / "generations.jsonl"))) == GENERATED

    counts = run_loop(out, tokenizer="smollm2", model=gguf, verify=["--temperature", "0.7"], tmp=tmp_path)
    print(f"\nmaintainer's loop (hf): {counts}")
    assert asked == ["float32"] * 3  # generate, then both verify runs: the recorded dtype

    # internals replays in the recorded dtype and agrees within the tolerance ...
    common = ["--model", gguf, "--temperature", "0.7", "--hidden-layers", "6", "--limit", "2"]
    assert main(["internals", "--out", str(tmp_path / "pack"), "--source", str(out / "generations.jsonl"),
                 *common]) == 0
    assert asked[-1] == "float32"
    # ... and a row whose stored probabilities differ stops it (exit 2, the shard not stored), as verify fails it, on
    # every run over the pack; --allow-probability-mismatch stores it, recorded; a larger --tolerance accepts it
    rows = list(read_store(out / "generations.jsonl"))[:2]
    rows[1][schema.LOGITS_VALUES][0][0] -= 0.05
    tampered = tmp_path / "tampered" / "generations.jsonl"
    tampered.parent.mkdir()
    tampered.write_text("".join(json.dumps(r) + "\n" for r in rows))
    for _ in range(2):
        assert main(["internals", "--out", str(tmp_path / "pack-tampered"), "--source", str(tampered), *common]) == 2
        manifest_path = tmp_path / "pack-tampered" / "manifest.json"
        assert not manifest_path.exists() or json.loads(manifest_path.read_text())["n_rows"] == 0
    assert main(["internals", "--out", str(tmp_path / "pack-tampered"), "--source", str(tampered), *common,
                 "--allow-probability-mismatch"]) == 0
    manifest = json.loads((tmp_path / "pack-tampered" / "manifest.json").read_text())
    assert manifest["n_rows"] == 2 and manifest["probability_check"]["rows_above_tolerance"] == 1
    assert manifest["probability_check"]["enforced"] is False
    assert main(["internals", "--out", str(tmp_path / "pack-tolerant"), "--source", str(tampered), *common,
                 "--tolerance", "0.1"]) == 0
