"""Compute baselines over a split by reference signal name, timed, written resumably as MUCH-signals files.

Signal names follow the reference (docs/reference-behaviour.md#signals): ``token_likelihood``, ``max_likelihood``,
``token_entropy_{delta}``,
``ccp_{delta}_{sigma}[suffix]``, ``sar_{sigma}[suffix]`` (suffix ``_M`` / ``_S`` / ``_<alias>`` names a non-default
NLI model, see :func:`much_metric.baselines.nli.nli_signal_suffix`).

With ``out=<folder>``, each signal goes to ``<folder>/<signal_name>.parquet`` (or ``.jsonl``) through
:func:`much_metric.signals.write_signals` (idempotent), and wall times to ``<folder>/timings.json``. A rerun
computes only the generations the file lacks, so a killed CCP run continues where it stopped (NLI signals are
written every ``block_size`` samples) and nothing is duplicated; the recorded time is the sum over the runs.
"""

from __future__ import annotations

import functools
import json
import numbers
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from much_dataset.params import POSITIVE_INT, Interval, InvalidParameterError, NoneOr, OneOf, check_param
from much_dataset.schema import TOP_K
from much_metric._progress import nested_bar_disabled
from much_metric.baselines._arrays import TokenArrays, token_arrays
from much_metric.baselines.metering import CostMeter
from much_metric.baselines.registry import RESOURCES, TABLE_GROUPS, BaselineSpec, display_name, resolve
from much_metric.baselines.resource_table import ResourceOptions, records_of
from much_metric.signals import (
    COST_KEY,
    INTERNALS_PACK_KEY,
    SignalCost,
    check_internals_pack,
    internals_pack_record,
    read_signal_metadata,
)

__all__ = [
    "TABLE3_SIGNALS",
    "TOP_K_VIEW",
    "ResourceOptions",
    "SignalOptions",
    "SignalRun",
    "compute_signals",
    "TIMINGS_FILE",
]

#: Table 3 of the paper: CCP (delta 10, sigma 8), SAR (sigma 8), Max Likelihood, Token Likelihood, Token Entropy 24.
TABLE3_SIGNALS = TABLE_GROUPS["table3"]
TIMINGS_FILE = "timings.json"
#: An input view's candidates per token (``top_k``): None (the stored 24) or an int in [0, 24].
TOP_K_VIEW = NoneOr(Interval(numbers.Integral, 0, TOP_K))


def __getattr__(name: str) -> tuple[str, ...]:
    """``PROBABILITY_SIGNALS`` (table 3's baselines that need no model) and ``NLI_SIGNALS`` (those that need an NLI
    model), computed from the registry when first asked for, so that importing this module discovers nothing."""
    if name == "PROBABILITY_SIGNALS":
        return tuple(signal for signal in TABLE3_SIGNALS if not resolve(signal).needs)
    if name == "NLI_SIGNALS":
        return tuple(signal for signal in TABLE3_SIGNALS if "nli" in resolve(signal).needs)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass(frozen=True, kw_only=True)
class SignalOptions:
    """How :func:`compute_signals` computes and stores signals.

    Attributes
    ----------
    reference_window : bool, default False
        CCP/SAR context suffix of ``sigma - 1`` tokens as the reference (see :mod:`much_metric.baselines.context`).
    block_size : int, default 512
        NLI signals are computed and written this many samples at a time (resumability; the NLI batches within a
        block are de-duplicated and length-sorted).
    file_format : {"parquet", "jsonl"}, default "parquet"
        Signal files ``<out>/<signal_name>.parquet`` (the hub's MUCH-signals layout) or ``.jsonl`` (the reference's
        ``output/signals`` layout); both keep the float64 values exactly, so a run with ``out`` evaluates the same
        numbers as one without.
    top_k : int or None, default None
        Compute on the input view an API with ``top_logprobs=top_k`` gives
        (:func:`much_metric.baselines.views.top_k_view`: the ``top_k`` most probable candidates and the sampled
        token's own probability); None: the stored 24 candidates. Every signal must read at most ``top_k``
        candidates (its ``Baseline.top_k``; then its values are those of the stored data, so its file is shared).
    """

    reference_window: bool = False
    block_size: int = 512
    file_format: str = "parquet"
    top_k: int | None = None

    def __post_init__(self) -> None:
        check_param("block_size", self.block_size, POSITIVE_INT, owner="SignalOptions")
        check_param("file_format", self.file_format, OneOf(("parquet", "jsonl")), owner="SignalOptions")
        check_param("top_k", self.top_k, TOP_K_VIEW, owner="SignalOptions")


