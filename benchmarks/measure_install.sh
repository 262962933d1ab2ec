#!/usr/bin/env bash
# Measures the README's main command on a fresh virtual environment: install time, environment size, whether a GPU
# stack (torch, nvidia-*, triton) came with it, and the time of `much run --source sample` (offline), whose output it
# prints.
#
#   bash benchmarks/measure_install.sh [SPEC]      # SPEC: what to pip install (default ".", the README's command)
#   bash benchmarks/measure_install.sh ".[all]"    # for comparison
#
# The working tree (tracked and untracked, not ignored, files) is copied to a temporary folder first, so the build
# leaves nothing in the checkout; pip runs with --no-cache-dir so that every wheel is downloaded, as on a fresh
# machine. `much run` runs from the temporary folder with HF_HUB_OFFLINE=1, so the installed package is the one used.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SPEC="${1:-.}"
PYTHON="${PYTHON:-python3}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

mkdir "$WORK/src"
(cd "$ROOT" && git ls-files -co --exclude-standard -z | xargs -0 tar -cf - 2>/dev/null) | tar -xf - -C "$WORK/src"
"$PYTHON" -m venv "$WORK/venv"
VENV_BARE="$(du -sm "$WORK/venv" | cut -f1)"

LOAD_START="$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)"
start=$(date +%s.%N)
if ! (cd "$WORK/src" && "$WORK/venv/bin/pip" install --no-cache-dir -q "$SPEC" >"$WORK/pip.log" 2>&1); then
    grep -v '^WARNING: Location' "$WORK/pip.log" >&2
    exit 1
fi
end=$(date +%s.%N)

SIZE_MB="$(du -sm "$WORK/venv" | cut -f1)"
GPU="$("$WORK/venv/bin/pip" list --format=freeze 2>/dev/null | grep -iE '^(torch|triton|nvidia-[^=]*)==' | tr '\n' ' ' || true)"
N_PACKAGES="$("$WORK/venv/bin/pip" list --format=freeze 2>/dev/null | wc -l)"

echo "# benchmarks/measure_install.sh \"$SPEC\" ($(date -u +%Y-%m-%d), $("$PYTHON" --version 2>&1), $(nproc) CPU cores)"
echo "machine load: load average (1, 5, 15 min) ${LOAD_START} at the start of the install, $(cut -d' ' -f1-3 \
    /proc/loadavg 2>/dev/null || echo unknown) at its end (the cores may be shared: times are upper bounds)"
echo "command: pip install --no-cache-dir \"$SPEC\"   (in a fresh venv, from the package index)"
printf 'install time: %.0f s\n' "$(echo "$end - $start" | bc)"
echo "environment size: ${SIZE_MB} MB (bare venv ${VENV_BARE} MB), ${N_PACKAGES} packages"
echo "GPU stack installed: ${GPU:-none}"
echo "much --version: $("$WORK/venv/bin/much" --version)"
echo
echo "$ HF_HUB_OFFLINE=1 much run --source sample --no-progress"
start=$(date +%s.%N)
(cd "$WORK" && HF_HUB_OFFLINE=1 HF_HOME="$WORK/hf" "$WORK/venv/bin/much" run --source sample --no-progress)
end=$(date +%s.%N)
printf '\nmuch run --source sample: %.1f s wall (first run: includes loading the sample into the datasets cache)\n' \
    "$(echo "$end - $start" | bc)"
