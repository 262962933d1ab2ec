"""Run the paper's benchmark (what ``much run`` does) as one library call: :func:`run_benchmark`.

Computes the baselines on a MUCH split (:func:`much_metric.baselines.compute_signals`), times them and the claim
segmentation against the LLM generation time (:mod:`much_metric.baselines.runtime`), evaluates them with the
floors (:func:`much_metric.signals.evaluate_signals`) and returns a :class:`BenchmarkResult`: the signals, their
timings, the evaluation table and the notes, each a field -- nothing to parse back out of a printed message.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from much_metric.baselines import resources
from much_metric.baselines._benchmark_result import BenchmarkNote, BenchmarkResult, BenchmarkRow
from much_metric.scoring import Bootstrap

__all__ = ["BenchmarkNote", "BenchmarkResult", "BenchmarkRow", "check_signals", "run_benchmark"]

_FORMATS = ("parquet", "jsonl")
_STOPWORDS = ("null", "exclude")


def check_signals(signals: Sequence[str] | str | None, *, option: str = "signals") -> list[str] | None:
    """Concrete signal names for ``signals`` (names, comma-separated names or groups such as ``table3``), each
    resolved in the registry; None stays None (the defaults).

    Raises ``ValueError`` for an unknown name and ``ModuleNotFoundError`` (naming ``option``) for a signal whose
    method needs an NLI model when torch is not installed -- before anything is loaded."""
    import importlib.util

    from much_metric.baselines.registry import expand_signals, resolve

    if signals is None:
        return None
    wanted = expand_signals([signals] if isinstance(signals, str) else list(signals))
    if importlib.util.find_spec("torch") is None:
        needing = [name for name in wanted if "nli" in resolve(name).needs]
        if needing:
            raise ModuleNotFoundError(f"{option} {', '.join(needing)}: needs an NLI model, which needs torch (the "
                                      "`models` extra is not installed)", name="torch")
    return wanted


def _positive(value: Any, name: str) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError(f"{name} must be a positive integer or None, got {value!r}")


def _check_options(aggregator: str, stopword_handling: str, bootstrap: Any, file_format: str, selection: str,
                   nli_batch_size: Any, nli_max_batch_tokens: Any) -> None:
    from much_metric.scoring import AGGREGATORS
    from much_metric.signals import check_resamples

    if aggregator not in AGGREGATORS:
        raise ValueError(f"aggregator must be one of {AGGREGATORS}, got {aggregator!r}")
    if stopword_handling not in _STOPWORDS:
        raise ValueError(f"stopword_handling must be one of {_STOPWORDS}, got {stopword_handling!r}")
    if bootstrap is not None:
        if not isinstance(bootstrap, Bootstrap):
            raise TypeError(f"bootstrap must be a much_metric.Bootstrap or None, got {type(bootstrap).__name__}")
        check_resamples(bootstrap.n_resamples, "bootstrap.n_resamples")  # 1-39 give no honest 95 % interval
    if file_format not in _FORMATS:
        raise ValueError(f"file_format must be one of {_FORMATS}, got {file_format!r}")
    if selection not in ("all", "manual", "auto"):
        raise ValueError(f"selection must be 'all', 'manual' or 'auto', got {selection!r}")
    _positive(nli_batch_size, "nli_batch_size")
    _positive(nli_max_batch_tokens, "nli_max_batch_tokens")


def _load(source: str, config: str, split: str | None, selection: str, tokenizers: dict[str, Any]) -> tuple[Any, str]:
    """The split(s) of ``source`` as one Dataset, and the name of the split(s) loaded."""
    import datasets

    import much_dataset

    loaded = much_dataset.load(source, config=config, split=split, tokenizers=tokenizers or None)
    used = split or ("+".join(loaded) if isinstance(loaded, datasets.DatasetDict) else "all")
    if isinstance(loaded, datasets.DatasetDict):
        loaded = datasets.concatenate_datasets([loaded[name] for name in loaded])
    return _select(loaded, selection, f"{source} (config={config}, split={split}, selection={selection})"), used


def _select(dataset: Any, selection: str, what: str) -> Any:
    if selection != "all":
        from much_dataset.selection import select_samples

        dataset = select_samples(dataset, manual=selection == "manual")
    if len(dataset) == 0:
        raise ValueError(f"no sample selected from {what}")
    return dataset


def _source_of(dataset: Any) -> str | None:
    """``"orailix/MUCH"`` for rows of MUCH's generation configs, ``"sample"`` for the embedded sample's, else None."""
    from much_dataset.schema import GENERATION_CONFIG, HUB_REPO_ID, MUCH_GENERATION_CONFIGS
    from much_metric.baselines.methods.ktc import default_neighbours

    configs = set(dataset[GENERATION_CONFIG]) if GENERATION_CONFIG in dataset.column_names else set()
    if configs and configs <= set(MUCH_GENERATION_CONFIGS):
        return HUB_REPO_ID
    return "sample" if default_neighbours(dataset) is not None else None


def _outside_unit_interval(values: Mapping[str, Any]) -> bool:
    """Whether any finite token score of a signal lies outside [0, 1]."""
    import numpy as np

    for array in values.values():
        array = np.asarray(array, dtype=np.float64)
        finite = array[np.isfinite(array)]
        if finite.size and (finite.min() < 0 or finite.max() > 1):
            return True
    return False


def _table_order(runs: Mapping[str, Any]) -> list[str]:
    """The registry's order of baselines (table 3's families first), then the order asked."""
    from much_metric.baselines.registry import available

    rank = {name: i for i, name in enumerate(available())}
    return sorted(runs, key=lambda name: rank.get(runs[name].spec.baseline.name, len(rank)))


def run_benchmark(
    dataset: Any,
    *,
    signals: Sequence[str] | str | None = None,
    aggregator: str = "product",
    stopword_handling: Literal["null", "exclude"] = "null",
    bootstrap: Bootstrap | None = Bootstrap(),
    floor_seed: int | None = None,
    config: str = "all",
    split: str | None = None,
    selection: Literal["all", "manual", "auto"] = "all",
    data_source: str | None = None,
    tokenizer: Any = None,
    nli: Any = None,
    use_nli: bool = True,
    nli_batch_size: int | None = None,
    nli_max_batch_tokens: int | None = None,
    device: str | None = None,
    reference_window: bool = False,
    neighbours: Sequence[str] | str | None = None,
    generation_time: Any = None,
    out: str | Path | None = None,
    file_format: Literal["parquet", "jsonl"] = "parquet",
    progress: bool = False,
    internals: Any = None,
) -> BenchmarkResult:
    """Compute, time and evaluate the paper's baselines on a MUCH split: table 3 as data (what ``much run`` does).

    Parameters
    ----------
    dataset : str or datasets.Dataset
        A data source for :func:`much_dataset.load` (``"sample"``, ``"orailix/MUCH"``, a folder), loaded with
        ``config`` / ``split`` / ``selection``; or a loaded split (``selection`` still applies).
    signals : sequence of str, str or None, default None
        Reference signal names or groups (``"table3"``, ``"ccp_10_8,sar_8"``). None: table 3's probability
        baselines, plus CCP/SAR when an NLI model is available and KTC when neighbour statistics are at hand
        (otherwise they are skipped with a note). A signal asked by name whose resource is missing is an error.
    aggregator : {"product", "mean", "max", "geometric"}, default "product"
        Token scores -> claim scores. Under product and geometric, signals with scores outside [0, 1] (NLL) are
        left out of the table with a note.
    stopword_handling : {"null", "exclude"}, default "null"
        As in :func:`much_metric.score`.
    bootstrap : Bootstrap or None, default Bootstrap()
        Resampling of the samples for 95 % intervals (at least 40 resamples); None: no intervals.
    floor_seed : int or None, default None
        Seed of the random floor (default: the bootstrap's ``random_state``, 0 without bootstrap).
    config, split : str, default "all", None
        Dataset config and split when ``dataset`` is a source (None: every split, concatenated).
    selection : {"all", "manual", "auto"}, default "all"
        Samples both annotators labelled identically, samples without human labels, or every sample.
    data_source : str or None, default None
        Where a loaded ``dataset`` comes from, for the defaults below; None: ``"orailix/MUCH"`` when every
        ``generation_config`` is one of MUCH's, ``"sample"`` for the embedded sample's. Ignored for a str ``dataset``.
    tokenizer : str, tokenizer, mapping or None, default None
        The generating LLM's tokenizer (CCP/SAR and the segmentation time): a name, a loaded tokenizer or
        ``{generation_config: tokenizer}``; None: SmolLM2's for the sample, the MUCH models' for orailix/MUCH.
    nli : str, NliScorer or None, default None
        NLI model for CCP/SAR: hub id, folder, ``"en=MODEL,*=MODEL"`` / JSON file (one per language) or a loaded
        scorer; None: ``microsoft/deberta-large-mnli`` if already cached (never downloaded unasked).
    use_nli : bool, default True
        False skips CCP/SAR (``much run --no-nli``).
    nli_batch_size, nli_max_batch_tokens : int or None
        NLI batching (None: the scorer's defaults).
    device : str or None
        Torch device of the NLI model (None: cuda if available).
    reference_window : bool, default False
        CCP/SAR context suffix of ``sigma - 1`` tokens, as the reference code.
    neighbours : str, sequence of str or None
        KTC's token-neighbour statistics (``much run --neighbours`` forms); None: those shipped with the sample.
    generation_time : float, str or None
        LLM generation time: seconds or a JSON file (:func:`much_metric.baselines.runtime.generation_time`).
    out : str, path or None
        Folder for the signal files and ``timings.json``; a rerun reuses them (nothing recomputed).
    file_format : {"parquet", "jsonl"}, default "parquet"
        Format of the signal files under ``out``.
    progress : bool, default False
        tqdm progress bars.
    internals : str, path or InternalsPack, optional
        An internals pack for the signals that need one (RAUQ; ``much run --internals PACK``).

    Returns
    -------
    BenchmarkResult
        Signals, timings, evaluation table, rows and floors, notes; ``to_dict()`` is ``much run --json``.

    Raises
    ------
    ValueError, TypeError
        A bad option (named), checked before anything is loaded; a signal asked by name whose resource is missing.

    Examples
    --------
    >>> import much_dataset
    >>> from much_metric.baselines import run_benchmark
    >>> split = much_dataset.load("sample", split="test").select(range(40))
    >>> result = run_benchmark(split, signals=["max_likelihood", "token_entropy_24"], bootstrap=None)
    >>> [row.method for row in result.rows]
    ['Max Likelihood', 'Token Entropy-24']
    >>> [row.method for row in result.floors]
    ['[floor: random]', '[floor: constant]']
    >>> 0 <= result.rows[0].metrics["roc_auc"] <= 1
    True
    """
    from much_dataset.schema import GENERATION_ID, OUTPUT_TOKENS
    from much_metric.baselines.registry import available, resolve
    from much_metric.baselines.runner import NLI_SIGNALS, PROBABILITY_SIGNALS, compute_signals
    from much_metric.baselines.runtime import generation_time as generation_time_of
    from much_metric.signals import evaluate_signals

    _check_options(aggregator, stopword_handling, bootstrap, file_format, selection, nli_batch_size,
                   nli_max_batch_tokens)
    if not isinstance(dataset, str) and (config != "all" or split is not None):
        raise ValueError("config and split apply to a data source (a str dataset); select the split yourself for a "
                         "loaded dataset")
    wanted = check_signals(signals)
    neighbour_sources = [neighbours] if isinstance(neighbours, str | Path) else neighbours
    source = dataset if isinstance(dataset, str) else data_source
    generation_time_of(generation_time, data_source="", n_samples=1, n_tokens=1)  # a bad value fails now
    notes: list[BenchmarkNote] = []
    messages: list[str] = []

    def inform() -> None:  # the resources' notes (strings) become informative notes, in order
        notes.extend(BenchmarkNote(message=message) for message in messages)
        messages.clear()

    if isinstance(dataset, str):
        from much_dataset.schema import HUB_REPO_ID

        single, per_config = resources.llm_tokenizers(tokenizer, source, messages)
        start = time.perf_counter()
        dataset, splits_used = _load(dataset, config, split, selection, per_config if source == HUB_REPO_ID else {})
        load_seconds = time.perf_counter() - start
    else:
        dataset, splits_used, load_seconds = _select(dataset, selection, "the dataset"), "all", 0.0
        source = source if source is not None else _source_of(dataset)
        single, per_config = resources.llm_tokenizers(tokenizer, source, messages)
    inform()
    ids = dataset[GENERATION_ID]
    n_tokens = int(sum(len(t) for t in dataset.select_columns([OUTPUT_TOKENS]).with_format("arrow")[:]
                       .column(OUTPUT_TOKENS).to_pylist()))
    decoder = resources.decoder_for(dataset, single, per_config)

    nli_scorer = None
    explicit = wanted is not None and any("nli" in resolve(name).needs for name in wanted)
    if use_nli and (wanted is None or explicit):
        nli_scorer, why_not = resources.load_nli_for_run(
            nli, explicit=explicit, dataset=dataset, notes=messages, device=device, batch_size=nli_batch_size,
            max_batch_tokens=nli_max_batch_tokens, progress=progress)
        inform()
        if why_not is not None:
            notes.append(BenchmarkNote(message=f"CCP and SAR skipped: {why_not}; pass --nli-model NAME to download "
                                       "or use one", skipped=tuple(NLI_SIGNALS), reason=why_not))
    names = wanted or list(PROBABILITY_SIGNALS) + (list(NLI_SIGNALS) if nli_scorer is not None else [])
    needing = [name for name in names if "tokenizer" in resolve(name).needs]
    if needing and decoder is None:
        if wanted is not None:
            raise ValueError(f"{', '.join(needing)} need the generating LLM's tokenizer for every sample: pass "
                             "tokenizer= (much run --tokenizer)")
        names = [name for name in names if name not in needing]
        reason = "no generating-LLM tokenizer for every sample"
        notes.append(BenchmarkNote(message=f"CCP and SAR skipped: {reason}", skipped=tuple(needing), reason=reason))
    segmentation_seconds, segmentation_note = resources.segmentation_time(dataset, single, per_config, progress)

    stats = None
    if wanted is None:
        # The baselines that need only token-neighbour statistics (KTC) join the defaults where the statistics need
        # no download: shipped for the sample, or given.
        stats = resources.neighbours_for_run(neighbour_sources, dataset, messages)
        inform()
        ktc_like = [name for baseline in available().values() if set(baseline.needs) == {"neighbours"}
                    for name in baseline.defaults]
        if stats is not None:
            names += ktc_like
        else:
            reason = "no token-neighbour statistics for this data"
            notes.append(BenchmarkNote(message=f"KTC skipped: {reason}; pass --neighbours PATH|HUB_ID (see `much "
                                       "neighbours --help`)", skipped=tuple(ktc_like), reason=reason))
    if stats is None and any("neighbours" in resolve(name).needs for name in names):
        stats = resources.neighbours_for_run(neighbour_sources, dataset, messages)
        inform()
        if stats is None:
            raise ValueError("KTC needs token-neighbour statistics of the generating LLM's tokenizer: pass "
                             "neighbours= (much run --neighbours PATH|HUB_ID, see `much neighbours --help`)")
    runs = compute_signals(dataset, names, tokenizer=decoder, nli=nli_scorer, neighbours=stats, internals=internals,
                           out=out, file_format=file_format, reference_window=reference_window, progress=progress)
    generation = generation_time_of(generation_time, data_source=str(source), n_samples=len(ids), n_tokens=n_tokens)
    order = _table_order(runs)
    if aggregator in ("product", "geometric"):
        # The product multiplies 1 - s: a signal with scores outside [0, 1] (NLL = -log p) gives meaningless claim
        # scores under it, so its row is left out with a note saying how to see it, not printed as a number.
        for name in [name for name in order if _outside_unit_interval(runs[name].values)]:
            reason = f"its token scores lie outside [0, 1], which the {aggregator} aggregator needs"
            notes.append(BenchmarkNote(message=f"{runs[name].spec.display} left out: {reason}; run it with "
                                       "--aggregator mean (or max)", skipped=(name,), reason=reason))
            order.remove(name)
    table = evaluate_signals(dataset, {name: runs[name].values for name in order}, aggregators=(aggregator,),
                             stopword_handling=stopword_handling, min_coverage=1.0, floor_seed=floor_seed,
                             bootstrap=bootstrap)
    segmentation = 0.0 if math.isnan(segmentation_seconds) else segmentation_seconds
    rows = tuple(BenchmarkRow(signal_name=r.signal_name, method=runs[r.signal_name].spec.display, metrics=r.metrics,
                              uq_seconds=runs[r.signal_name].seconds, segmentation_seconds=segmentation_seconds,
                              total_seconds=runs[r.signal_name].seconds + segmentation,
                              samples_computed=runs[r.signal_name].n_computed) for r in table.results)
    # Reference rows on the same claims: PR numbers read against what a random or constant score gets.
    floors = tuple(BenchmarkRow(signal_name=r.signal_name, method=f"[{r.signal_name}]", metrics=r.metrics)
                   for r in table.floors)
    return BenchmarkResult(
        data=source, config=config, split=split, selection=selection, splits_used=splits_used, n_samples=len(ids),
        n_tokens=n_tokens, aggregator=aggregator, stopword_handling=stopword_handling,
        n_resamples=0 if bootstrap is None else bootstrap.n_resamples, default_signals=wanted is None,
        signals={name: runs[name] for name in _table_order(runs)}, out=None if out is None else Path(out),
        file_format=file_format, generation=generation, segmentation_seconds=segmentation_seconds,
        segmentation_note=segmentation_note, load_seconds=load_seconds, table=table, rows=rows, floors=floors,
        notes=tuple(notes))
