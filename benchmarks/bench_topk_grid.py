"""The degradation grid over the embedded sample: every probability method and a learned detector on the input views
0, 1, 5, 20 and 24, ΔROC-AUC and ΔPRR against the 24 stored with 1,000 paired bootstrap resamples -- timed as a user
runs it, against the obvious alternative.

1. A linear detector is trained first (``much train --protocol leave-one-language-out --fold de``; not timed as part
   of the grid).
2. **Ours**: ``much run --source sample --top-k-grid --signals all-probability,learned:DIR`` in this process (data
   loading, every view, one evaluation of every (method, view), one bootstrap per method over its views with the same
   resamples; exact cells need none). Target: under 10 minutes on 2 cores.
3. **The obvious alternative**: one :func:`much_metric.compare` per (method, view) pair against the 24 stored (each
   call aggregates both token scores and resamples both methods again), on the pairs of the first
   ``--alternative-methods`` methods, scaled to every pair the grid compares. Its deltas and intervals are checked
   equal to ours on those pairs (the same seed draws the same resamples).

    python benchmarks/bench_topk_grid.py [--resamples 1000] [--alternative-methods 3] [--out benchmarks/topk_grid.txt]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402


def _quiet(argv: list[str]) -> tuple[int, str]:
    from much_metric.cli import main

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        code = main(argv)
    return code, buffer.getvalue()


def _alternative(result: dict, resamples: int, methods: int) -> tuple[float, int, int, float]:
    """(seconds, pairs timed, pairs of the grid, largest difference from ours) of compare() per pair."""
    import much_dataset
    from much_metric import compare
    from much_metric.baselines import resolve, token_arrays
    from much_metric.baselines.views import padded, top_k_view
    from much_metric.scoring import Bootstrap

    data = much_dataset.load("sample", split="test")
    rows = [row for row in result["rows"] if not row["signal_name"].startswith("learned_")]
    pairs = [(row, cell) for row in result["rows"] for cell in row["cells"] if cell["how"] == "zero-filled"]
    timed = [(row, cell) for row, cell in pairs if row in rows[:methods]]
    worst = 0.0
    start = time.perf_counter()
    arrays = token_arrays(data)
    for row, cell in timed:
        spec = resolve(row["signal_name"])
        full = arrays.split(spec.compute(arrays, {}, {}))
        view = padded(top_k_view(arrays, cell["top_k"]))
        on_view = view.split(spec.compute(view, {}, {}))
        comparison = compare(on_view, full, data["token_chunks"], data["labels"], data["stopword_mask"],
                             bootstrap=Bootstrap(n_resamples=resamples, random_state=0))
        for metric in ("roc_auc", "prr"):
            ours = [cell["deltas"][metric], *cell["intervals"][metric]]
            theirs = [comparison[metric].difference, *comparison[metric].interval]
            worst = max(worst, float(np.max(np.abs(np.subtract(ours, theirs)))))
    return time.perf_counter() - start, len(timed), len(pairs), worst


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--alternative-methods", type=int, default=3,
                        help="methods whose pairs the compare() alternative is timed on (then scaled)")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "topk_grid.txt"))
    args = parser.parse_args(argv)

    lines = [f"machine: {platform.machine()}, {os.cpu_count()} CPUs ({len(os.sched_getaffinity(0))} usable), "
             f"Python {platform.python_version()}; load average {os.getloadavg()[0]:.2f} at start"]
    with tempfile.TemporaryDirectory() as folder:
        detector = Path(folder) / "linear-de"
        start = time.perf_counter()
        code, _ = _quiet(["train", "--source", "sample", "--protocol", "leave-one-language-out", "--fold", "de",
                          "--out", str(detector), "--no-progress"])
        assert code == 0
        lines.append(f"linear detector trained (leave-one-language-out, fold de) in {time.perf_counter() - start:.1f}s"
                     " (not part of the grid's time)")
        report = Path(folder) / "grid.json"
        start = time.perf_counter()
        code, printed = _quiet(["run", "--source", "sample", "--top-k-grid", "0,1,5,20,24", "--signals",
                                f"all-probability,learned:{detector}", "--bootstrap", str(args.resamples),
                                "--no-progress", "--json", str(report)])
        ours = time.perf_counter() - start
        assert code == 0
        result = json.loads(report.read_text())
    cells = sum(len(row["cells"]) for row in result["rows"])
    lines.append(f"ours: much run --top-k-grid over the sample ({result['n_samples']} samples, {len(result['rows'])} "
                 f"methods x {len(result['top_ks'])} views = {cells} cells, {args.resamples} paired resamples): "
                 f"{ours:.1f}s (target < 600 s on 2 cores: {'OK' if ours < 600 else 'MISSED'}); "
                 f"load average {os.getloadavg()[0]:.2f} at the end")
    seconds, timed, total, worst = _alternative(result, args.resamples, args.alternative_methods)
    scaled = seconds * total / max(timed, 1)
    lines.append(f"alternative: one much_metric.compare per zero-filled (method, view) pair: {seconds:.1f}s on {timed} "
                 f"of {total} pairs -> {scaled:.1f}s scaled (the exact cells, Δ = 0 by construction, not counted); "
                 f"ratio {scaled / ours:.1f}x; largest difference of Δ and interval bounds from ours: {worst:.1e}")
    text = "\n".join([*lines, "", printed.rstrip(), ""])
    Path(args.out).write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
