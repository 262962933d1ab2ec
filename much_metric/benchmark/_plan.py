"""A benchmark run's plan: the data loaded and selected, the signals decided, and every resource they need (the
generating LLM's tokenizers, the NLI model, KTC's token-neighbour statistics, the samples, the reference and the
text encoder) resolved ONCE, with the notes of what
was skipped and why. :func:`much_metric.benchmark.run_benchmark` computes and evaluates a plan; nothing below it
looks a resource up again."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from much_metric.baselines import ResourceOptions
from much_metric.benchmark import resources as lookup
from much_metric.benchmark._options import DataOptions, NliOptions
from much_metric.benchmark._result import BenchmarkNote

__all__ = ["BenchmarkPlan", "check_signals", "plan_benchmark"]


@dataclass(frozen=True, kw_only=True)
class BenchmarkPlan:
    """What a run computes, on what, with what: built by :func:`plan_benchmark`.

    Attributes
    ----------
    dataset : datasets.Dataset
        The selected samples.
    source : str or None
        Where they come from (``"sample"``, ``"orailix/MUCH"``, a folder), None when unknown.
    splits_used : str
        The split(s) loaded (``"test"``, ``"train+test"``; ``"all"`` for data passed in memory).
    load_seconds : float
        Wall time of loading (0 for data passed in memory).
    n_tokens : int
        Output tokens of the samples (EOS included).
    signals : tuple of str
        The signal names to compute, in the order asked (defaults: table 3's, plus what the resources allow).
    default_signals : bool
        True when no signal was asked by name.
    tokenizer, tokenizers
        The generating LLM's tokenizer (one for every sample, or None) and one per generation config (the
        segmentation time).
    resources : ResourceOptions
        What :func:`much_metric.baselines.compute_signals` reads, resolved: ``tokenizer`` the per-sample decoder
        CCP/SAR use (None when some sample has no tokenizer), ``nli`` the loaded NLI model, ``neighbours`` KTC's
        statistics (None: not needed or not available), ``internals`` the pack as given (opened once by
        ``compute_signals`` when a signal needs it).
    notes : tuple of BenchmarkNote
        What was used and what was skipped, and why, in the order it arose.
    top_k : int or None
        The input view (``DataOptions.top_k``): every signal of ``signals`` reads at most this many candidates.
    """

    dataset: Any
    source: str | None
    splits_used: str
    load_seconds: float
    n_tokens: int
    signals: tuple[str, ...]
    default_signals: bool
    tokenizer: Any
    tokenizers: dict[str, Any]
    resources: ResourceOptions
    notes: tuple[BenchmarkNote, ...]
    top_k: int | None = None


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
        needing = [name for name in wanted if {"nli", "encoder"} & set(resolve(name).needs)]
        if needing:
            raise ModuleNotFoundError(f"{option} {', '.join(needing)}: needs an NLI model or a text encoder, which "
                                      "need torch (the `models` extra is not installed)", name="torch")
    return wanted


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
        from much_dataset.schema import HUMAN_LABELS_0, HUMAN_LABELS_1, missing_label_columns
        from much_dataset.selection import select_samples
        from much_dataset.validation import LabelsWithheldError

        absent = missing_label_columns(getattr(dataset, "column_names", ()))
        if HUMAN_LABELS_0 in absent or HUMAN_LABELS_1 in absent:
            raise LabelsWithheldError(f"selection={selection!r} (it reads the human labels)", absent)

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


def _with_neighbours(names: list[str], defaults: bool, sources: Any, dataset: Any,
                     notes: list[BenchmarkNote]) -> tuple[list[str], Any]:
    """The signal names with KTC's added (defaults) when its token-neighbour statistics are at hand, and the
    statistics (None when no signal needs them); a note for each resource message and for KTC skipped."""
    from much_metric.baselines.registry import available, resolve

    messages: list[str] = []

    def inform() -> None:
        notes.extend(BenchmarkNote(message=message) for message in messages)
        messages.clear()

    stats = None
    if defaults:
        # The baselines that need only token-neighbour statistics (KTC) join the defaults where the statistics need
        # no download: shipped for the sample, or given.
        stats = lookup.neighbours_for_run(sources, dataset, messages)
        inform()
        ktc_like = [name for baseline in available().values() if set(baseline.needs) == {"neighbours"}
                    for name in baseline.defaults]
        if stats is not None:
            names = names + ktc_like
        else:
            reason = "no token-neighbour statistics for this data"
            notes.append(BenchmarkNote(message=f"KTC skipped: {reason}; pass --neighbours PATH|HUB_ID (see `much "
                                       "neighbours --help`)", skipped=tuple(ktc_like), reason=reason))
    if stats is None and any("neighbours" in resolve(name).needs for name in names):
        stats = lookup.neighbours_for_run(sources, dataset, messages)
        inform()
        if stats is None:
            raise ValueError("KTC needs token-neighbour statistics of the generating LLM's tokenizer: pass "
                             "neighbours= (much run --neighbours PATH|HUB_ID, see `much neighbours --help`)")
    return names, stats


def _within_view(names: list[str], top_k: int, notes: list[BenchmarkNote],
                 available: Sequence[str] | None = None) -> list[str]:
    """The names whose needs the run meets (the view's ``top_k`` candidates; ``available`` resources when given),
    and one note per distinct unmet need listing the others ("needs top-24: Token Entropy-24, ..."). ValueError when
    nothing is left."""
    from much_metric.baselines.needs import needs_text, unmet_needs
    from much_metric.baselines.registry import display_name, resolve

    kept, by_need = [], {}
    for name in names:
        unmet = unmet_needs(resolve(name), top_k=top_k, available=resolve(name).needs if available is None
                            else available)
        if unmet:
            by_need.setdefault(needs_text(unmet), []).append(name)
        else:
            kept.append(name)
    view = f"the top-{top_k} view" if top_k else "the top-0 view (the sampled token's probability alone)"
    for need, skipped in by_need.items():
        notes.append(BenchmarkNote(message=f"not scored on {view}, {need}: {', '.join(map(display_name, skipped))}",
                                   skipped=tuple(skipped), reason=need))
    if not kept:
        raise ValueError(f"no signal asked for can run on {view}: {'; '.join(by_need)}")
    return kept


def _every_method(top_k: int, found: dict[str, Any], notes: list[BenchmarkNote]) -> tuple[list[str], Any]:
    """Every registered method's default signals on a ``top_k`` view: those whose needs the run meets, and notes
    listing the others with their need; KTC's statistics when they are at hand. ``found``: the run's resources by
    kind (``RESOURCES``), the ``dataset`` and the ``neighbour_sources`` asked for."""
    from much_metric.baselines.registry import RESOURCES, available

    names = list(dict.fromkeys(name for baseline in available().values() for name in baseline.defaults))
    messages: list[str] = []
    stats = lookup.neighbours_for_run(found["neighbour_sources"], found["dataset"], messages)
    notes.extend(BenchmarkNote(message=message) for message in messages)
    have = [need for need in RESOURCES if (stats if need == "neighbours" else found.get(need)) is not None]
    return _within_view(names, top_k, notes, available=have), stats


def _named_or_defaults(wanted: list[str] | None, top_k: int | None, found: dict[str, Any],
                       notes: list[BenchmarkNote]) -> tuple[list[str], Any]:
    """The signals asked for, or table 3's with the ones the resources allow (CCP/SAR with an NLI model, KTC with
    neighbour statistics); those a ``top_k`` view cannot serve listed in notes; and KTC's statistics."""
    from much_metric.baselines.registry import resolve
    from much_metric.baselines.runner import NLI_SIGNALS, PROBABILITY_SIGNALS

    names = wanted or list(PROBABILITY_SIGNALS) + (list(NLI_SIGNALS) if found["nli"] is not None else [])
    if top_k is not None:
        names = _within_view(names, top_k, notes)
    needing = [name for name in names if "tokenizer" in resolve(name).needs]
    if needing and found["tokenizer"] is None:
        if wanted is not None:
            raise ValueError(f"{', '.join(needing)} need the generating LLM's tokenizer for every sample: pass "
                             "tokenizer= (much run --tokenizer)")
        names = [name for name in names if name not in needing]
        reason = "no generating-LLM tokenizer for every sample"
        notes.append(BenchmarkNote(message=f"CCP and SAR skipped: {reason}", skipped=tuple(needing), reason=reason))
    names, stats = _with_neighbours(names, wanted is None, found["neighbour_sources"], found["dataset"], notes)
    if top_k is not None:
        names = _within_view(names, top_k, notes)
    return names, stats


