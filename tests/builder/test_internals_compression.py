"""builder internals --hidden-compression int8|pca:K and --attention-to-self: packs of a tiny random Llama read back
as float arrays within the printed reconstruction error, resumable, refusing another compression; int8 on real
SmolLM2 rows against an independent eager pass."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from builder import internals, replay
from builder.cli import main
from much_dataset import schema
from much_dataset.internals import InternalsError, load_internals
from much_dataset.internals_compression import (
    decode_hidden,
    encode_hidden,
    fit_pca,
    parse_compression,
    relative_errors,
)
from tests.builder import _smollm

SAMPLE = Path(__file__).resolve().parents[2] / "much_dataset" / "sample" / "data" / "en" / "test-00000-of-00001.parquet"
WIDTH, LAYERS = 64, 3


# --- the codec alone -------------------------------------------------------------------------------------------------
def test_parse_compression():
    assert parse_compression("none") == ("none", 0) and parse_compression("INT8") == ("int8", 0)
    assert parse_compression("pca:64") == ("pca", 64)
    for bad in ("pca:0", "pca:", "pca:x", "int4", "pca:-3"):
        with pytest.raises(ValueError, match="hidden compression must be one of"):
            parse_compression(bad)


def test_int8_blocks_and_pca_round_trip():
    rng = np.random.default_rng(0)
    hidden = rng.standard_normal((80, 2, WIDTH)).astype(np.float32)
    hidden[:, :, 40] *= 30  # an outlier channel: it sets its own block's scale only
    stored = encode_hidden(hidden, "int8")
    assert stored["hidden"].dtype == np.int8 and stored["hidden_scale"].shape == (80, 2, WIDTH // 32)
    back = decode_hidden(stored, "int8")
    error = relative_errors(hidden, back)
    assert back.dtype == np.float32 and error.max() < 0.02
    whole = np.abs(hidden).max(axis=-1, keepdims=True) / 127  # one scale per vector: worse
    assert relative_errors(hidden, np.rint(hidden / whole) * whole).mean() > 1.2 * error.mean()
    # per element: within half a quantisation step of its block (float16 scale)
    step = np.repeat(stored["hidden_scale"].astype(np.float32), 32, axis=-1)
    assert (np.abs(back - hidden) <= 0.5 * step + 1e-6).all()
    # pca with K = d reconstructs exactly; with K < d the error is the discarded variance's share
    basis = fit_pca(hidden, WIDTH)
    np.testing.assert_allclose(decode_hidden(encode_hidden(hidden, f"pca:{WIDTH}", basis=basis), f"pca:{WIDTH}",
                                             basis=basis), hidden, rtol=1e-4, atol=1e-3)
    small = fit_pca(hidden, 4)
    coefficients = encode_hidden(hidden, "pca:4", basis=small)["hidden"]
    assert coefficients.shape == (80, 2, 4)
    x = hidden[:, 0] - small["mean"][0]
    np.testing.assert_allclose(small["components"][0] @ small["components"][0].T, np.eye(4), atol=1e-5)
    np.testing.assert_allclose(coefficients[:, 0], x @ small["components"][0].T, rtol=1e-4, atol=1e-3)
    with pytest.raises(ValueError, match="pca:60 needs at least 60 fit vectors"):
        fit_pca(hidden[:10], 60)


# --- packs of a tiny random Llama through the CLI ------------------------------------------------------------------
class _Tokenizer:
    """Enough of a tokenizer for prompt_ids: the question's bytes as ids (the model is random anyway)."""

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=True):
        return messages[-1]["content"]

    def encode(self, text, add_special_tokens=False):
        return [1 + b % 200 for b in text.encode("utf-8")[:24]]


@pytest.fixture
def tiny(monkeypatch):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from builder import _llm

    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=49152, hidden_size=WIDTH, intermediate_size=96,
                                      num_hidden_layers=LAYERS, num_attention_heads=4, num_key_value_heads=2,
                                      max_position_embeddings=512)
    config._attn_implementation = "eager"
    model = transformers.LlamaForCausalLM(config).eval()
    loaded = _llm.LoadedModel(model=model, tokenizer=_Tokenizer(), device="cpu", dtype=torch.float32, source="tiny")
    monkeypatch.setattr(_llm, "load_model", lambda *a, **k: loaded)
    return model


def _independent_hidden(model, row, layers):
    import torch

    prompt = _Tokenizer().encode(row[schema.PROMPT])
    tokens = list(row[schema.OUTPUT_TOKENS])
    with torch.inference_mode():
        out = model(input_ids=torch.tensor([prompt + tokens]), output_hidden_states=True, output_attentions=True)
    start = len(prompt)
    hidden = np.stack([out.hidden_states[i][0, start:start + len(tokens)].numpy() for i in layers], axis=1)
    return hidden, [a[0].numpy() for a in out.attentions], start


