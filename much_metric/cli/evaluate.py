"""``much evaluate``: score a MUCH-signals file (``generation_id``, ``signal_name``, ``values``) on a MUCH split.

Example::

    much evaluate --source sample --scores signals/ --aggregator all --by lang --rank roc_auc --spans \\
        --calibrate-on 0.5 --report report.html --figures figures/

Every table has the floors (a seeded random score and a constant score on the same claims) as reference rows and
each method's coverage. Signals whose name ends with ``@claim`` hold one value per chunk (claim-level methods).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from much_metric.cli._evaluate_tables import (
    format_calibration,
    format_rank,
    format_spans,
    format_table,
    published_rows,
)
from much_metric.cli._flags import add_names_flag, add_renamed_alias
from much_metric.cli._text import FLOOR_NOTE, data_title, fits_width, footnote, jsonable


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "evaluate",
        help="score token-level signals (a MUCH-signals parquet/jsonl file) on MUCH claims",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--source", help="'sample', a hub dataset id (orailix/MUCH) or a local folder")
    add_renamed_alias(parser, "--data", "--source", dest="source")
    parser.add_argument("--config", default="all", help="dataset config: all, en, fr, es or de (default: all)")
    parser.add_argument("--split", default=None, help="split to evaluate (default: every split of the dataset)")
    parser.add_argument(
        "--selection", choices=("all", "manual", "auto"), default="all",
        help="manual: samples both annotators labelled identically (paper's test benchmark); auto: samples "
        "without human labels; all (default): every sample.",
    )
    parser.add_argument(
        "--labels", default="labels",
        help="ground truth: labels (GPT-4o, the reference; default), human_labels_0, human_labels_1 or human-agreed "
        "(both annotators' common labels); samples without it ([0] = no human label) are left out and counted",
    )
    parser.add_argument(
        "--scores", required=True,
        help="MUCH-signals file (.parquet/.jsonl: generation_id, signal_name, values) or a folder of them; "
        "records without signal_name are named after their file; names ending with @claim: one value per chunk",
    )
    add_names_flag(parser, "--signals", "--signal", dest="signals", help="evaluate only these signals")
    parser.add_argument("--internals", default=None,
                        help="the internals pack the internals signals (rauq, probes, ...) of --scores were computed "
                             "from (`much run --internals PACK --out DIR`): a file computed from another pack is "
                             "refused")
    parser.add_argument("--include-training-rows", action="store_true",
                        help="score a learned signal on the rows it was trained or validated on too (default: those "
                             "named in its file's metadata are left out, with a note; this prints a warning)")
    parser.add_argument("--paired", action=argparse.BooleanOptionalAction, default=True,
                        help="score every signal and floor on the samples every signal covers (default: %(default)s); "
                             "--no-paired: each signal on every sample it covers, the floors on every sample "
                             "(full-data numbers, labelled, not comparable)")
    parser.add_argument(
        "--aggregator", action="append", default=None,
        help="product (default), mean, max, geometric or all (repeatable)",
    )
    parser.add_argument("--stopword-handling", choices=("null", "exclude"), default="null",
                        help="null (reference, default): stopword tokens score 0; exclude: removed from claims")
    add_renamed_alias(parser, "--stopwords", "--stopword-handling", dest="stopword_handling",
                      choices=("null", "exclude"))
    parser.add_argument("--by", action="append", default=[],
                        help="breakdown: lang, generation_config, model or temperature (repeatable)")
    parser.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples for intervals (0 = none)")
    parser.add_argument("--random-state", type=int, default=0,
                        help="bootstrap / split / random-floor seed (default 0)")
    add_renamed_alias(parser, "--seed", "--random-state", dest="random_state", type=int)
    parser.add_argument("--min-coverage", type=float, default=None,
                        help="least fraction of the samples a signal must cover (default 0.95; 0 accepts any)")
    parser.add_argument("--rank", default=None, metavar="METRIC",
                        help="print a leaderboard by this metric (e.g. roc_auc, pr_auc, prr) with bootstrap intervals, "
                        "rank probabilities, pairwise p-values, language gap and relative runtime")
    parser.add_argument("--generation-time", default=None,
                        help="LLM generation time (seconds or a JSON file from "
                        "scripts/tools/estimate_generation_time.py) for the leaderboard's relative runtimes "
                        "(timings.json next to the signal files)")
    parser.add_argument(
        "--calibrate-on", default=None, metavar="SPEC",
        help="fit an isotonic calibrator on SPEC and report ECE/Brier on the other samples: a fraction (0.5 = a "
        "seeded half of the evaluated samples), a split (train = MUCH's auto samples) or a selection (auto, manual)",
    )
    parser.add_argument("--claims-kept", type=int, nargs="?", const=200, default=None, metavar="SPLITS",
                        help="claims kept at alpha 0.05, 0.1, 0.2 by an answer-level conformal filter, per method, "
                        "over SPLITS seeded half/half splits of the answers (default 200; docs/conformal.md)")
    parser.add_argument("--spans", action="store_true",
                        help="Mu-SHROOM span scores (IoU, rho) per language next to mark-all / mark-none "
                        "(the embedded sample; threshold chosen on a seeded half)")
    parser.add_argument("--mushroom", default=None, help="Mu-SHROOM JSONL file or folder for --spans "
                        "(default: the repository's data/mushroom)")
    parser.add_argument("--tokenizer", default="smollm2",
                        help="tokenizer giving the character offsets for --spans (default smollm2, the sample's)")
    parser.add_argument("--baseline", default=None, metavar="NAME",
                        help="the reference method of the table's paired Δ column (a signal or display name; "
                        "default: the best row by --rank's metric, else by ROC-AUC)")
    parser.add_argument("--report", default=None, help="write a self-contained HTML report here")
    parser.add_argument("--figures", default=None, help="also save the report's figures as PNG and SVG in this folder")
    parser.add_argument("--json", default=None, help="write all metrics as JSON here")
    parser.add_argument("--no-progress", action="store_true",
                        help="no progress bars (by default: scoring and span bars on a terminal)")
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


#: The legend of the cost column.
COST_NOTE = ("cost/claim = the wall time of computing the signal per claim, as its file records it (`much run --out` "
             "measures it: wall and CPU seconds, machine and threads, forward passes, samples and model calls beyond "
             "the stored data; read them with much_metric.signals.cost_of); '—' = the file records none.")


def _calibrate_on(spec: str | None) -> float | str | None:
    """``--calibrate-on``: a fraction (``0.5``) or a split / selection name."""
    if spec is None:
        return None
    try:
        return float(spec)
    except ValueError:
        return spec


def _options(args: argparse.Namespace) -> dict[str, Any]:
    """The flags as :func:`much_metric.benchmark.evaluate_files`' keywords (each checked when built)."""
    from much_metric.benchmark import DataOptions, ReportOptions
    from much_metric.report import LABEL_CHOICES, MIN_COVERAGE, EvaluationOptions
    from much_metric.scoring import Aggregation, Bootstrap, check_resamples

    if args.source is None:  # not argparse's required=: the hidden --data alias must satisfy it too
        raise ValueError("--source is required: 'sample', a hub dataset id (orailix/MUCH) or a local folder")
    if args.labels not in LABEL_CHOICES:
        raise ValueError(f"--labels must be one of {LABEL_CHOICES}, got {args.labels!r}")
    check_resamples(args.bootstrap, "--bootstrap")
    if args.rank is not None:
        from much_metric.scoring import METRICS

        if args.rank not in METRICS:
            from much_dataset.params import unknown_name

            raise unknown_name("--rank metric", args.rank, METRICS)
    for option in ("report", "json"):
        target = getattr(args, option)
        if target and not Path(target).resolve().parent.is_dir():
            raise ValueError(f"--{option}: the folder of {target} does not exist")
    bootstrap = Bootstrap(n_resamples=args.bootstrap, random_state=args.random_state) if args.bootstrap else None
    evaluation = EvaluationOptions(
        aggregation=tuple(Aggregation(aggregator=name, stopword_handling=args.stopword_handling)
                          for name in _aggregators(args.aggregator)),
        by=tuple(args.by), bootstrap=bootstrap, random_state=args.random_state, labels=args.labels,
        min_coverage=MIN_COVERAGE if args.min_coverage is None else args.min_coverage,
        include_training_rows=args.include_training_rows, paired=args.paired, progress=not args.no_progress)
    return {"signals": args.signals, "evaluation": evaluation, "internals": args.internals,
            "data": DataOptions(config=args.config, split=args.split, selection=args.selection,
                                generation_time=args.generation_time),
            "report": ReportOptions(rank=args.rank, calibrate_on=_calibrate_on(args.calibrate_on), spans=args.spans,
                                    mushroom=args.mushroom, tokenizer=args.tokenizer, baseline=args.baseline)}


