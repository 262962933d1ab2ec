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

Generation time (the denominator of the relative runtimes): ``--generation-time SECONDS`` or a JSON file from
``scripts/estimate_generation_time.py``; default for orailix/MUCH = the paper's 2,758 s pro rata, for other data
= output tokens / 11 tokens/s (SmolLM2-135M on 2 CPU cores), an estimate -- see
:mod:`much_metric.baselines.runtime`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from much_metric.cli._flags import add_renamed_alias
from much_metric.cli._text import FLOOR_NOTE, data_title, fits_width, footnote, text_table

#: Table 3's metric columns; every other metric of the metric table goes to the operating-points table.
_TABLE3_METRICS = ("roc_auc", "pr_auc")


def _positive_int(text: str) -> int:
    """argparse type: checked before the NLI model loads (a bad batch size must not read as "model not cached")."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
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
    parser.add_argument("--tokenizer", default=None,
                        help="the generating LLM's tokenizer for every sample: hub id, folder, .gguf file or "
                             "'smollm2' (default: smollm2 for the sample, the MUCH models for orailix/MUCH)")
    parser.add_argument("--neighbours", action="append", default=None,
                        help="KTC's token-neighbour statistics (`much neighbours`): a .npz, a folder (one .npz per "
                             "tokenizer for orailix/MUCH), a hub dataset id, or MODEL=PATH|HUB_ID (repeatable); "
                             "default: the SmolLM2 statistics shipped with the sample")
    parser.add_argument("--internals", default=None,
                        help="an internals pack (`python -m builder internals`) for the signals that need one: rauq, "
                             "attention_previous")
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
                        help="LLM generation time in seconds, or a JSON file from scripts/estimate_generation_time.py")
    parser.add_argument("--json", default=None, help="write the table (metrics and times) as JSON here")
    parser.add_argument("--include-training-rows", action="store_true",
                        help="score a learned signal on the rows it was trained or validated on too (default: left "
                             "out, with a note; this prints a warning)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    parser.set_defaults(func=run)


def _signal_names(values: list[str] | None) -> list[str] | None:
    """``--signals`` values (comma-separated names and groups) -> concrete names, checked before any loading."""
    from much_metric.benchmark import check_signals

    return None if values is None else check_signals(values, option="--signals")

def _signals_help() -> str:
    """The registered baselines for ``much run --help`` (built-ins and entry-point plugins)."""
    from much_metric.baselines.registry import available, signal_groups

    lines = [f"  {name:<28} {b.label({k: '<' + k + '>' for k in b.fields}):<24} {b.description}"
             for name, b in available().items()]
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
        ResourceOptions,
        run_benchmark,
    )
    from much_metric.scoring import AGGREGATORS, Aggregation, Bootstrap, check_resamples

    if args.aggregator not in AGGREGATORS:
        raise ValueError(f"--aggregator must be one of {AGGREGATORS}, got {args.aggregator!r}")
    check_resamples(args.bootstrap, "--bootstrap")  # 1-39 resamples give no honest 95 % interval
    result = run_benchmark(
        args.source, signals=_signal_names(args.signals),
        evaluation=EvaluationOptions(
            aggregation=Aggregation(aggregator=args.aggregator, stopword_handling=args.stopword_handling),
            random_state=args.random_state,
            include_training_rows=args.include_training_rows,
            bootstrap=Bootstrap(n_resamples=args.bootstrap, random_state=args.random_state) if args.bootstrap
            else None),
        data=DataOptions(config=args.config, split=args.split, selection=args.selection,
                         generation_time=args.generation_time),
        nli=NliOptions(model=args.nli_model or None, enabled=not args.no_nli, device=args.device,
                       batching=NliBatching(**{key: value for key, value in (
                           ("batch_size", args.nli_batch_size), ("max_batch_tokens", args.nli_max_batch_tokens))
                           if value is not None}),
                       reference_window=args.reference_window),
        resources=ResourceOptions(tokenizer=args.tokenizer or None, neighbours=args.neighbours,
                                  internals=args.internals),
        output=OutputOptions(out=args.out, file_format=args.file_format, progress=not args.no_progress))
    _print(result)
    if args.json:
        from much_metric.fileio import atomic_write_bytes

        atomic_write_bytes(Path(args.json), json.dumps(result.to_dict(), indent=2).encode("utf-8"))
    return 0


def _print(result: Any) -> None:
    """Table 3 and the operating points of a :class:`much_metric.benchmark.BenchmarkResult`, with its notes."""
    from much_metric.baselines.runner import NLI_SIGNALS
    from much_metric.baselines.runtime import format_runtime
    from much_metric.scoring import METRIC_TABLE

    generation = result.generation.seconds
    first = result.rows[0].score if result.rows else None
    n_claims, n_hallucinated = (first.n_claims, first.n_hallucinated) if first is not None else (0, 0)
    print(f"{data_title(result.data, 'Baselines')} (config={result.config}, split={result.splits_used}, "
          f"selection={result.selection}): {result.n_samples:,} samples, {result.n_tokens:,} tokens, "
          f"{n_claims:,} claims ({n_hallucinated:,} hallucinated); "
          f"aggregator={result.aggregator}, stopwords={result.stopword_handling}")
    print(f"LLM generation time: {generation:,.1f}s ({result.generation.source})")
    print(f"Segmentation: {format_runtime(result.segmentation_seconds, generation)}, {result.segmentation_note}; "
          f"data loading {result.load_seconds:.1f}s (not counted)")
    for note in result.notes:
        print(f"note: {note.message}")
    print()
    if result.default_signals:  # the default signals are table 3's; say what is missing from it
        nli_skipped = next((note.reason for note in result.notes if set(note.skipped) & set(NLI_SIGNALS)), None)
        title = "Table 3's methods (Mu-SHROOM sample, proxy model: not the paper's numbers)" \
            if result.data == "sample" else "Table 3"
        print(title + (f" (CCP/SAR skipped: {nli_skipped})" if nli_skipped else "") + ":")
    labels = {metric.key: metric.label for metric in METRIC_TABLE}
    print(text_table(
        [[r.method, format_runtime(r.segmentation_seconds, generation), format_runtime(r.uq_seconds, generation),
          format_runtime(r.total_seconds, generation), *(_cell(r.score, key) for key in _TABLE3_METRICS)]
         for r in result.rows]
        + [[r.method, "", "", "", *(_cell(r.score, key) for key in _TABLE3_METRICS)] for r in result.floors],
        ["Method", "Segmentation", "UQ", "Total", *(labels[key] for key in _TABLE3_METRICS)],
    ))
    print()
    interval = f"{result.n_resamples} bootstrap resamples of the samples, 95% intervals" if result.n_resamples \
        else "no bootstrap"
    print(f"Operating points ({interval}):")
    others = [metric for metric in METRIC_TABLE if metric.key not in _TABLE3_METRICS]
    print(text_table([[r.method, *(_cell(r.score, metric.key) for metric in others)]
                      for r in [*result.rows, *result.floors]], ["Method", *(metric.label for metric in others)]))
    if result.floors:
        print(footnote(FLOOR_NOTE))
    if result.out is not None:
        print(f"\nsignals written to {result.out}/<signal_name>.{result.file_format} (rerun reuses them; "
              f"`much evaluate --scores {result.out}` scores them again)")
