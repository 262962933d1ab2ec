"""builder internals: pack arrays aligned to output tokens (tiny random Llama), equal to an independent eager pass
(SmolLM2), resumable and refusing to mix models."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from builder import internals, replay
from builder.cli import main
from much_dataset import schema
from much_dataset.internals import load_internals
from tests._floats import SAME_PROBABILITIES
from tests.builder import _smollm

SAMPLE = Path(__file__).resolve().parents[2] / "much_dataset" / "sample" / "data" / "en" / "test-00000-of-00001.parquet"


def _tiny_llama(seed: int = 0):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(seed)
    config = transformers.LlamaConfig(vocab_size=50, hidden_size=32, intermediate_size=48, num_hidden_layers=3,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    config._attn_implementation = "eager"
    return transformers.LlamaForCausalLM(config).eval()


PROMPT, TOKENS = [3, 7, 11, 2, 9], [5, 17, 23, 4, 8, 30]


def test_tiny_llama_shapes_and_indices():
    import torch

    model = _tiny_llama()
    options = internals.InternalsOptions(hidden_layers=(0, 2, 3), attention_window=3)
    arrays, logits, _ = internals.forward_internals(model, PROMPT, TOKENS, options)
    n, p = len(TOKENS), len(PROMPT)
    assert arrays["attention_to_previous"].shape == (n, 3, 4)
    assert arrays["hidden"].shape == (n, 3, 32) and arrays["hidden"].dtype == np.float16
    assert arrays["attention_window"].shape == (n, 3, 4, 3)
    with torch.inference_mode():
        out = model(input_ids=torch.tensor([PROMPT + TOKENS]), output_attentions=True, output_hidden_states=True)
    for t in range(n):
        for layer in range(3):
            full = out.attentions[layer][0].numpy()
            np.testing.assert_allclose(arrays["attention_to_previous"][t, layer], full[:, p + t, p + t - 1])
            np.testing.assert_allclose(arrays["attention_window"][t, layer, :, 0], full[:, p + t, p + t - 1])
            np.testing.assert_allclose(arrays["attention_window"][t, layer, :, 2], full[:, p + t, p + t - 3])
        for column, index in enumerate((0, 2, 3)):
            np.testing.assert_allclose(arrays["hidden"][t, column], out.hidden_states[index][0, p + t].numpy(),
                                       rtol=1e-3, atol=1e-3)
    # the input embedding of row t is the embedding of output token t itself
    embedding = model.get_input_embeddings().weight.detach().numpy()
    np.testing.assert_allclose(arrays["hidden"][:, 0].astype(np.float32), embedding[TOKENS], rtol=1e-3, atol=1e-3)


def test_alignment_hidden_row_before_predicts_the_token_probability():
    """Semantic alignment (no index arithmetic): the last layer's hidden state at row t - 1, through the LM head,
    gives the probability of output token t that the pass re-derived from its logits -- and row t does not."""
    import torch

    model = _tiny_llama(1)
    options = internals.InternalsOptions(hidden_layers=(3,), hidden_dtype="float32")
    arrays, logits, _ = internals.forward_internals(model, PROMPT, TOKENS, options)
    with torch.inference_mode():
        head = model.lm_head(torch.from_numpy(arrays["hidden"][:, 0]))
    from_hidden = torch.softmax(head, dim=-1).numpy()
    from_logits = torch.softmax(logits, dim=-1).numpy()
    t = np.arange(1, len(TOKENS))
    np.testing.assert_allclose(from_hidden[t - 1, np.array(TOKENS)[t]], from_logits[t, np.array(TOKENS)[t]],
                               rtol=1e-4)
    # an off-by-one (row t instead of t - 1) gives other numbers
    assert not np.allclose(from_hidden[t, np.array(TOKENS)[t]], from_logits[t, np.array(TOKENS)[t]], rtol=1e-2)
    # and the attention rows sum to 1 over keys up to the position (a causal row), the previous-token weight > 0
    assert (arrays["attention_to_previous"] > 0).all()


def test_parse_layers():
    assert internals.parse_layers(None, 30) == (16,)
    assert internals.parse_layers("6,18", 30) == (6, 18)
    for bad in ("31", "6,6", "a"):
        with pytest.raises(internals.BuilderError):
            internals.parse_layers(bad, 30)


def _rows(n: int) -> list[dict]:
    return list(replay.read_rows(SAMPLE))[:n]


def test_smollm2_pack_equals_an_independent_eager_pass(tmp_path, one_smollm2_load):
    """Done-when: a pack of three sample rows equals an independent eager-attention transformers pass (attention
    within 1e-3, hidden within 0.5 % relative), and the re-derived probabilities equal the stored ones."""

    gguf = _smollm.gguf_path()
    common = ["--model", gguf, "--prompt-style", "user", "--hidden-layers", "6,18"]
    assert main(["internals", "--out", str(tmp_path), "--source", str(SAMPLE), "--limit", "3",
                 "--rows-per-shard", "2", *common]) == 0
    pack = load_internals(tmp_path)
    manifest = pack.manifest
    assert manifest["n_layers"] == 30 and manifest["n_heads"] == 9 and manifest["hidden_layers"] == [6, 18]
    assert manifest["weights_sha256"] == internals.file_sha256(gguf)
    # against the sample's stored probabilities, computed on another CPU: float32 rounding, not exact bits
    assert manifest["max_abs_diff"] <= SAME_PROBABILITIES and len(manifest["shards"]) == 2

    llm = _smollm.smollm2()
    model, tokenizer = llm.model, llm.tokenizer
    previous = model.config._attn_implementation
    model.set_attn_implementation("eager")  # the shared model: restored below for the other tests
    try:
        _compare_with_pack(model, tokenizer, pack)
    finally:
        model.set_attn_implementation(previous)


def _compare_with_pack(model, tokenizer, pack) -> None:
    import torch

    for row in _rows(3):
        text = tokenizer.apply_chat_template([{"role": "user", "content": row[schema.PROMPT]}], tokenize=False,
                                             add_generation_prompt=True)
        prompt = tokenizer.encode(text, add_special_tokens=False)
        tokens = list(row[schema.OUTPUT_TOKENS])
        with torch.inference_mode():
            out = model(input_ids=torch.tensor([prompt + tokens]), output_attentions=True, output_hidden_states=True)
        start = len(prompt)
        expected_attention = np.stack([
            np.stack([out.attentions[layer][0, :, start + t, start + t - 1].numpy() for layer in range(30)])
            for t in range(len(tokens))])
        got = pack[row[schema.GENERATION_ID]]
        np.testing.assert_allclose(got["attention_to_previous"], expected_attention, atol=1e-3)
        for column, index in enumerate((6, 18)):
            expected = out.hidden_states[index][0, start : start + len(tokens)].numpy()
            error = np.linalg.norm(got["hidden"][:, column].astype(np.float32) - expected, axis=-1)
            assert (error <= 5e-3 * np.linalg.norm(expected, axis=-1)).all()
        # the stored probabilities of token t came from the position before it
        probs = torch.softmax(out.logits[0, start - 1 : start - 1 + len(tokens)], dim=-1).numpy()
        stored = [dict(zip(i, v, strict=True)) for i, v in zip(row[schema.LOGITS_TOKEN_IDS],
                                                                row[schema.LOGITS_VALUES], strict=True)]
        for t, token in enumerate(tokens):
            assert probs[t, token] == pytest.approx(stored[t][token], abs=SAME_PROBABILITIES)


def test_smollm2_cli_resumes_never_twice_and_refuses_another_configuration(tmp_path, capsys, one_smollm2_load):
    gguf = _smollm.gguf_path()
    common = ["--model", gguf, "--prompt-style", "user"]
    assert main(["internals", "--out", str(tmp_path), "--source", str(SAMPLE), "--limit", "1", *common]) == 0
    first = json.loads((tmp_path / "manifest.json").read_text())
    assert main(["internals", "--out", str(tmp_path), "--source", str(SAMPLE), "--limit", "2", *common]) == 0
    assert "1 done, 1 to go" in capsys.readouterr().out
    second = json.loads((tmp_path / "manifest.json").read_text())
    assert set(second["rows"]) == {r[schema.GENERATION_ID] for r in _rows(2)}
    gid = _rows(1)[0][schema.GENERATION_ID]
    assert second["rows"][gid] == first["rows"][gid]  # not recomputed
    assert len(list((tmp_path / "shards").iterdir())) == 2
    assert main(["internals", "--out", str(tmp_path), "--source", str(SAMPLE), "--limit", "2", *common]) == 0
    assert "2 done, 0 to go" in capsys.readouterr().out
    # a shard left by a killed run (written, never committed to the manifest) is not a row of the pack
    (tmp_path / "shards" / "orphan.safetensors").write_bytes(b"partial")
    assert len(load_internals(tmp_path)) == 2
    # asking for other layers on the same pack is refused before anything is written
    assert main(["internals", "--out", str(tmp_path), "--source", str(SAMPLE), "--limit", "3",
                 "--hidden-layers", "3", *common]) == 2
    assert "built differently" in capsys.readouterr().err
    assert len(json.loads((tmp_path / "manifest.json").read_text())["rows"]) == 2


def test_a_pack_grows_from_several_source_files(tmp_path, one_smollm2_load):
    """One pack per generation config holds every language: a run with another --source file adds its rows (and
    its sha256 under "sources") instead of being refused, keeps the pack's fingerprint, and loads against both
    languages' rows; another model is still refused."""
    gguf = _smollm.gguf_path()
    french = SAMPLE.parents[1] / "fr" / SAMPLE.name
    common = ["--model", gguf, "--prompt-style", "user", "--hidden-layers", "6", "--limit", "1"]
    assert main(["internals", "--out", str(tmp_path), "--source", str(SAMPLE), *common]) == 0
    fingerprint = load_internals(tmp_path).fingerprint
    assert main(["internals", "--out", str(tmp_path), "--source", str(french), *common]) == 0
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["sources"] == sorted({internals.file_sha256(SAMPLE), internals.file_sha256(french)})
    rows = [*_rows(1), *list(replay.read_rows(french))[:1]]
    pack = load_internals(tmp_path, dataset=rows)  # every row of both files, with its token count
    assert set(pack) == {r[schema.GENERATION_ID] for r in rows} and pack.fingerprint == fingerprint
    before = manifest["rows"]
    assert main(["internals", "--out", str(tmp_path), "--source", str(french), *common[:-4], "--hidden-layers", "3",
                 "--limit", "1"]) == 2  # other layers: still refused
    assert json.loads((tmp_path / "manifest.json").read_text())["rows"] == before
