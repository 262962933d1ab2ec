"""The one dtype rule (builder/generation/dtype.py): engines compute in the device default or --dtype, never an
engine's "auto"; verify, replay and internals re-forward in the dtype the rows record (their field, else the
configs.jsonl beside them), refuse rows of several dtypes, and --dtype overrides."""

from __future__ import annotations

import json

import pytest

from builder import _llm
from builder.cli import main
from builder.errors import BuilderError
from builder.generation.dtype import check_config_dtype, default_dtype, engine_dtype, recorded_dtype, replay_dtype


def test_engine_dtype_defaults_per_device_and_checks_names():
    assert default_dtype("cpu") == "float32" and default_dtype("mps") == "float32"
    assert default_dtype("cuda") == "bfloat16" and default_dtype("cuda:1") == "bfloat16"
    assert engine_dtype(None, "cpu") == "float32" and engine_dtype("torch.float16", "cpu") == "float16"
    with pytest.raises(BuilderError, match="--dtype must be one of float32, bfloat16, float16, got 'auto'"):
        engine_dtype("auto", "cpu")


def _write(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_recorded_dtype_from_rows_or_the_configs_beside_them(tmp_path):
    rows = [{"generation_id": "a", "generation_config": "c1", "dtype": "bfloat16"}]
    assert recorded_dtype(rows, tmp_path / "generations.jsonl") == "bfloat16"
    exported = [{"generation_id": "a", "generation_config": "c1"}, {"generation_id": "b", "generation_config": "c1"}]
    source = tmp_path / "rows" / "test.jsonl"
    assert recorded_dtype(exported, source) is None  # nothing records it: the device default
    _write(tmp_path / "rows" / "configs.jsonl", [{"generation_config": "c1", "dtype": "float16"}])
    assert recorded_dtype(exported, source) == "float16"
    assert replay_dtype("float32", exported, source) == "float32"  # --dtype wins
    mixed = [*exported, {"generation_id": "c", "generation_config": "c2", "dtype": "bfloat16"}]
    with pytest.raises(BuilderError, match=r"several dtypes: bfloat16 \(e\.g\. generation_id='c'\), float16"):
        recorded_dtype(mixed, source)


def test_a_config_keeps_one_dtype():
    check_config_dtype(None, "float32")
    check_config_dtype({"generation_config": "c1"}, "float32")  # recorded before the dtype was
    check_config_dtype({"generation_config": "c1", "dtype": "float32"}, "float32")
    with pytest.raises(BuilderError, match="config c1 was generated in bfloat16 .* pass --dtype bfloat16"):
        check_config_dtype({"generation_config": "c1", "dtype": "bfloat16"}, "float32")


class _Loaded(Exception):
    pass


@pytest.mark.parametrize("step", ["verify", "replay", "internals"])
def test_replaying_steps_load_the_model_in_the_recorded_dtype(step, tmp_path, monkeypatch):
    """Rows generated in bfloat16 (on a GPU) are re-forwarded in bfloat16, not in the machine's default."""
    asked = []

    def load(model, *, device=None, dtype=None):
        asked.append(dtype)
        raise _Loaded

    monkeypatch.setattr(_llm, "load_model", load)
    row = {"generation_id": "g", "generation_config": "c1", "lang": "en", "wiki_url": "u", "prompt": "p",
           "output": "o", "output_tokens": [1], "logits_token_ids": [[1]], "logits_values": [[1.0]]}
    _write(tmp_path / "out" / "generations.jsonl", [row])
    _write(tmp_path / "out" / "configs.jsonl", [{"generation_config": "c1", "dtype": "bfloat16"}])
    argv = [step, "--out", str(tmp_path / step), "--source", str(tmp_path / "out" / "generations.jsonl"),
            "--model", "m"]
    with pytest.raises(_Loaded):
        main(["--traceback", *argv])
    with pytest.raises(_Loaded):
        main(["--traceback", *argv, "--dtype", "float32"])
    assert asked == ["bfloat16", "float32"]
