#!/usr/bin/env bash
# The tests that compare floats computed by torch (or BLAS) with stored or independently computed ones, run once per
# CPU kernel path, so that a tolerance tied to one CPU family fails here and not on a user's first run.
#
# torch picks its vector kernels when it starts (torch.backends.cpu.get_cpu_capability(): AVX512 on an AVX-512
# machine, AVX2 on an older x86 one); ATEN_CPU_CAPABILITY forces a lower one. With it, MKL (MKL_ENABLE_INSTRUCTIONS)
# and oneDNN (ONEDNN_MAX_CPU_ISA), which do the matrix products, are held to the same instruction set, so that a run
# computes as a CPU of that family would. The float32 results then differ in their last bits; the tests must not
# (tests/_floats.py holds the tolerance and why).
#
# Usage: scripts/tools/check_cpu_capabilities.sh [--stored] [CAPABILITY ...] [-- pytest args]
#   CAPABILITY: native (this CPU's own path, nothing forced), avx2, avx512, default (no vector kernels); without one:
#   native and avx2. A capability above this CPU's (avx512 on an AVX2 machine) is reported as skipped.
#   --stored: only the STORED tests below (what .ci/run runs, with avx2: a few minutes).
# Runs in the active environment (scripts/run_tests.sh's venv; .ci/run runs it with avx2 after the main suite).
# Prints, per capability, the path torch reports, the largest difference between the embedded sample's stored
# probabilities and SmolLM2's recomputation of its first MUCH_CHECK_ROWS (5) English rows, and pytest's summary;
# exits 1 when any run failed.
set -euo pipefail
cd "$(dirname "$0")/../.."

# The float-comparing tests (the audit of issue #59). STORED compare what torch computes now with numbers computed
# once on another machine (the embedded sample's probabilities): the comparisons a new CPU family breaks first.
# SAME_MACHINE compare two computations made here (a model's output against an independent pass, a detector against
# its recomputation, NLI and encoder outputs through another batching): both sides move with the kernel path, but a
# tolerance tighter than its float32 rounding still shows. Every other test compares numbers computed by numpy in
# the same process, or hard-coded ones, which no kernel path changes.
STORED=(
    tests/builder/test_replay.py
    tests/builder/test_import_mushroom.py::test_shipped_sample_is_what_the_code_produces
    tests/builder/test_internals.py::test_smollm2_pack_equals_an_independent_eager_pass
)
SAME_MACHINE=(
    tests/builder/test_internals.py
    tests/builder/test_internals_compression.py
    tests/builder/test_internals_engines.py
    tests/builder/test_generate.py
    tests/builder/test_context.py
    tests/much_dataset/test_internals.py
    tests/much_metric/baselines/test_baselines_nli.py
    tests/much_metric/baselines/test_baselines_nli_routing.py
    tests/much_metric/baselines/test_llm_check.py
    tests/much_metric/baselines/test_semantic_isotropy.py
    tests/much_metric/baselines/test_reference_support.py
    tests/much_metric/baselines/test_bench_nli_gpu_script.py
    tests/much_metric/cli/test_cli_run_nli_mapping.py
    tests/much_metric/learned/test_detector.py
    tests/much_metric/learned/test_training.py
    tests/much_metric/learned/test_kinds.py
    tests/much_metric/learned/test_internals_detectors.py
    tests/much_metric/monitor/test_monitor.py
    tests/much_metric/monitor/test_monitor_openai.py
)

capabilities=()
TESTS=("${STORED[@]}" "${SAME_MACHINE[@]}")
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
    if [ "$1" = --stored ]; then TESTS=("${STORED[@]}"); else capabilities+=("$1"); fi
    shift
done
[ "${1:-}" = "--" ] && shift
[ ${#capabilities[@]} -gt 0 ] || capabilities=(native avx2)

export PYTHONPATH=$PWD HF_HUB_OFFLINE=1
SAMPLE=much_dataset/sample/data/en/test-00000-of-00001.parquet
ROWS=${MUCH_CHECK_ROWS:-5}
gguf=$(python -c "from tests import assets; print(assets.smollm2_gguf_path())")
failed=()
for capability in "${capabilities[@]}"; do
    case "$capability" in
        native) forced=() ;;
        avx2) forced=(ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2) ;;
        avx512) forced=(ATEN_CPU_CAPABILITY=avx512 MKL_ENABLE_INSTRUCTIONS=AVX512 ONEDNN_MAX_CPU_ISA=AVX512_CORE) ;;
        default) forced=(ATEN_CPU_CAPABILITY=default MKL_ENABLE_INSTRUCTIONS=SSE4_2 ONEDNN_MAX_CPU_ISA=SSE41) ;;
        *) echo "check_cpu_capabilities: unknown capability '$capability' (native, avx2, avx512, default)" >&2
           exit 2 ;;
    esac
    reported=$(env "${forced[@]}" python -c "import torch; print(torch.backends.cpu.get_cpu_capability())")
    if [ "$capability" != native ] && [ "${reported,,}" != "$capability" ] && [ "$capability" != default ]; then
        echo "check_cpu_capabilities: $capability: skipped, this CPU runs $reported (torch refuses a higher path)"
        continue
    fi
    echo "check_cpu_capabilities: $capability (torch reports $reported)"
    start=$SECONDS
    status=0
    # The measurement behind the tolerance: `builder verify` re-forwards the sample's first English rows with
    # SmolLM2 and reports the largest |difference| from the stored probabilities (its exit 1 says "above 5e-5").
    verified=$(mktemp -d)
    env "${forced[@]}" python -m builder verify --out "$verified" --source "$SAMPLE" --model "$gguf" --rows "$ROWS" \
        --prompt-style user --out-of-top swap --tolerance 5e-5 > "$verified/log" 2>&1 || status=$?
    python - "$verified/verify.json" "$capability" <<'PY' || cat "$verified/log"
import json
import sys

report = json.load(open(sys.argv[1]))
print(f"check_cpu_capabilities: {sys.argv[2]}: {report['rows']} sample rows re-forwarded, max |difference| from the "
      f"stored probabilities {report['max_abs_diff']:.3g}")
PY
    rm -rf "$verified"
    env "${forced[@]}" python -m pytest -q -p no:cacheprovider "${TESTS[@]}" "$@" || status=$?
    echo "check_cpu_capabilities: $capability: exit $status in $((SECONDS - start)) s"
    [ "$status" -eq 0 ] || failed+=("$capability")
done
if [ ${#failed[@]} -gt 0 ]; then
    echo "check_cpu_capabilities: failed under: ${failed[*]}" >&2
    exit 1
fi
