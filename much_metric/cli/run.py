"""``much run``: compute the paper's baselines on a MUCH split, evaluate them, print table 3.

Examples::

    much run --data sample                       # offline: probability baselines on the embedded sample
    much run --data orailix/MUCH --split test --nli-model microsoft/deberta-large-mnli --out signals/

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
import math
import sys
from pathlib import Path
from typing import Any

from much_metric.cli._run_resources import (
    RunNotes,
    decoder_for,
    llm_tokenizers,
    nli_for_run,
    segmentation_time,
)
from much_metric.cli._text import FLOOR_NOTE, data_title, jsonable, text_table

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
    parser.add_argument("--data", default="sample", help="'sample' (default, offline), orailix/MUCH, or a folder")
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
    parser.add_argument("--aggregator", default="product", help="product (default), mean, max or geometric")
    parser.add_argument("--stopwords", choices=("null", "exclude"), default="null",
                        help="null (reference, default): stopword tokens score 0; exclude: removed from claims")
    parser.add_argument("--bootstrap", type=int, default=1000,
                        help="bootstrap resamples for intervals: 0 = none, else at least 40")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    parser.add_argument("--out", default=None,
                        help="folder for the signal files (<name>.parquet) and timings.json; a rerun reuses them")
    parser.add_argument("--format", choices=("parquet", "jsonl"), default="parquet",
                        help="signal file format under --out (default parquet, as orailix/MUCH-signals)")
    parser.add_argument("--generation-time", default=None,
                        help="LLM generation time in seconds, or a JSON file from scripts/estimate_generation_time.py")
    parser.add_argument("--json", default=None, help="write the table (metrics and times) as JSON here")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    parser.set_defaults(func=run)


def _signal_names(values: list[str] | None) -> list[str] | None:
    from much_metric.baselines.registry import expand_signals

    return None if values is None else expand_signals(values)


def _outside_unit_interval(values: dict[str, Any]) -> bool:
    """Whether any finite score of a signal lies outside [0, 1]."""
    import numpy as np

    for array in values.values():
        array = np.asarray(array, dtype=np.float64)
        finite = array[np.isfinite(array)]
        if finite.size and (finite.min() < 0 or finite.max() > 1):
            return True
    return False


def _check_packages(wanted: list[str] | None, resolve: Any) -> None:
    """Signals asked by name whose method needs torch (the NLI-based ones) fail before any loading or network when
    torch is not installed, naming the extra (:func:`much_metric.cli.error_message` adds the pip command)."""
    import importlib.util

    if not wanted or importlib.util.find_spec("torch") is not None:
        return
    needing = [name for name in wanted if "nli" in resolve(name).needs]
    if needing:
        raise ModuleNotFoundError(f"--signals {', '.join(needing)}: needs an NLI model, which needs torch (the "
                                  "`models` extra is not installed)", name="torch")


def _signals_help() -> str:
    """The registered baselines for ``much run --help`` (built-ins and entry-point plugins)."""
    from much_metric.baselines.registry import available, signal_groups

    lines = [f"  {name:<28} {b.label({k: '<' + k + '>' for k in b.fields}):<24} {b.description}"
             for name, b in available().items()]
    groups = ", ".join(signal_groups())
    return "registered baselines (--signals):\n" + "\n".join(lines) + f"\nsignal groups: {groups}"


def _load_dataset(args: argparse.Namespace, tokenizers: dict[str, Any] | None) -> Any:
    import datasets

    import much_dataset

    loaded = much_dataset.load(args.data, config=args.config, split=args.split, tokenizers=tokenizers or None)
    args.splits_used = args.split or "+".join(loaded) if isinstance(loaded, datasets.DatasetDict) else args.split
    if isinstance(loaded, datasets.DatasetDict):
        loaded = datasets.concatenate_datasets([loaded[name] for name in loaded])
    if args.selection != "all":
        from much_dataset.selection import select_samples

        loaded = select_samples(loaded, manual=args.selection == "manual")
    if len(loaded) == 0:
        raise ValueError(f"no sample selected from {args.data} (config={args.config}, split={args.split}, "
                         f"selection={args.selection})")
    return loaded


def _columns(dataset: Any) -> dict[str, Any]:
    from much_dataset.schema import GENERATION_CONFIG, GENERATION_ID, LABELS, OUTPUT_TOKENS, STOPWORD_MASK, TOKEN_CHUNKS

    wanted = [GENERATION_ID, GENERATION_CONFIG, OUTPUT_TOKENS, TOKEN_CHUNKS, LABELS, STOPWORD_MASK]
    table = dataset.select_columns([c for c in wanted if c in dataset.column_names]).with_format("arrow")[:]
    return {name: table.column(name) for name in table.column_names}


def _cell(metrics: dict[str, Any], key: str) -> str:
    from much_metric.signals import format_metric

    return format_metric(metrics, key)


def _order(runs: dict[str, Any]) -> list[str]:
    """Table order: the registry's order of baselines (table 3's families first), then the order asked."""
    from much_metric.baselines.registry import available

    rank = {name: i for i, name in enumerate(available())}
    return sorted(runs, key=lambda name: rank.get(runs[name].spec.baseline.name, len(rank)))


def run(args: argparse.Namespace) -> int:
    try:
        return _run(args)
    except (ValueError, KeyError, OSError) as error:  # OSError: missing files, hub unreachable
        print(f"much run: error: {error}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace) -> int:
    import time

    from much_dataset.schema import GENERATION_ID, HUB_REPO_ID
    from much_metric.baselines.registry import available, resolve
    from much_metric.baselines.runner import NLI_SIGNALS, PROBABILITY_SIGNALS, compute_signals
    from much_metric.baselines.runtime import format_runtime, generation_time
    from much_metric.scoring import AGGREGATORS, METRIC_TABLE, Bootstrap
    from much_metric.signals import check_resamples, evaluate_signals

    if args.aggregator not in AGGREGATORS:
        raise ValueError(f"--aggregator must be one of {AGGREGATORS}, got {args.aggregator!r}")
    check_resamples(args.bootstrap, "--bootstrap")  # 1-39 resamples give no honest 95 % interval
    progress = not args.no_progress
    notes = RunNotes()
    wanted = _signal_names(args.signals)
    _check_packages(wanted, resolve)
    single, per_config = llm_tokenizers(args, notes)
    start = time.perf_counter()
    dataset = _load_dataset(args, per_config if args.data == HUB_REPO_ID else None)
    load_seconds = time.perf_counter() - start
    columns = _columns(dataset)
    ids = columns[GENERATION_ID].to_pylist()
    n_tokens = int(sum(len(t) for t in dataset.select_columns(["output_tokens"]).with_format("arrow")[:]
                       .column("output_tokens").to_pylist()))
    decoder = decoder_for(dataset, single, per_config)
    nli = nli_for_run(args, wanted, notes, dataset)
    names = wanted or list(PROBABILITY_SIGNALS) + (list(NLI_SIGNALS) if nli is not None else [])
    if any("tokenizer" in resolve(n).needs for n in names) and decoder is None:
        if wanted is not None:
            users = ", ".join(n for n in names if "tokenizer" in resolve(n).needs)
            raise ValueError(f"{users} need the generating LLM's tokenizer for every sample: pass --tokenizer")
        names = [n for n in names if "tokenizer" not in resolve(n).needs]
        notes.skip_nli("no generating-LLM tokenizer for every sample")
    if single is not None or per_config:
        segmentation_seconds, segmentation_note = segmentation_time(dataset, single, per_config, progress)
    else:
        segmentation_seconds, segmentation_note = math.nan, "not measured (no generating-LLM tokenizer)"
    from much_metric.cli.neighbours import neighbours_for_run

    neighbours = None
    if wanted is None:
        # The baselines that need only token-neighbour statistics (KTC) join the defaults where the statistics need
        # no download: shipped for the sample, or --neighbours.
        neighbours = neighbours_for_run(args.neighbours, dataset, notes)
        if neighbours is not None:
            names += [name for baseline in available().values() if set(baseline.needs) == {"neighbours"}
                      for name in baseline.defaults]
        else:
            notes.append("KTC skipped: no token-neighbour statistics for this data; pass --neighbours PATH|HUB_ID "
                         "(see `much neighbours --help`)")
    if neighbours is None and any("neighbours" in resolve(n).needs for n in names):
        neighbours = neighbours_for_run(args.neighbours, dataset, notes)
        if neighbours is None:
            raise ValueError("KTC needs token-neighbour statistics of the generating LLM's tokenizer: pass "
                             "--neighbours PATH|HUB_ID (see `much neighbours --help`)")
    runs = compute_signals(dataset, names, tokenizer=decoder, nli=nli, neighbours=neighbours, out=args.out,
                           file_format=args.format, reference_window=args.reference_window, progress=progress)
    generation = generation_time(args.generation_time, data_source=args.data, n_samples=len(ids), n_tokens=n_tokens)
    order = _order(runs)
    if args.aggregator in ("product", "geometric"):
        # The product multiplies 1 - s: a signal with scores outside [0, 1] (NLL = -log p) gives meaningless claim
        # scores under it, so its row is left out with a note saying how to see it, not printed as a number.
        outside = [name for name in order if _outside_unit_interval(runs[name].values)]
        for name in outside:
            notes.append(f"{runs[name].spec.display} left out: its token scores lie outside [0, 1], which the "
                         f"{args.aggregator} aggregator needs; run it with --aggregator mean (or max)")
        order = [name for name in order if name not in outside]
    table = evaluate_signals(dataset, {name: runs[name].values for name in order}, aggregators=(args.aggregator,),
                             stopword_handling=args.stopwords, min_coverage=1.0, floor_seed=args.seed,
                             bootstrap=Bootstrap(n_resamples=args.bootstrap, random_state=args.seed)
                             if args.bootstrap else None)
    results = []
    for result in table.results:
        signal = runs[result.signal_name]
        total = signal.seconds + (0.0 if math.isnan(segmentation_seconds) else segmentation_seconds)
        results.append({"signal_name": result.signal_name, "method": signal.spec.display,
                        "uq_seconds": signal.seconds, "segmentation_seconds": segmentation_seconds,
                        "total_seconds": total, "samples_computed": signal.n_computed, **result.metrics})
    # Reference rows on the same claims: PR numbers read against what a random or constant score gets.
    floors = [{"signal_name": r.signal_name, "method": f"[{r.signal_name}]", **r.metrics} for r in table.floors]

    first = results[0] if results else {}
    split_used = getattr(args, "splits_used", None) or args.split or "all"
    print(f"{data_title(args.data, 'Baselines')} (config={args.config}, split={split_used}, "
          f"selection={args.selection}): {len(ids):,} samples, {n_tokens:,} tokens, {first.get('n_claims', 0):,} "
          f"claims ({first.get('n_hallucinated', 0):,} hallucinated); aggregator={args.aggregator}, "
          f"stopwords={args.stopwords}")
    print(f"LLM generation time: {generation.seconds:,.1f}s ({generation.source})")
    print(f"Segmentation: {format_runtime(segmentation_seconds, generation.seconds)}, {segmentation_note}; "
          f"data loading {load_seconds:.1f}s (not counted)")
    for note in notes:
        print(f"note: {note}")
    print()
    if wanted is None:  # the default signals are table 3's; say what is missing from it
        title = "Table 3's methods (Mu-SHROOM sample, proxy model: not the paper's numbers)" \
            if args.data == "sample" else "Table 3"
        print(title + (f" (CCP/SAR skipped: {notes.nli_skipped})" if notes.nli_skipped else "") + ":")
    labels = {metric.key: metric.label for metric in METRIC_TABLE}
    print(text_table(
        [[r["method"], format_runtime(r["segmentation_seconds"], generation.seconds),
          format_runtime(r["uq_seconds"], generation.seconds), format_runtime(r["total_seconds"], generation.seconds),
          *(_cell(r, key) for key in _TABLE3_METRICS)] for r in results]
        + [[r["method"], "", "", "", *(_cell(r, key) for key in _TABLE3_METRICS)] for r in floors],
        ["Method", "Segmentation", "UQ", "Total", *(labels[key] for key in _TABLE3_METRICS)],
    ))
    print()
    interval = f"{args.bootstrap} bootstrap resamples of the samples, 95% intervals" if args.bootstrap else \
        "no bootstrap"
    print(f"Operating points ({interval}):")
    others = [metric for metric in METRIC_TABLE if metric.key not in _TABLE3_METRICS]
    print(text_table([[r["method"], *(_cell(r, metric.key) for metric in others)] for r in [*results, *floors]],
                     ["Method", *(metric.label for metric in others)]))
    if floors:
        print(FLOOR_NOTE)
    if args.out:
        print(f"\nsignals written to {args.out}/<signal_name>.{args.format} (rerun reuses them; "
              f"`much evaluate --scores {args.out}` scores them again)")
    if args.json:
        from much_metric.fileio import atomic_write_bytes

        payload = {"data": args.data, "config": args.config, "split": args.split, "selection": args.selection,
                   "n_samples": len(ids), "n_tokens": n_tokens, "generation_seconds": generation.seconds,
                   "generation_source": generation.source, "segmentation_seconds": segmentation_seconds,
                   "notes": notes, "results": results, "floors": floors}
        atomic_write_bytes(Path(args.json), json.dumps(jsonable(payload), indent=2).encode("utf-8"))
    return 0
