"""Config and question IDs reproduce the reference's (docs/reference-behaviour.md#config-ids, #question-id,
#generation-configs); the SLURM script names the 8 configs."""

from __future__ import annotations

import base64
import hashlib
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from builder.configs import (
    MUCH_CONFIG_IDS,
    MUCH_CONFIGS,
    GenerationConfig,
    hash_id,
    question_id,
)
from much_dataset import schema

ROOT = Path(__file__).resolve().parents[2]
SPEC_TABLE = {  # docs/reference-behaviour.md#generation-configs, typed in from the table: (model, temperature) -> ID
    ("meta-llama/Llama-3.2-3B-Instruct", 1.0): "iNPhBxMXcn6uNgZtdDG7xQ",
    ("meta-llama/Llama-3.2-3B-Instruct", 0.7): "bESSWQcqIaYZslTy7sy1Hg",
    ("meta-llama/Llama-3.1-8B-Instruct", 1.0): "HmRDWrH188fefK4uXNC_ew",
    ("meta-llama/Llama-3.1-8B-Instruct", 0.7): "h_RExrbMa9DSQoKjgXVAmw",
    ("mistralai/Ministral-8B-Instruct-2410", 1.0): "YRYI5VveUmgxhdPi8apIgA",
    ("mistralai/Ministral-8B-Instruct-2410", 0.7): "ErZg41d6uehYNo-QcoCVAQ",
    ("google/gemma-3-4b-it", 1.0): "Q6U-toJrtxVpeYhI11BKiQ",
    ("google/gemma-3-4b-it", 0.7): "XRKCmRjxLGlxWmIyqYQVCA",
}


@pytest.mark.parametrize(("model", "temperature"), list(SPEC_TABLE))
def test_much_config_ids_from_fields(model, temperature):
    # All fields explicit, as in output/generations/*/config.json of the reference.
    config = GenerationConfig(model_name=model, eager=False, brief=True, greedy=False, seed=1234,
                              temperature=temperature, top_p=0.9, top_k=20, max_new_tokens=500)
    assert config.id == SPEC_TABLE[(model, temperature)]


def test_constants_agree_with_spec_and_schema():
    assert [c.id for c in MUCH_CONFIGS] == list(MUCH_CONFIG_IDS) == list(SPEC_TABLE.values())
    assert {c.id: (c.model_name, c.temperature) for c in MUCH_CONFIGS} == schema.MUCH_CONFIGS


def test_mushroom_config_id_of_the_reference():
    # docs/reference-behaviour.md#config-ids: the Pythia Mu-SHROOM config (seed 0 = English) is a verified reference
    # folder name.
    assert GenerationConfig(model_name="togethercomputer/Pythia-Chat-Base-7B", seed=0).id == "2m5bHed2cQIgR1o7_uV0bQ"


def test_id_is_md5_of_sorted_name_value_lines():
    # An independent spelling of docs/reference-behaviour.md#config-ids, written out field by field.
    text = ("brief=True\neager=False\ngreedy=False\nmax_new_tokens=500\nmodel_name=m\nseed=7\ntemperature=0.5\n"
            "top_k=20\ntop_p=0.9\n")
    expected = base64.urlsafe_b64encode(hashlib.md5(text.encode()).digest()).decode()[:22]
    assert GenerationConfig(model_name="m", seed=7, temperature=0.5).id == expected


def test_int_temperature_hashes_like_float():
    # str(1) != str(1.0): an int from a CLI or JSON must not change the ID.
    assert GenerationConfig(temperature=1).id == GenerationConfig(temperature=1.0).id == MUCH_CONFIG_IDS[0]


def test_record_round_trip():
    config = MUCH_CONFIGS[3]
    record = config.to_record()
    assert record["generation_config"] == config.id
    assert GenerationConfig.from_record({**record, "model_source": "/local/path"}) == config


@pytest.mark.parametrize("bad", [dict(temperature=0.0), dict(top_p=1.5), dict(model_name=""), dict(seed="1"),
                                 dict(brief=1), dict(max_new_tokens=0)])
def test_invalid_fields_are_refused(bad):
    with pytest.raises((ValueError, TypeError)):
        GenerationConfig(**bad)


@given(st.text(), st.text(), st.text())
def test_question_id_shape_and_determinism(lang, prompt, url):
    qid = question_id(lang, prompt, url)
    assert len(qid) == 22 and re.fullmatch(r"[A-Za-z0-9_-]{22}", qid)
    assert qid == question_id(lang, prompt, url)


def test_question_id_is_hash_of_pydantic_style_json():
    # pydantic's model_dump_json: compact separators, non-ASCII kept, field order lang, prompt, wiki_url.
    payload = '{"lang":"fr","prompt":"Où est né Zoé ?","wiki_url":"https://fr.wikipedia.org/wiki/Zo%C3%A9"}'
    assert question_id("fr", "Où est né Zoé ?", "https://fr.wikipedia.org/wiki/Zo%C3%A9") == hash_id(payload)


SBATCH = ROOT / "scripts" / "cluster" / "generate.sbatch"


def test_slurm_script_parses_and_names_the_8_configs():
    text = SBATCH.read_text()
    if shutil.which("bash"):
        subprocess.run(["bash", "-n", str(SBATCH)], check=True)
    assert re.search(r"^#SBATCH --array=0-7$", text, re.MULTILINE)
    models = re.findall(r'^\s+"([^"]+)"\s+# (\d) (\S+)$', text, re.MULTILINE)
    temperatures = re.search(r"^TEMPERATURES=\(([^)]*)\)", text, re.MULTILINE).group(1).split()
    assert len(models) == len(temperatures) == 8
    for (model, index, commented_id), temperature in zip(models, temperatures, strict=True):
        config = GenerationConfig(model_name=model, temperature=float(temperature))
        assert config.id == commented_id == MUCH_CONFIG_IDS[int(index)]
    assert "python -m builder generate" in text and "--batch-size 1" in text


def test_slurm_script_runs_the_generate_command_it_claims(tmp_path):
    # Execute the script with a stub `python` on PATH to see the exact command of array task 5.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").write_text('#!/usr/bin/env bash\necho "$@" > "$MUCH_OUT/called"\n')
    (bin_dir / "python").chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "SLURM_ARRAY_TASK_ID": "5", "MUCH_OUT": str(tmp_path),
           "SLURM_SUBMIT_DIR": str(tmp_path)}
    subprocess.run(["bash", str(SBATCH)], check=True, env=env, capture_output=True)
    called = (tmp_path / "called").read_text().split()
    assert called[:3] == ["-m", "builder", "generate"]
    model = called[called.index("--model") + 1]
    temperature = float(called[called.index("--temperature") + 1])
    assert GenerationConfig(model_name=model, temperature=temperature).id == "ErZg41d6uehYNo-QcoCVAQ"