def _with_sampling(names: list[str], resources: ResourceOptions, dataset: Any, origin: str | None,
                   nli: Any) -> tuple[ResourceOptions, list[str]]:
    """``resources`` with the samples, reference and encoder of the signals ``names`` loaded (none needed: as is),
    and the notes naming them."""
    from much_metric.baselines.registry import resolve

    needed = {need for name in names for need in resolve(name).needs}
    messages: list[str] = []
    if not needed & {"samples", "reference", "encoder"}:
        return resources, messages
    resources = lookup.sampling_resources(resources, dataset, origin, needed, messages)
    if "nli" in needed and nli is not None:  # printed with the numbers it produces
        messages.append(f"NLI model of the sampling / reference detectors: {getattr(nli, 'name', '?')}")
    return resources, messages


def _unread_options(resources: ResourceOptions, names: Sequence[str]) -> list[str]:
    """A note for each resource option given that none of the signals ``names`` reads (``--samples`` to the
    probability methods): said, not ignored in silence."""
    from much_metric.baselines.registry import resolve
    from much_metric.baselines.resource_table import unread_options

    needed = {need for name in names for need in resolve(name).needs}
    return list(unread_options(resources, needed).values())


def plan_benchmark(source: Any, *, signals: Sequence[str] | str | None = None, data: DataOptions = DataOptions(),
                   nli: NliOptions = NliOptions(), resources: ResourceOptions = ResourceOptions(),
                   progress: bool = False) -> BenchmarkPlan:
    """Load and select the data, decide the signals and resolve each resource they need once.

    ``source``: a data source for :func:`much_dataset.load` (``"sample"``, ``"orailix/MUCH"``, a folder) or a
    loaded split; the options as in :func:`much_metric.benchmark.run_benchmark`. A resource asked for by name that is
    missing raises ``ValueError``; one only missing for a default signal becomes a note and the signal is skipped.
    """
    from much_dataset.schema import HUB_REPO_ID, OUTPUT_TOKENS
    from much_metric.baselines.registry import RESOURCES, resolve
    from much_metric.baselines.runner import NLI_SIGNALS

    if resources.nli is not None:
        raise ValueError("run_benchmark takes the NLI model from nli=NliOptions(model=...), not from "
                         "ResourceOptions(nli=...)")
    if not isinstance(source, str) and (data.config != "all" or data.split is not None):
        raise ValueError("config and split apply to a data source (a str source); select the split yourself for a "
                         "loaded dataset")
    wanted = check_signals(signals)
    neighbour_sources = [resources.neighbours] if isinstance(resources.neighbours, str | Path) \
        else resources.neighbours
    notes: list[BenchmarkNote] = []
    messages: list[str] = []

    def inform() -> None:  # the resources' notes (strings) become informative notes, in order
        notes.extend(BenchmarkNote(message=message) for message in messages)
        messages.clear()

    if isinstance(source, str):
        origin: str | None = source
        single, per_config = lookup.llm_tokenizers(resources.tokenizer, origin, messages)
        start = time.perf_counter()
        dataset, splits_used = _load(source, data.config, data.split, data.selection,
                                     per_config if origin == HUB_REPO_ID else {})
        load_seconds = time.perf_counter() - start
    else:
        dataset, splits_used, load_seconds = _select(source, data.selection, "the dataset"), "all", 0.0
        origin = data.source if data.source is not None else _source_of(dataset)
        single, per_config = lookup.llm_tokenizers(resources.tokenizer, origin, messages)
    inform()
    n_tokens = int(sum(len(t) for t in dataset.select_columns([OUTPUT_TOKENS]).with_format("arrow")[:]
                       .column(OUTPUT_TOKENS).to_pylist()))
    decoder = lookup.decoder_for(dataset, single, per_config)

    nli_scorer = None
    explicit = wanted is not None and any("nli" in resolve(name).needs for name in wanted)
    if nli.enabled and (wanted is None or explicit):
        nli_scorer, why_not = lookup.load_nli_for_run(
            nli.model, explicit=explicit, dataset=dataset, notes=messages, device=nli.device,
            batching=nli.batching, progress=progress)
        inform()
        if why_not is not None:
            notes.append(BenchmarkNote(message=f"CCP and SAR skipped: {why_not}; pass --nli-model NAME to download "
                                       "or use one", skipped=tuple(NLI_SIGNALS), reason=why_not))
    found = {**{need: getattr(resources, need, None) for need in RESOURCES}, "dataset": dataset,
             "neighbour_sources": neighbour_sources, "tokenizer": decoder, "nli": nli_scorer}
    if wanted is None and data.top_k is not None:  # `much run --top-k K` alone: every method, by what it needs
        names, stats = _every_method(data.top_k, found, notes)
    else:
        names, stats = _named_or_defaults(wanted, data.top_k, found, notes)
    given = resources
    resources, sampling_notes = _with_sampling(names, resources, dataset, origin, nli_scorer)
    notes.extend(BenchmarkNote(message=message) for message in sampling_notes)
    notes.extend(BenchmarkNote(message=message) for message in _unread_options(given, names))
    return BenchmarkPlan(dataset=dataset, source=origin, splits_used=splits_used, load_seconds=load_seconds,
                         n_tokens=n_tokens, signals=tuple(names), default_signals=wanted is None, tokenizer=single,
                         tokenizers=per_config, top_k=data.top_k,
                         resources=resources.replace(tokenizer=decoder, nli=nli_scorer, neighbours=stats),
                         notes=tuple(notes))