def _printed_error(text):
    match = re.search(r"hidden reconstruction error .*: mean ([0-9.e-]+), max ([0-9.e-]+)", text)
    assert match, text
    return float(match.group(1)), float(match.group(2))


def _cli(tmp_path, *extra):
    # a random model: its probabilities are not the stored ones, so the free check is waived (recorded)
    return main(["internals", "--out", str(tmp_path), "--source", str(SAMPLE), "--model", "tiny-random",
                 "--prompt-style", "user", "--hidden-layers", "1,3", "--rows-per-shard", "2",
                 "--allow-probability-mismatch", *extra])


def test_int8_pack_reads_back_within_the_printed_error_resumes_and_refuses_another_compression(tiny, tmp_path,
                                                                                               capsys):
    assert _cli(tmp_path, "--limit", "3", "--hidden-compression", "int8") in (0, 1)
    out = capsys.readouterr().out
    mean, worst = _printed_error(out)
    pack = load_internals(tmp_path)
    manifest = pack.manifest
    assert manifest["compression"] == "int8" and manifest["dtypes"]["hidden"] == "int8"
    assert manifest["hidden_error"]["max"] == pytest.approx(worst, rel=1e-2)
    assert manifest["hidden_error"]["mean"] == pytest.approx(mean, rel=1e-2)
    rows = list(replay.read_rows(SAMPLE))[:3]
    for row in rows:
        got = pack[row[schema.GENERATION_ID]]
        assert got["hidden"].dtype == np.float32 and "hidden_scale" not in got
        expected, _, _ = _independent_hidden(tiny, row, (1, 3))
        assert got["hidden"].shape == expected.shape
        error = relative_errors(expected, got["hidden"])
        assert error.max() <= worst * 1.01 + 1e-6 and error.max() < 0.02
    # resumed: the rows stored are not recomputed; one more row is added
    assert _cli(tmp_path, "--limit", "4", "--hidden-compression", "int8") in (0, 1)
    assert "3 done, 1 to go" in capsys.readouterr().out
    assert len(load_internals(tmp_path)) == 4
    # another compression on the same pack: refused before anything is written
    before = (tmp_path / "manifest.json").read_text()
    assert _cli(tmp_path, "--limit", "5", "--hidden-compression", "pca:4") == 2
    assert "built differently" in capsys.readouterr().err and "compression" in before
    assert (tmp_path / "manifest.json").read_text() == before
    # and asking for no compression (the default) is refused as well
    assert _cli(tmp_path, "--limit", "5") == 2
    assert "compression: pack has 'int8', asked 'none'" in capsys.readouterr().err


def test_pca_pack_basis_is_fitted_once_content_addressed_and_shared_by_shards(tiny, tmp_path, capsys):
    assert _cli(tmp_path, "--limit", "4", "--shard", "0/2", "--hidden-compression", "pca:8",
                "--pca-fit-rows", "3") in (0, 1)
    out = capsys.readouterr().out
    assert "pca:8 basis fitted on" in out
    mean, worst = _printed_error(out)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    name = manifest["pca_basis"]
    import hashlib

    assert hashlib.sha256((tmp_path / "basis" / name).read_bytes()).hexdigest() + ".safetensors" == name
    assert manifest["pca_fit_rows"] == 3 and manifest["compression"] == "pca:8"
    # the other shard uses the stored basis (no second fit) and the same file
    assert _cli(tmp_path, "--limit", "4", "--shard", "1/2", "--hidden-compression", "pca:8",
                "--pca-fit-rows", "3") in (0, 1)
    assert "basis fitted" not in capsys.readouterr().out
    assert json.loads((tmp_path / "manifest.json").read_text())["pca_basis"] == name
    assert len(list((tmp_path / "basis").iterdir())) == 1
    pack = load_internals(tmp_path)
    assert len(pack) == 8
    basis = pack.basis()
    assert basis["components"].shape == (2, 8, WIDTH) and basis["mean"].shape == (2, WIDTH)
    shard0 = [r for i, r in enumerate(replay.read_rows(SAMPLE)) if i % 2 == 0][:4]
    for row in shard0:
        expected, _, _ = _independent_hidden(tiny, row, (1, 3))
        got = pack[row[schema.GENERATION_ID]]["hidden"]
        assert got.dtype == np.float32 and got.shape == expected.shape
        error = relative_errors(expected, got)
        assert error.max() <= max(worst, pack.manifest["hidden_error"]["max"]) * 1.01 + 1e-6
        # the stored coefficients are the projection on the stored basis: the reconstruction is the best one
        # in the basis' span (an independent least-squares fit gives the same vectors)
        for column in range(2):
            centred = expected[:, column] - basis["mean"][column]
            coefficients, *_ = np.linalg.lstsq(basis["components"][column].T, centred.T, rcond=None)
            best = (basis["components"][column].T @ coefficients).T + basis["mean"][column]
            np.testing.assert_allclose(got[:, column], best, rtol=1e-3, atol=1e-3)
    assert 0 < mean <= worst
    # a corrupted basis is refused by its content address
    path = tmp_path / "basis" / name
    path.write_bytes(path.read_bytes()[:-4] + b"\0\0\0\0")
    with pytest.raises(InternalsError, match="does not hash to its name"):
        load_internals(tmp_path)[shard0[0][schema.GENERATION_ID]]


