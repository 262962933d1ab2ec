"""--executor ray: the project's engines in Ray Data actors on a single-node cluster this test starts on 127.0.0.1
write the rows the local executor writes (``samples`` and ``generate``).

Ray is not in the main test lock: these tests run in the vLLM stage's venv (scripts/run_vllm_tests.sh installs
``ray[data]``), a skip elsewhere.
"""

from __future__ import annotations

import json

import pytest

from builder.cli import main
from much_dataset.samples import load_samples
from tests._floats import SAME_PROBABILITIES
from tests._tools import require_module
from tests.builder import _smollm

ray = require_module("ray", "ray", "ray is installed in the vLLM stage venv (scripts/run_vllm_tests.sh)")

ANSWERS = [
    {"generation_id": "ray-en", "generation_config": "cfg", "question_id": "q1", "lang": "en",
     "wiki_url": "https://en.wikipedia.org/wiki/Lake_Baikal", "prompt": "How deep is Lake Baikal?"},
    {"generation_id": "ray-fr", "generation_config": "cfg", "question_id": "q2", "lang": "fr",
     "wiki_url": "https://fr.wikipedia.org/wiki/Pont_du_Gard", "prompt": "Qui a construit le pont du Gard ?"},
]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return str(_smollm.safetensors_folder(tmp_path_factory.mktemp("smollm2")))


@pytest.fixture(scope="module")
def cluster():
    """A one-node Ray cluster on 127.0.0.1, owned by this test module (stopped at its end)."""
    ray.init(address="local", _node_ip_address="127.0.0.1", num_cpus=2, include_dashboard=False,
             log_to_driver=False)
    yield
    ray.shutdown()


def _rows(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


#: Fields that hold (or hash) float32 values: equal to float32 rounding only. An actor runs torch with the one CPU
#: Ray gives it, the local process with this machine's threads, and a batched forward pass sums in another order
#: (measured: up to 4.2e-06 on the second and third sample of a batch of three, the first bit-identical).
FLOAT_FIELDS = ("logits_values", "sample_id", "generation_id")


def _assert_same_rows(remote, local, *, key):
    """Every field equal (tokens, texts, candidate ids, sampler, seeds), the probabilities within the project's
    tolerance for the same probabilities (tests/_floats.py)."""
    assert len(remote) == len(local) > 0
    for got, want in zip(remote, local, strict=True):
        assert {k: v for k, v in got.items() if k not in FLOAT_FIELDS} == \
            {k: v for k, v in want.items() if k not in FLOAT_FIELDS}, got[key]
        assert len(got["logits_values"]) == len(want["logits_values"])
        for a, b in zip(got["logits_values"], want["logits_values"], strict=True):
            assert max(abs(x - y) for x, y in zip(a, b, strict=True)) < SAME_PROBABILITIES, got[key]


@pytest.mark.slow
def test_ray_samples_and_generate_write_the_local_rows(cluster, model_dir, tmp_path):
    source = tmp_path / "answers"
    source.mkdir()
    (source / "generations.jsonl").write_text("".join(json.dumps(a) + "\n" for a in ANSWERS))
    common = ["--source", str(source), "--model", model_dir, "--model-name", "smol", "--n", "3",
              "--max-new-tokens", "8", "--temperature", "0.7", "--dtype", "float32", "--device", "cpu"]
    assert main(["samples", "--out", str(tmp_path / "local"), *common]) == 0
    assert main(["samples", "--out", str(tmp_path / "ray"), *common, "--executor", "ray", "--ray-workers", "2"]) == 0
    local = load_samples(tmp_path / "local", dataset=ANSWERS, cache_dir=tmp_path / "cache").to_list()
    remote = load_samples(tmp_path / "ray", dataset=ANSWERS, cache_dir=tmp_path / "cache").to_list()
    assert len(local) == 6
    _assert_same_rows(remote, local, key="sample_index")
    assert ray.is_initialized()  # the executor used the test's cluster and left it running

    for out in ("gen-local", "gen-ray"):
        (tmp_path / out).mkdir()
        (tmp_path / out / "questions.jsonl").write_text("".join(
            json.dumps({k: a[k] for k in ("question_id", "lang", "wiki_url", "prompt")}) + "\n" for a in ANSWERS))
    argv = ["--model", model_dir, "--model-name", "smol", "--max-new-tokens", "8", "--dtype", "float32",
            "--device", "cpu"]
    assert main(["generate", "--out", str(tmp_path / "gen-local"), *argv]) == 0
    assert main(["generate", "--out", str(tmp_path / "gen-ray"), *argv, "--executor", "ray"]) == 0
    local_rows = sorted(_rows(tmp_path / "gen-local" / "generations.jsonl"), key=lambda r: r["question_id"])
    ray_rows = sorted(_rows(tmp_path / "gen-ray" / "generations.jsonl"), key=lambda r: r["question_id"])
    assert len(local_rows) == 2
    _assert_same_rows(ray_rows, local_rows, key="question_id")
