#!/usr/bin/env bash
# Runs every benchmark script in sequence and keeps their output in benchmarks/<name>.txt (the numbers quoted in
# BENCHMARKS.md come from these files). Run it on a quiet machine: each script times our code and the reference (or
# the obvious alternative) in the same run and prints the ratio.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p benchmarks
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1
{ uname -m; nproc; python --version; python -c "import numpy, torch, datasets, sklearn; print('numpy', numpy.__version__, 'torch', torch.__version__, 'datasets', datasets.__version__, 'sklearn', sklearn.__version__)"; } > benchmarks/machine.txt
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
# Optional arguments: the benchmarks to run (default: all), e.g. `bash benchmarks/run_benchmarks.sh segmenter ktc`.
names=${*:-segmenter dataset metric metric_ext baselines probability_baselines grid ktc monitor generate stopword_tables learned}
for name in $names; do
    echo "== bench_$name"
    python "benchmarks/bench_$name.py" 2>&1 | tee "benchmarks/$name.txt"
done
cat benchmarks/import_time.txt