def test_attention_to_self_is_the_attention_diagonal(tiny, tmp_path):
    assert _cli(tmp_path, "--limit", "2", "--attention-to-self") in (0, 1)
    pack = load_internals(tmp_path)
    assert pack.manifest["attention_to_self"] is True
    for row in list(replay.read_rows(SAMPLE))[:2]:
        _, attentions, start = _independent_hidden(tiny, row, (1,))
        got = pack[row[schema.GENERATION_ID]]["attention_to_self"]
        n = len(row[schema.OUTPUT_TOKENS])
        assert got.shape == (n, LAYERS, 4)
        for layer in range(LAYERS):
            positions = np.arange(start, start + n)
            np.testing.assert_allclose(got[:, layer], attentions[layer][:, positions, positions].T, atol=1e-6)
    # a rerun without the flag is another configuration
    assert _cli(tmp_path, "--limit", "3") == 2


# --- int8 on real SmolLM2 rows -------------------------------------------------------------------------------------
def test_int8_on_smollm2_rows_within_about_one_percent():
    import torch

    llm = _smollm.smollm2()
    model, tokenizer = llm.model, llm.tokenizer
    previous = model.config._attn_implementation
    model.set_attn_implementation("eager")
    try:
        options = internals.InternalsOptions(hidden_layers=(8, 16, 24), prompt_style="user",
                                             hidden_compression="int8")
        errors = []
        for row in list(replay.read_rows(SAMPLE))[:2]:
            prompt = internals.prompt_ids(tokenizer, row[schema.PROMPT], "user")
            tokens = list(row[schema.OUTPUT_TOKENS])
            arrays, _, printed = internals.forward_internals(model, prompt, tokens, options)
            with torch.inference_mode():  # an independent pass, default attention kernel
                model.set_attn_implementation(previous)
                out = model(input_ids=torch.tensor([prompt + tokens]), output_hidden_states=True)
                model.set_attn_implementation("eager")
            expected = np.stack([out.hidden_states[i][0, len(prompt):].numpy() for i in (8, 16, 24)], axis=1)
            error = relative_errors(expected, decode_hidden(arrays, "int8"))
            np.testing.assert_allclose(error, printed, atol=1e-4)
            errors.append(error.ravel())
    finally:
        model.set_attn_implementation(previous)
    errors = np.concatenate(errors)
    print(f"int8 on SmolLM2 (2 rows, layers 8/16/24): relative L2 error mean {errors.mean():.4f}, "
          f"max {errors.max():.4f}")
    assert errors.mean() < 0.012 and errors.max() < 0.02


def test_generation_config_selects_its_rows_and_is_part_of_the_identity(tiny, tmp_path, capsys):
    config = "Ks3gTjB5a4QiuE58Qv3-Mw"
    assert _cli(tmp_path, "--limit", "3", "--generation-config", config) in (0, 1)
    pack = load_internals(tmp_path)
    assert pack.manifest["generation_config"] == config and pack.manifest["temperature"] == 1.0
    chosen = [r[schema.GENERATION_ID] for r in replay.read_rows(SAMPLE) if r["generation_config"] == config][:3]
    assert sorted(pack) == sorted(chosen)
    assert _cli(tmp_path, "--limit", "3", "--generation-config", "z8Ot6qx8GU7M9Eo_TWG4nw") == 2
    assert "generation_config: pack has 'Ks3gTjB5a4QiuE58Qv3-Mw'" in capsys.readouterr().err
    assert _cli(tmp_path / "other", "--generation-config", "nope") == 2
    assert "no row has generation_config='nope'" in capsys.readouterr().err
