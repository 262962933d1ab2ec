"""``much run``: compute the paper's baselines on a MUCH split, evaluate them, print table 3.

Examples::

    much run --source sample                       # offline: probability baselines on the embedded sample
    much run --source orailix/MUCH --split test --nli-model microsoft/deberta-large-mnli --out signals/

For every baseline it prints table 3's columns -- segmentation, UQ and total wall time, absolute and relative to
the LLM generation time, ROC-AUC and PR-AUC (product aggregator by default) -- then the extra operating points
(AP, TPR at FPR <= 10 %, recall at precision >= 80 %, partial PR-AUC at recall <= 20 %) with bootstrap intervals.

Signals (``--signals``, reference names): by default the probability baselines of table 3 (max_likelihood,
token_likelihood, token_entropy_24) plus CCP (ccp_10_8) and SAR (sar_8) when an NLI model is available: the one
given with ``--nli-model`` (downloaded if needed), else ``microsoft/deberta-large-mnli`` if it is already in the
local Hugging Face cache. Offline and uncached, CCP/SAR are skipped with a note. KTC (``ktc``: nu=4, tau=0.3, the
reference's best "auto" config) joins the defaults when token-neighbour statistics are at hand: shipped with the
embedded sample (the output names their corpus), or given with ``--neighbours``; otherwise it is skipped with a
note. CCP/SAR and the segmentation time
need the generating LLM's tokenizer: SmolLM2's (packaged) for the sample, the four MUCH
models' from the hub for orailix/MUCH, or ``--tokenizer``.

Input views (``--top-k K``, 0 <= K <= 24): score what an API user gets, the K most probable candidates and the
sampled token's own probability (``top_logprobs=K`` and the chosen token's logprob; ``--top-k 0``: the sampled token
alone, as Mu-SHROOM ships it). Without ``--signals`` every registered method whose needs the view and the loaded
resources meet is scored, and the others are listed with their need ("needs top-24"). ``--top-k-grid`` prints the
degradation table instead: the probability methods (and ``--signals learned:DIR`` detectors) on the views 0, 1, 5,
20 and 24, each as ΔROC-AUC and ΔPRR against itself on the 24 stored candidates with paired bootstrap intervals
(docs/methods.md#input-views). Every table has a cost column: wall seconds per claim, measured (and stored with
the signal files of ``--out``).

Generation time (the denominator of the relative runtimes): ``--generation-time SECONDS`` or a JSON file from
``scripts/tools/estimate_generation_time.py``; default for orailix/MUCH = the paper's 2,758 s pro rata, for other data
= output tokens / 11 tokens/s (SmolLM2-135M on 2 CPU cores), an estimate -- see
:mod:`much_metric.baselines.runtime`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from much_metric.cli._flags import add_renamed_alias
from much_metric.cli._run_tables import TABLE3_METRICS, check_baseline, print_table3, table_deltas
from much_metric.cli._text import FLOOR_NOTE, data_title, fits_width, footnote, text_table


def _positive_int(text: str) -> int:
    """argparse type: checked before the NLI model loads (a bad batch size must not read as "model not cached")."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _top_k(text: str) -> int:
    """argparse type of ``--top-k``: an integer in [0, 24]."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 24:
        raise argparse.ArgumentTypeError(f"expected an integer in [0, 24] (candidates per token), got {text!r}")
    return value


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "run",
        help="compute the paper's baselines on MUCH, evaluate them and print table 3",
        description=__doc__,
        epilog=_signals_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--source", default="sample", help="'sample' (default, offline), orailix/MUCH, or a folder")
    add_renamed_alias(parser, "--data", "--source", dest="source")
    parser.add_argument("--config", default="all", help="dataset config: all, en, fr, es or de (default: all)")
    parser.add_argument("--split", default=None, help="train or test (default: every split)")
    parser.add_argument("--selection", choices=("all", "manual", "auto"), default="all",
                        help="manual: samples both annotators labelled identically; auto: samples without human "
                             "labels; all (default)")
    parser.add_argument("--signals", action="append", default=None,
                        help="comma-separated reference signal names, e.g. token_entropy_5,ccp_24_8,sar_3, or "
                             "table3 / table7 (repeatable; default: table 3's five, CCP/SAR only if an NLI model is "
                             "available)")
    parser.add_argument("--nli-model", default=None,
                        help="NLI model for CCP/SAR (hub id or folder; default microsoft/deberta-large-mnli if "
                             "cached locally), or one per language: 'en=microsoft/deberta-large-mnli,fr+es+de=MODEL' "
                             "('*=MODEL': every other language) or a JSON file {\"en\": MODEL, ...}; each sample "
                             "is scored by its language's model (signal suffix _multi-<hash> when the models differ)")
    parser.add_argument("--no-nli", action="store_true", help="skip CCP and SAR")
    parser.add_argument("--nli-batch-size", type=_positive_int, default=None,
                        help="most NLI pairs per batch (default 256)")
    parser.add_argument("--nli-max-batch-tokens", type=_positive_int, default=None,
                        help="most padded NLI tokens (pairs x longest pair) per batch (default 16384)")
    parser.add_argument("--device", default=None, help="torch device for the NLI model (default: cuda if available)")
    parser.add_argument("--reference-window", action="store_true",
                        help="CCP/SAR context suffix of sigma-1 tokens as the reference code (default: sigma)")
    from much_metric.baselines.resource_table import RESOURCE_TABLE

    for entry in RESOURCE_TABLE:  # one flag per resource of the table (--tokenizer, --samples, --encoder, ...)
        if entry.flag is not None:
            parser.add_argument(entry.flag, default=None, action="append" if entry.repeatable else "store",
                                metavar=entry.metavar, help=entry.help)
    parser.add_argument("--top-k", type=_top_k, default=None, metavar="K",
                        help="score on the input view of the K most probable candidates and the sampled token's own "
                             "probability (0-24; 0 = the sampled token alone); methods that read more are listed "
                             "with their need, not scored")
    parser.add_argument("--top-k-grid", nargs="?", const="0,1,5,20,24", default=None, metavar="K,K,...",
                        help="print the degradation table on these views (default 0,1,5,20,24): ΔROC-AUC and ΔPRR "
                             "of each probability method and learned detector against the 24 stored candidates")
    parser.add_argument("--report", default=None,
                        help="write an HTML report here (results, ROC-AUC against cost per claim with the Pareto "
                             "front; with --top-k-grid the degradation figure)")
    parser.add_argument("--aggregator", default="product", help="product (default), mean, max or geometric")
    parser.add_argument("--stopword-handling", choices=("null", "exclude"), default="null",
                        help="null (reference, default): stopword tokens score 0; exclude: removed from claims")
    add_renamed_alias(parser, "--stopwords", "--stopword-handling", dest="stopword_handling",
                      choices=("null", "exclude"))
    parser.add_argument("--bootstrap", type=int, default=1000,
                        help="bootstrap resamples for intervals: 0 = none, else at least 40")
    parser.add_argument("--random-state", type=int, default=0, help="bootstrap and random-floor seed (default 0)")
    add_renamed_alias(parser, "--seed", "--random-state", dest="random_state", type=int)
    parser.add_argument("--out", default=None,
                        help="folder for the signal files (<name>.parquet) and timings.json; a rerun reuses them")
    parser.add_argument("--file-format", choices=("parquet", "jsonl"), default="parquet",
                        help="signal file format under --out (default parquet, as orailix/MUCH-signals)")
    add_renamed_alias(parser, "--format", "--file-format", dest="file_format", choices=("parquet", "jsonl"))
    parser.add_argument("--generation-time", default=None,
                        help="LLM generation time in seconds, or a JSON file from "
                        "scripts/tools/estimate_generation_time.py")
    parser.add_argument("--json", default=None, help="write the table (metrics and times) as JSON here")
    parser.add_argument("--include-training-rows", action="store_true",
                        help="score a learned signal on the rows it was trained or validated on too (default: left "
                             "out, with a note; this prints a warning)")
    parser.add_argument("--paired", action=argparse.BooleanOptionalAction, default=True,
                        help="score every signal and floor on the rows every signal covers (default: %(default)s); "
                             "--no-paired: each signal on every row it covers, the floors on every row (full-data "
                             "numbers, labelled, not comparable)")
    parser.add_argument("--baseline", default=None, metavar="NAME",
                        help="the reference method of the table's paired Δ ROC-AUC column (a signal or display "
                        "name; default: the best row by ROC-AUC)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    parser.set_defaults(func=run)


def _signal_names(values: list[str] | None) -> list[str] | None:
    """``--signals`` values (comma-separated names and groups) -> concrete names, checked before any loading."""
    from much_metric.benchmark import check_signals

    return None if values is None else check_signals(values, option="--signals")

def _signals_help() -> str:
    """The registered baselines for ``much run --help`` (built-ins and entry-point plugins)."""
    from much_metric.baselines.needs import depth_label
    from much_metric.baselines.registry import available, signal_groups

    lines = [f"  {name:<28} {b.label({k: '<' + k + '>' for k in b.fields}):<24} reads {depth_label(b)}: "
             f"{b.description}" for name, b in available().items()]
    groups = ", ".join(signal_groups())
    return "registered baselines (--signals):\n" + "\n".join(lines) + f"\nsignal groups: {groups}"


def _cell(score: Any, key: str) -> str:
    from much_metric.report import format_metric

    return format_metric(score, key)


@fits_width  # prose lines (header, notes) wrapped at 120 columns like the tables
def run(args: argparse.Namespace) -> int:
    """Parse the options into :func:`much_metric.benchmark.run_benchmark`'s, run it and print its result.

    Expected failures propagate to :func:`much_metric.cli.main` (one line ``much run: error: ...``, exit 2)."""
    from much_metric.baselines import NliBatching
    from much_metric.benchmark import (
        DataOptions,
        EvaluationOptions,
        NliOptions,
        OutputOptions,
        run_benchmark,
    )
    from much_metric.scoring import AGGREGATORS, Aggregation, Bootstrap, check_resamples

    if args.aggregator not in AGGREGATORS:
        raise ValueError(f"--aggregator must be one of {AGGREGATORS}, got {args.aggregator!r}")
    check_resamples(args.bootstrap, "--bootstrap")  # 1-39 resamples give no honest 95 % interval
    if args.report and not Path(args.report).resolve().parent.is_dir():
        raise ValueError(f"--report: the folder of {args.report} does not exist")
    _check_learned_rows(args)
    resources = _resource_options(args)  # a bad value (an unknown --encoder) fails here, before anything loads
    evaluation = EvaluationOptions(
        aggregation=Aggregation(aggregator=args.aggregator, stopword_handling=args.stopword_handling),
        random_state=args.random_state, include_training_rows=args.include_training_rows, paired=args.paired,
        progress=not args.no_progress,
        bootstrap=Bootstrap(n_resamples=args.bootstrap, random_state=args.random_state) if args.bootstrap else None)
    data = DataOptions(config=args.config, split=args.split, selection=args.selection,
                       generation_time=args.generation_time, top_k=args.top_k)
    if args.top_k_grid is not None:
        return _degradation(args, evaluation, data)
    check_baseline(args.baseline, _signal_names(args.signals))
    result = run_benchmark(
        args.source, signals=_signal_names(args.signals), evaluation=evaluation, data=data,
        nli=NliOptions(model=args.nli_model or None, enabled=not args.no_nli, device=args.device,
                       batching=NliBatching(**{key: value for key, value in (
                           ("batch_size", args.nli_batch_size), ("max_batch_tokens", args.nli_max_batch_tokens))
                           if value is not None}),
                       reference_window=args.reference_window),
        resources=resources,
        output=OutputOptions(out=args.out, file_format=args.file_format, progress=not args.no_progress))
    deltas = table_deltas(result.table, args.baseline, evaluation.bootstrap)
    _print(result, deltas)
    if args.json:
        from much_metric.fileio import atomic_write_bytes

        atomic_write_bytes(Path(args.json), json.dumps(result.to_dict(), indent=2).encode("utf-8"))
    if args.report and result.table is not None:  # rows whose labels are withheld have no metric to report
        _report(args, result.table, {row.signal_name: row.cost for row in result.rows if row.cost is not None})
    return 0


def _resource_options(args: argparse.Namespace) -> Any:
    """The resources given by their flags (one per entry of the resource table)."""
    from much_metric.baselines.resource_table import RESOURCE_TABLE, ResourceOptions

    return ResourceOptions(**{entry.name: getattr(args, entry.name) or None for entry in RESOURCE_TABLE
                              if entry.flag is not None})


def _print_unlabelled(result: Any) -> None:
    from much_metric.baselines.runtime import format_runtime

    generation = result.generation.seconds
    print(f"{data_title(result.data, 'Signals')} (config={result.config}, split={result.splits_used}): "
          f"{result.n_samples:,} samples, {result.n_tokens:,} tokens; labels withheld, so no metric")
    print(f"LLM generation time: {generation:,.1f}s ({result.generation.source})")
    for note in result.notes:
        print(f"note: {note.message}")
    print()
    print(text_table([[r.method, format_runtime(r.uq_seconds, generation), format_runtime(r.total_seconds, generation)]
                      for r in result.rows], ["Method", "UQ", "Total"]))
    # Withheld rows are a hidden split's: a board takes them in one archive with the public split's values.
    print(f"\nsignals written to {result.out}/<signal_name>.{result.file_format} (the withheld split's values only): "
          f"compute the same signals on the board's public data (much run --source <public data> --out PUBLIC), then "
          f"write the archive to submit with `much-leaderboard archive PUBLIC {result.out} --out submission.zip` "
          "(docs/leaderboard.md#hidden-split)")


def _relabelled(result: Any, label: Any) -> Any:
    """``result`` with every row's and floor's ``method`` replaced by ``label(row)``."""
    from dataclasses import replace

    return replace(result, rows=tuple(replace(r, method=label(r)) for r in result.rows),
                   floors=tuple(replace(r, method=label(r)) for r in result.floors))


def _degradation(args: argparse.Namespace, evaluation: Any, data: Any) -> int:
    """``--top-k-grid``: the degradation table (printed, ``--json``, ``--report``)."""
    from much_metric.benchmark import degradation_table
    from much_metric.cli._views import format_degradation, parse_grid

    if args.top_k is not None:
        raise ValueError("--top-k and --top-k-grid: give one (the grid holds the views)")
    result = degradation_table(args.source, signals=_signal_names(args.signals), top_ks=parse_grid(args.top_k_grid),
                               evaluation=evaluation, data=data)
    print(f"{data_title(result.data or args.source, 'Input views')}: {result.n_samples:,} samples")
    for flag in _resource_options(args).given():  # the grid reads the stored probabilities only: said, not ignored
        print(f"note: --{flag.replace('_', '-')} is not used by --top-k-grid (it reads the stored candidates only)")
    print(format_degradation(result))
    if args.json:
        from much_metric.fileio import atomic_write_bytes

        atomic_write_bytes(Path(args.json), json.dumps(result.to_dict(), indent=2).encode("utf-8"))
    if args.report:
        from much_metric.report import write_degradation_report

        write_degradation_report(args.report, result.to_dict(), title=data_title(args.source, "Input views"),
                                 source=str(args.source))
        print(f"report written to {args.report}")
    return 0


def _report(args: argparse.Namespace, table: Any, costs: dict[str, Any]) -> None:
    """The HTML report of a run: its table, and ROC-AUC against the measured cost per claim."""
    from dataclasses import replace

    from much_metric.baselines import display_name
    from much_metric.report import write_report

    write_report(args.report, replace(table, costs=costs), title=data_title(args.source, "Baselines"),
                 source=str(args.source), display=display_name)
    print(f"report written to {args.report}")


def _check_learned_rows(args: argparse.Namespace) -> None:
    """A ``learned:DIR`` detector trained on ``--source`` itself: its training_rows.json must name rows of that
    data (every config and split it was trained from), else its real training rows would be scored as held out."""
    folders = [name[len("learned:"):] for name in _signal_names(args.signals) or [] if name.startswith("learned:")]
    if not folders:
        return
    import datasets

    import much_dataset
    from much_metric.learned import load_detector

    for folder in folders:
        detector = load_detector(folder)
        protocol = detector.config.get("protocol") or {}
        if protocol.get("data") != args.source:
            continue  # trained on other data: its rows cannot be rows of this one, nothing is left out
        loaded = much_dataset.load(args.source, config=protocol.get("config") or "all")
        splits = loaded.values() if isinstance(loaded, datasets.DatasetDict) else [loaded]
        detector.check_rows_of({g for split in splits for g in split["generation_id"]}, source=args.source)


def _print(result: Any, deltas: Any = None) -> None:
    """Table 3 and the operating points of a :class:`much_metric.benchmark.BenchmarkResult`, with its notes."""
    from much_metric.baselines.runner import NLI_SIGNALS
    from much_metric.baselines.runtime import format_runtime
    from much_metric.scoring import METRIC_TABLE

    generation = result.generation.seconds
    if result.table is None:  # rows whose labels are withheld: the signals and their times, no metric
        _print_unlabelled(result)
        return
    first = result.rows[0].score if result.rows else None
    n_claims, n_hallucinated = (first.n_claims, first.n_hallucinated) if first is not None else (0, 0)
    pairing = result.table.pairing
    scored = f"scored (paired): {pairing.n_samples:,} samples, " if pairing is not None and pairing.n_left_out else ""
    print(f"{data_title(result.data, 'Baselines')} (config={result.config}, split={result.splits_used}, "
          f"selection={result.selection}): {result.n_samples:,} samples, {result.n_tokens:,} tokens; {scored}"
          f"{n_claims:,} claims ({n_hallucinated:,} hallucinated); "
          f"aggregator={result.aggregator}, stopword_handling={result.stopword_handling}")
    if result.top_k is not None:
        print(f"Input view: top-{result.top_k} -- the {result.top_k} most probable candidates and the sampled token's "
              "own probability per token (an API's top_logprobs; docs/methods.md#input-views)")
    print(f"LLM generation time: {generation:,.1f}s ({result.generation.source})")
    print(f"Segmentation: {format_runtime(result.segmentation_seconds, generation)}, {result.segmentation_note}; "
          f"data loading {result.load_seconds:.1f}s (not counted)")
    for note in result.notes:
        print(f"note: {note.message}")
    label_of = {r.signal_name: r.method for r in result.rows}
    line = pairing.describe(lambda name: label_of.get(name, name)) if pairing is not None else None
    if line:
        print(line)
    print()
    if pairing is not None and not pairing.paired:  # each row names its own samples: they differ
        rows_of = {r.signal_name: len(r.samples) for r in result.table.results}
        floors_n = pairing.n_with_truth
        result = _relabelled(result, lambda row: f"{row.method} [{rows_of.get(row.signal_name, floors_n)} samples]")
    if result.default_signals and result.top_k is not None:  # every method whose needs the view meets
        print(f"Every method that can run on the top-{result.top_k} view (the others: the notes above):")
    elif result.default_signals:  # the default signals are table 3's; say what is missing from it
        nli_skipped = next((note.reason for note in result.notes if set(note.skipped) & set(NLI_SIGNALS)), None)
        title = "Table 3's methods (Mu-SHROOM sample, proxy model: not the paper's numbers)" \
            if result.data == "sample" else "Table 3"
        print(title + (f" (CCP/SAR skipped: {nli_skipped})" if nli_skipped else "") + ":")
    from much_metric.cli._views import cost_cell

    print_table3(result, deltas)
    print()
    interval = f"{result.n_resamples} bootstrap resamples of the samples, 95% intervals" if result.n_resamples \
        else "no bootstrap"
    print(f"Operating points ({interval}):")
    others = [metric for metric in METRIC_TABLE if metric.key not in TABLE3_METRICS]
    # the last column: what computing each signal cost per claim (UQ wall time; its file records the rest)
    print(text_table([[r.method, *(_cell(r.score, metric.key) for metric in others), cost_cell(r.cost)]
                      for r in result.rows]
                     + [[r.method, *(_cell(r.score, metric.key) for metric in others), ""] for r in result.floors],
                     ["Method", *(metric.label for metric in others), "UQ cost/claim"]))
    if result.floors:
        print(footnote(FLOOR_NOTE))
    if result.out is not None:
        print(f"\nsignals written to {result.out}/<signal_name>.{result.file_format} (rerun reuses them; "
              f"`{_evaluate_command(result)}` scores them again)")


def _evaluate_command(result: Any) -> str:
    """The ``much evaluate`` command that scores ``result.out`` on the data it was computed on (evaluate has no
    default --source: the hint must name it to run as printed)."""
    import shlex

    words = ["much", "evaluate", "--source", str(result.data or "<data>"), "--scores", str(result.out)]
    for flag, value, default in (("--config", result.config, "all"), ("--split", result.split, None),
                                 ("--selection", result.selection, "all")):
        if value is not None and value != default:
            words += [flag, str(value)]
    return shlex.join(words)
