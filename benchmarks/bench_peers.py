"""The cross-toolkit table: every LM-Polygraph and UQLM estimator that runs on stored top-24, beside the toolkit's own
probability methods, on the same claims, with 95 % bootstrap intervals (docs/peers.md).

Runs in the peers' environment (scripts/run_peer_tests.sh builds it; `VENV=... scripts/run_peer_tests.sh` then
`$VENV/bin/python benchmarks/bench_peers.py`). The toolkit's methods are the registry's ``all-probability`` group (those
whose token scores lie in [0, 1], as the product aggregator needs); the peers' are every name of
``much_peers.LMPOLYGRAPH`` and ``much_peers.UQLM`` (MUCH's stopword rule). One :func:`run_benchmark` call: same
claims, same bootstrap resamples, each signal timed. With ``--out`` the signal files are kept and a rerun reuses them.

    python benchmarks/bench_peers.py [--source sample|orailix/MUCH|FOLDER] [--bootstrap 1000] [--out DIR]
                                  [--markdown FILE]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _interval(score, key: str) -> str:
    """``0.712 [0.690, 0.735]`` of a :class:`much_metric.ScoreResult`'s metric ``key``."""
    low, high = (score.intervals or {}).get(key, (float("nan"), float("nan")))
    return f"{getattr(score, key):.3f} [{low:.3f}, {high:.3f}]"


def signals() -> tuple[list[str], list[str]]:
    """(the toolkit's own signals, the peers' signals)."""
    from much_peers import LMPOLYGRAPH, UQLM

    from much_metric.baselines.registry import expand_signals, resolve

    ours = [name for name in expand_signals(["all-probability"]) if not resolve(name).baseline.name.startswith(
        ("lmpolygraph:", "uqlm:"))]
    peers = [f"lmpolygraph:{name}" for name in LMPOLYGRAPH] + [f"uqlm:{name}" for name in UQLM]
    return ours, peers


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", default="sample", help="much_dataset.load source (default: the embedded sample)")
    parser.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples (default 1000)")
    parser.add_argument("--out", default=None, help="folder for the signal files (a rerun reuses them)")
    parser.add_argument("--markdown", default=None, help="also write the table to this file")
    args = parser.parse_args(argv)

    import importlib.metadata

    from much_metric.benchmark import EvaluationOptions, OutputOptions, run_benchmark
    from much_metric.scoring import Bootstrap

    ours, peers = signals()
    start = time.perf_counter()
    result = run_benchmark(args.source, signals=ours + peers,
                           evaluation=EvaluationOptions(bootstrap=Bootstrap(n_resamples=args.bootstrap)),
                           output=OutputOptions(out=args.out, progress=False))
    wall = time.perf_counter() - start
    versions = ", ".join(f"{name} {importlib.metadata.version(name)}" for name in ("lm-polygraph", "uqlm"))
    lines = [
        f"Data: {result.data} ({result.n_samples} samples, {result.n_tokens} tokens, "
        f"{result.rows[0].score.n_claims} claims); aggregator {result.aggregator}, stopwords "
        f"{result.stopword_handling}; {result.n_resamples} bootstrap resamples (95 % intervals); {versions}; "
        f"wall {wall:.0f} s.",
        "",
        "| toolkit | method | signal | ROC-AUC | PR-AUC | PRR | UQ time (s) |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in (*result.rows, *result.floors):
        toolkit = ("LM-Polygraph" if row.signal_name.startswith("lmpolygraph:") else
                   "UQLM" if row.signal_name.startswith("uqlm:") else "floor" if row.uq_seconds is None else "MUCH")
        seconds = "" if row.uq_seconds is None else f"{row.uq_seconds:.2f}"
        lines.append(f"| {toolkit} | {row.method} | `{row.signal_name}` | {_interval(row.score, 'roc_auc')} | "
                     f"{_interval(row.score, 'pr_auc')} | {_interval(row.score, 'prr')} | {seconds} |")
    for note in result.notes:
        lines.append(f"\nNote: {note.message}")
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        Path(args.markdown).write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
