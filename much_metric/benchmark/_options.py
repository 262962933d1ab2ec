"""The options of a benchmark run, grouped (evaluation, data, NLI, resources, output): frozen, keyword-only, each
constraint declared once in :mod:`much_dataset.params` and checked when the object is built -- before anything is
loaded. Two of them live in the layers that use them and are re-exported here: :class:`EvaluationOptions`
(:mod:`much_metric.report`, also :func:`~much_metric.report.evaluate_signals`'s) and :class:`ResourceOptions`
(:mod:`much_metric.baselines`, also :func:`~much_metric.baselines.compute_signals`'s)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from much_dataset.params import InvalidParameterError, OneOf, check_param
from much_metric.baselines import NliBatching, ResourceOptions
from much_metric.baselines.runner import TOP_K_VIEW
from much_metric.report import EvaluationOptions

__all__ = ["DataOptions", "EvaluationOptions", "NliOptions", "OutputOptions", "ResourceOptions"]

FILE_FORMATS = OneOf(("parquet", "jsonl"))
SELECTIONS = OneOf(("all", "manual", "auto"))


@dataclass(frozen=True, kw_only=True)
class DataOptions:
    """Which samples: the config and split of a data source, the selection, and where loaded data comes from.

    Attributes
    ----------
    config, split : str, default "all", None
        Dataset config and split when ``source`` of :func:`run_benchmark` is a str (None: every split,
        concatenated). Only for a source: select the split yourself for a loaded dataset.
    selection : {"all", "manual", "auto"}, default "all"
        Samples both annotators labelled identically, samples without human labels, or every sample.
    source : str or None, default None
        Where a loaded dataset comes from, for the resources' defaults; None: ``"orailix/MUCH"`` when every
        ``generation_config`` is one of MUCH's, ``"sample"`` for the embedded sample's. Ignored for a str source.
    generation_time : float, str or None
        The LLM's generation time of these samples (the denominator of relative runtimes): seconds or a JSON file
        (:func:`much_metric.baselines.runtime.generation_time`); None: the paper's pro rata for orailix/MUCH, an
        estimate from the output tokens otherwise.
    top_k : int or None, default None
        The input view (``much run --top-k K``): what an API with ``top_logprobs=K`` gives, the K most probable
        candidates and the sampled token's own probability (:func:`much_metric.baselines.views.top_k_view`); 0 =
        the sampled token alone (Mu-SHROOM). Only the methods that read at most K candidates are scored; the
        others are listed with their need ("needs top-24"). None: the stored 24 candidates.
    """

    config: str = "all"
    split: str | None = None
    selection: Literal["all", "manual", "auto"] = "all"
    source: str | None = None
    generation_time: Any = None
    top_k: int | None = None

    def __post_init__(self) -> None:
        from much_metric.baselines.runtime import generation_time

        check_param("selection", self.selection, SELECTIONS, owner="DataOptions")
        check_param("top_k", self.top_k, TOP_K_VIEW, owner="DataOptions")
        generation_time(self.generation_time, data_source="", n_samples=1, n_tokens=1)  # a bad value fails now


@dataclass(frozen=True, kw_only=True)
class NliOptions:
    """The NLI model of CCP/SAR and how it runs.

    Attributes
    ----------
    model : str, NliScorer or None, default None
        Hub id, folder, ``"en=MODEL,*=MODEL"`` / JSON file (one per language) or a loaded scorer; None:
        ``microsoft/deberta-large-mnli`` if already cached (never downloaded unasked).
    enabled : bool, default True
        False skips CCP/SAR (``much run --no-nli``).
    batching : NliBatching, default NliBatching()
        Pairs and padded tokens per forward pass (:class:`much_metric.baselines.NliBatching`); applies to a model
        loaded by name (a loaded scorer keeps its own).
    device : str or None
        Torch device of the NLI model (None: cuda if available).
    reference_window : bool, default False
        CCP/SAR context suffix of ``sigma - 1`` tokens, as the reference code.
    """

    model: Any = None
    enabled: bool = True
    batching: NliBatching = field(default_factory=NliBatching)
    device: str | None = None
    reference_window: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.batching, NliBatching):
            raise InvalidParameterError(f"NliOptions: batching must be a much_metric.baselines.NliBatching, got "
                                        f"{type(self.batching).__name__}")


@dataclass(frozen=True, kw_only=True)
class OutputOptions:
    """Where the signal files go.

    Attributes
    ----------
    out : str, path or None
        Folder for the signal files and ``timings.json``; a rerun reuses them (nothing recomputed).
    file_format : {"parquet", "jsonl"}, default "parquet"
        Format of the signal files under ``out``.
    progress : bool, default False
        tqdm progress bars.
    """

    out: str | Path | None = None
    file_format: Literal["parquet", "jsonl"] = "parquet"
    progress: bool = False

    def __post_init__(self) -> None:
        check_param("file_format", self.file_format, FILE_FORMATS, owner="OutputOptions")