@dataclass
class SignalRun:
    """One signal over a split.

    ``values``: generation_id -> token scores (higher = more uncertain) for every sample of the split (a signal
    that reads an internals pack: every sample the pack holds);
    ``seconds``: wall time of the signal over all those samples (summed over resumed runs; nan if unknown, e.g.
    values read from a file without timings); ``n_computed``: samples computed by this call (the rest were read
    back from ``out``); ``spec``: the registered baseline and its parameters; ``metadata``: the signal metadata
    (stored in its file; a learned detector's ``training_generation_ids``, see :mod:`much_metric.signals._training`);
    ``cost``: what computing it cost (:class:`much_metric.signals.SignalCost`: wall and CPU seconds, claims, forward
    passes, machine; summed over resumed runs, None when values were read from a file that records none).
    """

    name: str
    spec: BaselineSpec
    values: dict[str, np.ndarray]
    seconds: float
    n_computed: int
    metadata: dict[str, Any] = field(default_factory=dict)
    cost: SignalCost | None = None


def _read_timings(out: Path | None) -> dict[str, Any]:
    if out is None or not (out / TIMINGS_FILE).exists():
        return {}
    from much_metric.baselines.runtime import read_timings

    return read_timings(out / TIMINGS_FILE)


def _write_timings(out: Path, timings: dict[str, Any]) -> None:
    from much_metric.fileio import atomic_write_bytes

    atomic_write_bytes(out / TIMINGS_FILE, (json.dumps(timings, indent=2, sort_keys=True) + "\n").encode("utf-8"))


#: The signal-metadata key of the resources that made a signal's values (:attr:`Resource.recorded`), checked when a
#: signal file is resumed: values of another encoder, NLI model, samples or reference never mix.
RESOURCES_KEY = "resources"


def resource_records(spec: BaselineSpec, found: dict[str, Any]) -> dict[str, Any]:
    """``{need: record}`` of the recorded resources of a signal that needs samples, a reference or an encoder."""
    return records_of(spec.needs, found)


def _check_resources(path: Path, stored: dict[str, Any], records: dict[str, Any]) -> None:
    """Refuse to resume a signal file whose recorded resources are not ``records``."""
    if not stored or not records:
        return
    before = read_signal_metadata(path).get(RESOURCES_KEY)
    if before is not None and before != json.loads(json.dumps(records)):
        raise ValueError(f"{path} was computed with other resources ({before}); resuming it with {records} would "
                         "mix them (use another out)")


def _seconds_for(record: dict[str, Any], arrays: TokenArrays) -> float:
    """Wall time of the signal on this split; pro rata per token when the record covers other samples too."""
    if not record.get("n_samples") or not record.get("n_tokens"):
        return float("nan")
    if record["n_samples"] == arrays.n_samples and record["n_tokens"] == arrays.n_tokens:
        return float(record["seconds"])
    return float(record["seconds"]) * arrays.n_tokens / record["n_tokens"]


