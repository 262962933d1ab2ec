"""The options of a benchmark run, grouped (evaluation, data, NLI, resources, output): frozen, keyword-only, each
constraint declared once in :mod:`much_dataset.params` and checked when the object is built -- before anything is
loaded."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from much_dataset.params import (
    AGGREGATOR,
    OPTIONAL_POSITIVE_INT,
    RANDOM_STATE,
    STOPWORD_MODE,
    InvalidParameterError,
    OneOf,
    check_param,
)
from much_metric.scoring import Bootstrap
from much_metric.signals import check_resamples

__all__ = ["DataOptions", "EvaluationOptions", "NliOptions", "OutputOptions", "ResourceOptions"]

FILE_FORMATS = OneOf(("parquet", "jsonl"))
SELECTIONS = OneOf(("all", "manual", "auto"))


@dataclass(frozen=True, kw_only=True)
class EvaluationOptions:
    """How the signals are evaluated.

    Attributes
    ----------
    aggregator : {"product", "mean", "max", "geometric"}, default "product"
        Token scores -> claim scores. Under product and geometric, signals with scores outside [0, 1] (NLL) are
        left out of the table with a note.
    stopword_handling : {"null", "exclude"}, default "null"
        As in :func:`much_metric.score`.
    bootstrap : Bootstrap or None, default Bootstrap()
        Resampling of the samples for 95 % intervals (at least 40 resamples); None: no intervals.
    random_state : int or None, default None
        Seed of the random floor (None: the bootstrap's ``random_state``, 0 without bootstrap).
    include_training_rows : bool, default False
        A signal whose metadata names the rows it was trained on (a learned detector) is scored on the other rows
        only, with a note saying how many were left out and why; True scores every row, with a warning and a note.

    Examples
    --------
    >>> from much_metric.benchmark import EvaluationOptions
    >>> EvaluationOptions(aggregator="mean", bootstrap=None).aggregator
    'mean'
    >>> EvaluationOptions(aggregator="median")
    Traceback (most recent call last):
    ...
    much_dataset.params.InvalidParameterError: EvaluationOptions: aggregator must be one of ('product', 'mean', 'max', 'geometric'), got 'median'
    """  # noqa: E501

    aggregator: str = "product"
    stopword_handling: Literal["null", "exclude"] = "null"
    bootstrap: Bootstrap | None = field(default_factory=Bootstrap)
    random_state: int | None = None
    include_training_rows: bool = False

    def __post_init__(self) -> None:
        check_param("aggregator", self.aggregator, AGGREGATOR, owner="EvaluationOptions")
        check_param("stopword_handling", self.stopword_handling, STOPWORD_MODE, owner="EvaluationOptions")
        check_param("random_state", self.random_state, RANDOM_STATE, owner="EvaluationOptions")
        if self.bootstrap is not None:
            if not isinstance(self.bootstrap, Bootstrap):
                raise InvalidParameterError(f"EvaluationOptions: bootstrap must be a much_metric.Bootstrap or None, "
                                            f"got {type(self.bootstrap).__name__}")
            check_resamples(self.bootstrap.n_resamples, "bootstrap.n_resamples")  # 1-39: no honest 95 % interval


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
    """

    config: str = "all"
    split: str | None = None
    selection: Literal["all", "manual", "auto"] = "all"
    source: str | None = None

    def __post_init__(self) -> None:
        check_param("selection", self.selection, SELECTIONS, owner="DataOptions")


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
    batch_size, max_batch_tokens : int or None
        NLI batching (None: the scorer's defaults).
    device : str or None
        Torch device of the NLI model (None: cuda if available).
    reference_window : bool, default False
        CCP/SAR context suffix of ``sigma - 1`` tokens, as the reference code.
    """

    model: Any = None
    enabled: bool = True
    batch_size: int | None = None
    max_batch_tokens: int | None = None
    device: str | None = None
    reference_window: bool = False

    def __post_init__(self) -> None:
        check_param("batch_size", self.batch_size, OPTIONAL_POSITIVE_INT, owner="NliOptions")
        check_param("max_batch_tokens", self.max_batch_tokens, OPTIONAL_POSITIVE_INT, owner="NliOptions")


@dataclass(frozen=True, kw_only=True)
class ResourceOptions:
    """What the run may need besides NLI, each resolved once into the run's plan.

    Attributes
    ----------
    tokenizer : str, tokenizer, mapping or None, default None
        The generating LLM's tokenizer (CCP/SAR and the segmentation time): a name, a loaded tokenizer or
        ``{generation_config: tokenizer}``; None: SmolLM2's for the sample, the MUCH models' for orailix/MUCH.
    neighbours : str, sequence of str or None
        KTC's token-neighbour statistics (``much run --neighbours`` forms); None: those shipped with the sample.
    generation_time : float, str or None
        LLM generation time: seconds or a JSON file (:func:`much_metric.baselines.runtime.generation_time`).
    internals : str, path, InternalsPack or None
        An internals pack (``python -m builder internals``) for the signals that need one (RAUQ); a path is opened
        and checked against the split once.
    """

    tokenizer: Any = None
    neighbours: Any = None
    generation_time: Any = None
    internals: Any = None

    def __post_init__(self) -> None:
        from much_metric.baselines.runtime import generation_time

        generation_time(self.generation_time, data_source="", n_samples=1, n_tokens=1)  # a bad value fails now


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