@fits_width  # prose lines (header, notes) wrapped at 120 columns like the tables
def run(args: argparse.Namespace) -> int:
    """Parse the flags into :func:`much_metric.benchmark.evaluate_files`' options, call it and print its report;
    expected failures propagate to :func:`much_metric.cli.main` (one line ``much evaluate: error: ...``, exit 2)."""
    from much_metric.baselines import display_name
    from much_metric.benchmark import evaluate_files

    if args.claims_kept is not None and args.claims_kept < 1:
        raise ValueError(f"--claims-kept needs a positive number of splits, got {args.claims_kept}")
    result = evaluate_files(args.source, args.scores, **_options(args))
    if args.claims_kept:
        from dataclasses import replace

        from much_metric.conformal import Splits, claims_kept_of_table

        splits = Splits(n_splits=args.claims_kept, random_state=args.random_state)
        result = replace(result, claims_kept=claims_kept_of_table(result.table, splits=splits, display=display_name))
    deltas = result.table.deltas  # the paired Δ column: printed, in --json and drawn by the report
    _print(result, args, deltas)
    if args.json:
        from much_metric.fileio import atomic_write_bytes

        atomic_write_bytes(Path(args.json), json.dumps(jsonable(result.to_dict()), indent=2).encode("utf-8"))
    if args.report:
        try:
            result.write_html(args.report, title=data_title(args.source, "Evaluation"), figures=args.figures,
                              display=display_name)
        except ImportError as error:  # matplotlib is an optional dependency (extra "report"): main names the extra
            raise ImportError(f"--report needs matplotlib ({error})", name=error.name or "matplotlib") from error
        print(f"report written to {args.report}" + (f" (figures in {args.figures})" if args.figures else ""))
    return 0