def compute_signals(
    dataset: Any,
    signals: Sequence[str],
    *,
    resources: ResourceOptions = ResourceOptions(),
    out: str | Path | None = None,
    progress: bool = True,
    options: SignalOptions | None = None,
) -> dict[str, SignalRun]:
    """Compute signals (by reference name) over a split, timing each; resumable with ``out``.

    Parameters
    ----------
    dataset : datasets.Dataset, pyarrow.Table, list of rows or TokenArrays
        A MUCH split.
    signals : sequence of str
        Reference names, e.g. ``["token_likelihood", "max_likelihood", "token_entropy_24", "ccp_10_8", "sar_8"]``.
        The NLI suffix of CCP/SAR names is derived from ``resources.nli``'s name; a name whose suffix contradicts
        it is an error.
    resources : ResourceOptions
        The generating LLM's tokenizer (CCP, SAR), the NLI model (CCP, SAR), token-neighbour statistics (KTC), an
        internals pack (RAUQ): each needed only by the baselines whose ``needs`` name it, resolved once
        (:meth:`ResourceOptions.resolved`) before anything is computed.
    out : str or path, optional
        Folder for ``<signal_name>.parquet`` files and ``timings.json``; existing values are reused.
    progress : bool, default True
        tqdm progress bars.
    options : SignalOptions or None, default None
        The reference window, NLI block size and signal-file format (None: ``SignalOptions()``).

    Returns
    -------
    dict
        signal name -> :class:`SignalRun`, in the order asked.

    Examples
    --------
    >>> import much_dataset
    >>> from much_metric.baselines import compute_signals
    >>> split = much_dataset.load("sample", split="test").select(range(3))
    >>> runs = compute_signals(split, ["max_likelihood"], progress=False)
    >>> run = runs["max_likelihood"]
    >>> len(run.values), run.n_computed
    (3, 3)
    """
    from tqdm.auto import tqdm

    options = SignalOptions() if options is None else options
    if not isinstance(options, SignalOptions):
        raise InvalidParameterError(f"compute_signals: options must be a SignalOptions or None, got "
                                    f"{type(options).__name__}")
    if not isinstance(resources, ResourceOptions):
        raise InvalidParameterError(f"compute_signals: resources must be a ResourceOptions, got "
                                    f"{type(resources).__name__}")
    reference_window, block_size, file_format = options.reference_window, options.block_size, options.file_format
    specs = [resolve(name) for name in signals]
    needed = {need for spec in specs for need in spec.needs}
    found = resources.resolved(dataset, needed).as_dict()
    nli = found["nli"]
    nli_specs = [spec for spec in specs if "nli" in spec.needs]
    if len(nli_specs) > 1:
        # Several CCP/SAR configurations (table 7): one NLI cache, so that a pair is scored once (ccp_10_sigma's
        # pairs are ccp_24_sigma's, SAR's and short answers' windows recur); see nli_routing.NliCache.
        from much_metric.baselines.nli_routing import NliCache

        nli = found["nli"] = NliCache(nli)
    for need in sorted(needed):  # found: what each method's compute reads, {need: loaded resource}
        if found[need] is None:
            users = ", ".join(spec.signal for spec in specs if need in spec.needs)
            raise ValueError(f"{users} need {RESOURCES[need]} (resources=ResourceOptions({need}=...))")
    method_options = {"reference_window": reference_window}
    arrays = token_arrays(dataset)
    if options.top_k is not None:
        from much_metric.baselines.views import top_k_view

        deeper = [f"{spec.signal} (top-{spec.top_k})" for spec in specs if spec.top_k > options.top_k]
        if deeper:
            raise ValueError(f"{', '.join(deeper)} read more than the top-{options.top_k} candidates of the view "
                             "(SignalOptions(top_k=...)): leave them out, or see much_metric.benchmark's "
                             "degradation_table for what they give on less")
        arrays = top_k_view(arrays, options.top_k)
    out = Path(out) if out is not None else None
    timings = _read_timings(out)
    runs: dict[str, SignalRun] = {}
    window = None
    in_pack = set(found["internals"].held(arrays.generation_ids, np.diff(arrays.offsets).tolist())) \
        if "internals" in needed else set()
    for spec in tqdm(_compute_order(specs), desc="signals", unit="signal", disable=not progress):
        computable = in_pack if "internals" in spec.needs else set(arrays.generation_ids)
        if len(nli_specs) > 1 and "nli" in spec.needs and spec.params.get("sigma") != window:
            # Windows of another sigma are other texts: keep the cache to one sigma (bounded memory).
            window = spec.params.get("sigma")
            nli.clear()
        name = spec.stored_name(found)
        signal_metadata = spec.signal_metadata()
        if "internals" in spec.needs:  # its values belong to that pack: recorded, and checked on resume
            signal_metadata = {**signal_metadata, INTERNALS_PACK_KEY: internals_pack_record(found["internals"])}
        records = resource_records(spec, found)  # which samples, reference, encoder and NLI model make the values
        signal_metadata = {**signal_metadata, **({RESOURCES_KEY: records} if records else {})}
        stored: dict[str, np.ndarray] = {}
        path = out / f"{name}.{file_format}" if out is not None else None
        recorded: dict[str, Any] = {}
        if path is not None and path.exists():
            from much_metric.signals import read_signals

            stored = read_signals(path).get(name, {})
            recorded = read_signal_metadata(path) if stored else {}
            if stored and "internals" in spec.needs:
                check_internals_pack(recorded, found["internals"], file=path)
            _check_resources(path, stored, records)
        recorded_window = timings.get(name, {}).get("reference_window")
        uses_window = "reference_window" in spec.baseline.options
        if stored and uses_window and recorded_window is not None and recorded_window != reference_window:
            raise ValueError(f"{path} was computed with reference_window={recorded_window}; resuming it with "
                             f"reference_window={reference_window} would mix two window conventions (use another out)")
        meter = CostMeter([found[need] for need in spec.needs], top_k=options.top_k,
                          recorded=recorded.get(COST_KEY), file=path)
        todo = [i for i, gid in enumerate(arrays.generation_ids) if gid not in stored and gid in computable]
        record = timings.get(name, {"seconds": 0.0, "n_samples": 0, "n_tokens": 0}) if stored else \
            {"seconds": 0.0, "n_samples": 0, "n_tokens": 0}
        step = block_size if spec.needs else max(len(todo), 1)
        blocks = [todo[start : start + step] for start in range(0, len(todo), step)]
        for block in tqdm(blocks, desc=display_name(name), unit="block", leave=False,
                          disable=nested_bar_disabled(progress) or len(blocks) < 2):
            part = arrays.select(block)
            flat, elapsed = meter.measure(part, functools.partial(spec.compute, part, found, method_options))
            values = dict(zip(part.generation_ids, spec.split(part, flat), strict=True))
            stored.update(values)
            record = {"seconds": record["seconds"] + elapsed, "n_samples": record["n_samples"] + part.n_samples,
                      "n_tokens": record["n_tokens"] + part.n_tokens}
            if out is not None:
                _write_block(path, name, values, {**signal_metadata, COST_KEY: meter.cost.to_dict()},
                             nli if "nli" in spec.needs else None)
                timings[name] = {**record, "reference_window": reference_window}
                _write_timings(out, timings)
        # The display shows the stored name's parameters (CCP/SAR's NLI suffix, KTC's config), except for a signal
        # with metadata (a learned detector): its label names its folder's protocol, which its stored name cannot.
        stored_spec = spec if name == spec.signal or spec.baseline.metadata is not None else resolve(name)
        covered = arrays if len(computable) == arrays.n_samples else arrays.select(
            [i for i, gid in enumerate(arrays.generation_ids) if gid in computable])
        runs[name] = SignalRun(name, stored_spec, {gid: stored[gid] for gid in covered.generation_ids},
                               _seconds_for(record, covered), len(todo), signal_metadata, meter.cost)
    order = {spec.stored_name(found): i for i, spec in enumerate(specs)}
    return dict(sorted(runs.items(), key=lambda item: order[item[0]]))


