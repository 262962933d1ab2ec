"""The engine benchmarks (bench_generate_engines, bench_samples) run their hf paths without a vLLM venv and name why
each vLLM path is not measured (issue 55); each vLLM path that can run gets the vLLM venv's interpreter."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_generate_engines",
                                                  REPO / "benchmarks" / "bench_generate_engines.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_hf_paths_are_measured_without_a_vllm_venv(bench, tmp_path):
    paths = ["hf b1", "hf b8", "vllm", "openai"]
    skipped = bench.not_measured(paths, str(tmp_path / "model.gguf"), None)
    assert set(skipped) == {"vllm", "openai"}
    assert all("no vLLM venv" in why for why in skipped.values())


def test_a_vllm_path_needs_a_safetensors_folder(bench, tmp_path):
    python = tmp_path / "python"
    python.write_text("")
    assert "not a safetensors folder" in bench.not_measured(["vllm"], str(tmp_path / "m.gguf"), str(python))["vllm"]
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    assert bench.not_measured(["hf b1", "vllm"], str(folder), str(python)) == {}
    # bench_samples names its own vLLM paths
    assert set(bench.not_measured(["hf bN", "vllm n/req"], str(folder), None, vllm_paths=["vllm n/req"])) == {
        "vllm n/req"}


def test_every_generate_path_is_a_generate_command_line(bench):
    from builder.cli import build_parser

    for path in [*bench.SPECS, "hf b1", "hf b8", "hf b32"]:
        engine, flags = bench.path_spec(path)
        args = build_parser().parse_args(["generate", "--out", "o", "--model", "m", "--engine", engine, *flags])
        assert args.engine == engine
    assert bench.path_spec("hf b8") == ("hf", ["--batch-size", "8"])
    assert bench.path_spec("hf b1") == ("hf", ["--batch-size", "1"])
    for bad in ("hf b0", "hf b", "hf8", "vllm2"):
        with pytest.raises(SystemExit, match="unknown path"):
            bench.path_spec(bad)
    assert sys.modules.get("vllm") is None  # the hf side never imports vLLM