def _print(result: Any, args: argparse.Namespace, deltas: Any = None) -> None:
    """The tables of an :class:`~much_metric.benchmark.EvaluationReport`, with its notes."""
    from much_metric.baselines import display_name

    table = result.table
    for note in result.notes:
        print(f"note: {note}")
    if args.source == "sample":
        print(data_title(args.source, "Evaluation"))
    print(f"{args.source} ({table.n_dataset_samples} samples with ground truth '{table.labels}', "
          f"selection={args.selection}, stopword_handling={args.stopword_handling}"
          f"{', 95% bootstrap intervals over samples' if args.bootstrap else ''})")
    if table.excluded:
        print(f"note: {table.excluded} samples have no ground truth '{table.labels}' ([0] = no human label"
              f"{' or annotators disagree' if table.labels == 'human-agreed' else ''}) and are left out")
    for name, strangers in table.unknown.items():
        if strangers:
            more = f" (and {len(strangers) - 10} more)" if len(strangers) > 10 else ""
            print(f"note: {display_name(name)}: {len(strangers)} generation_ids of the signal file are not in the "
                  f"dataset and are ignored: {', '.join(repr(g) for g in strangers[:10])}{more}")
    for name, count in table.missing.items():
        if count:
            print(f"note: {display_name(name)}: {count} samples have no values and are left out (coverage "
                  f"{table.coverage[name]:.1%})")
    _print_table(result, args, deltas)
    if result.ranking is not None:
        print()
        if result.generation_seconds is not None:
            print(f"LLM generation time: {result.generation_seconds:,.1f}s ({result.generation_source})")
        print(format_rank(result.ranking, published_rows(args, args.rank)))
    if result.calibration:
        print()
        print(f"calibration (isotonic, fitted on {args.calibrate_on}; ECE: 20 equal-width bins)")
        print(format_calibration(list(result.calibration)))
    if result.spans:
        print()
        print(format_spans(result.spans))
    if result.claims_kept is not None:
        from much_metric.conformal import format_claims_kept

        print()
        print(format_claims_kept(result.claims_kept))


def _print_table(result: Any, args: argparse.Namespace, deltas: Any) -> None:
    """Which samples the rows are on, what the Δ column compares, the metric table and its legend."""
    from much_metric.baselines import display_name

    table = result.table
    line = table.pairing.describe(display_name) if table.pairing is not None else None
    if line:
        print(line)
    if deltas is not None:
        print(deltas.describe(display_name))
    print(format_table(table, result.trained_as, rank=args.rank, deltas=deltas))
    legend = "" if deltas is None else deltas.legend()
    print(footnote(FLOOR_NOTE + " " + COST_NOTE + (" Flags: " + legend if legend else "")))