def _write_block(path: Path, name: str, values: dict[str, np.ndarray], signal_metadata: dict[str, Any],
                 nli: Any) -> None:
    """One block of a signal into its file: the values, then the signal metadata (cost, a learned detector's training
    rows) and, for an NLI signal, which NLI model scored each sample (one per language with NliRouter)."""
    from much_metric.signals import add_sample_metadata, read_sample_metadata, write_signal_metadata, write_signals

    before = read_sample_metadata(path) if nli is not None else {}
    write_signals(path, [{"generation_id": g, "signal_name": name, "values": v} for g, v in values.items()])
    write_signal_metadata(path, signal_metadata)
    if nli is not None:
        nli_name = str(getattr(nli, "name", ""))
        model_of = getattr(nli, "model_of", None) or (lambda _: nli_name)
        add_sample_metadata(path, {**before, **{g: {"nli_model": model_of(g)} for g in values}})


def _compute_order(specs: list[BaselineSpec]) -> list[BaselineSpec]:
    """NLI signals grouped by window (sigma), so that one sigma's shared pairs are cached together; the rest as
    asked. Within a group the order does not change the pairs sent (the cache answers the rest)."""
    rank = {}
    for spec in specs:
        rank.setdefault(spec.params.get("sigma") if "nli" in spec.needs else None, len(rank))
    return sorted(specs, key=lambda spec: rank[spec.params.get("sigma") if "nli" in spec.needs else None])
