"""``much evaluate``: score a MUCH-signals file (``generation_id``, ``signal_name``, ``values``) on a MUCH split.

Example::

    much evaluate --data sample --scores signals.parquet --aggregator all --by lang --report report.html
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from much_metric.cli._text import jsonable, text_table


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "evaluate",
        help="score token-level signals (a MUCH-signals parquet/jsonl file) on MUCH claims",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--data", required=True, help="'sample', a hub dataset id (orailix/MUCH) or a local folder")
    parser.add_argument("--config", default="all", help="dataset config: all, en, fr, es or de (default: all)")
    parser.add_argument("--split", default=None, help="split to evaluate (default: every split of the dataset)")
    parser.add_argument(
        "--selection", choices=("all", "manual", "auto"), default="all",
        help="manual: samples both annotators labelled identically (paper's test benchmark); auto: samples "
        "without human labels; all (default): every sample. Ground truth is always the 'labels' column.",
    )
    parser.add_argument(
        "--scores", required=True,
        help="MUCH-signals file (.parquet/.jsonl: generation_id, signal_name, values) or a folder of them; "
        "records without signal_name are named after their file",
    )
    parser.add_argument("--signal", action="append", default=None, help="evaluate only this signal (repeatable)")
    parser.add_argument(
        "--aggregator", action="append", default=None,
        help="product (default), mean, max, geometric or all (repeatable)",
    )
    parser.add_argument("--stopwords", choices=("null", "exclude"), default="null",
                        help="null (reference, default): stopword tokens score 0; exclude: removed from claims")
    parser.add_argument("--by", action="append", default=[],
                        help="breakdown: lang, generation_config, model or temperature (repeatable)")
    parser.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples for intervals (0 = none)")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    parser.add_argument("--report", default=None, help="write a self-contained HTML report here")
    parser.add_argument("--json", default=None, help="write all metrics as JSON here")
    parser.set_defaults(func=run)


def _aggregators(values: list[str] | None) -> list[str]:
    from much_metric.scoring import AGGREGATORS

    chosen: list[str] = []
    for value in values or ["product"]:
        for name in AGGREGATORS if value == "all" else [value]:
            if name not in AGGREGATORS:
                raise ValueError(f"--aggregator must be one of {AGGREGATORS} or 'all', got {name!r}")
            if name not in chosen:
                chosen.append(name)
    return chosen


def _load_dataset(args: argparse.Namespace) -> Any:
    import datasets

    import much_dataset

    loaded = much_dataset.load(args.data, config=args.config, split=args.split)
    if isinstance(loaded, datasets.DatasetDict):
        loaded = datasets.concatenate_datasets([loaded[name] for name in loaded])
    if args.selection != "all":
        from much_dataset.selection import select_samples

        loaded = select_samples(loaded, manual=args.selection == "manual")
    return loaded


def _format_table(table: Any) -> str:
    from much_metric.scoring import METRIC_TABLE
    from much_metric.signals import format_metric

    columns = [metric.key for metric in METRIC_TABLE]
    header = ["method", "aggregator", *(metric.label for metric in METRIC_TABLE), "claims", "halluc."]
    rows = []
    for result in table.results:
        rows.append([result.signal_name, result.aggregator, *(format_metric(result.metrics, k) for k in columns),
                     str(result.metrics["n_claims"]), str(result.metrics["n_hallucinated"])])
        for name, groups in result.metrics.get("by", {}).items():
            for value, metrics in groups.items():
                rows.append([f"  {name}={value}", "", *(format_metric(metrics, k) for k in columns),
                             str(metrics["n_claims"]), str(metrics["n_hallucinated"])])
    return text_table(rows, header)


def run(args: argparse.Namespace) -> int:
    from much_metric.signals import evaluate_signals, read_signals

    try:
        aggregators = _aggregators(args.aggregator)
        signals = read_signals(args.scores, signal_names=args.signal)
        dataset = _load_dataset(args)
        table = evaluate_signals(
            dataset, signals, aggregators=aggregators, stopwords=args.stopwords, by=args.by,
            n_bootstrap=args.bootstrap, random_state=args.seed,
        )
    except (ValueError, KeyError, FileNotFoundError) as error:
        print(f"much evaluate: error: {error}", file=sys.stderr)
        return 2
    print(f"{args.data} ({table.n_dataset_samples} samples, selection={args.selection}, stopwords={args.stopwords}"
          f"{', 95% bootstrap intervals over samples' if args.bootstrap else ''})")
    for name, count in table.missing.items():
        if count:
            print(f"note: {name}: {count} samples have no values and are left out")
    print(_format_table(table))
    if args.json:
        from much_metric.fileio import atomic_write_bytes

        payload = [{"signal_name": r.signal_name, **jsonable(r.metrics)} for r in table.results]
        atomic_write_bytes(Path(args.json), json.dumps(payload, indent=2).encode("utf-8"))
    if args.report:
        from much_metric.signals import write_report

        try:
            write_report(args.report, table, source=str(args.data))
        except ImportError as error:  # matplotlib is an optional dependency (extra "report")
            print(f"much evaluate: error: --report needs matplotlib ({error}); pip install 'much-benchmark[report]'",
                  file=sys.stderr)
            return 2
        print(f"report written to {args.report}")
    return 0
