"""The detectors as scikit-learn-shaped estimators: hyper-parameters in the constructor, then ``fit``.

``LinearDetector(...).fit(train, validation).save(folder)`` writes a detector folder;
:func:`~much_metric.learned.load_detector` reads one back; ``much run --signals learned:FOLDER`` scores it.
Each hyper-parameter's constraint is declared once (:data:`CONSTRAINTS`) and checked when the estimator is built
and again when it is fitted, with one message shape (``<name> must be ..., got ...``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from much_metric.learned._kinds import KINDS, MAX_HIDDEN

__all__ = ["CONSTRAINTS", "ClaimHeadDetector", "LinearDetector", "ProbeDetector", "SequenceDetector"]


def _integer(low: int, high: int) -> tuple[Callable[[Any], bool], str]:
    return (lambda v: not isinstance(v, bool) and isinstance(v, int) and low <= v <= high,
            f"an integer in [{low}, {high:,}]")


def _aggregators() -> tuple[str, ...]:
    from much_metric.scoring import AGGREGATORS

    return tuple(AGGREGATORS)


#: Hyper-parameter -> (check, what it must be). The learning rate is bounded: Adam at 1e300 only overflows.
CONSTRAINTS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "aggregator": (lambda v: v in _aggregators(), "one of the metric's aggregators (product, mean, max, geometric)"),
    "stopword_handling": (lambda v: v in ("null", "exclude"), "'null' or 'exclude'"),
    "learning_rate": (lambda v: not isinstance(v, bool) and isinstance(v, int | float) and math.isfinite(v)
                      and 0 < v <= 10, "a finite number in (0, 10]"),
    "batch_size": _integer(1, 1 << 16),
    "max_epochs": _integer(1, 100_000),
    "patience": _integer(1, 100_000),
    "hidden": _integer(1, MAX_HIDDEN),
    "layers": _integer(1, 8),
    "layer": (lambda v: v is None or _integer(0, 4096)[0](v), "None (the middle of the pack's hidden_layers) or a "
              "hidden_states index in [0, 4,096]"),
    "C": (lambda v: not isinstance(v, bool) and isinstance(v, int | float) and math.isfinite(v) and v > 0,
          "a finite positive number"),
    "max_iter": _integer(1, 1_000_000),
    "class_weight": (lambda v: v in ("balanced", None), "'balanced' or None"),
    "random_state": _integer(0, 2**63 - 1),
}


class _Detector:
    """Shared by :class:`LinearDetector` and :class:`SequenceDetector` (one kind each, from the kind table)."""

    kind: ClassVar[str]

    def get_params(self) -> dict[str, Any]:
        """The constructor's hyper-parameters."""
        return {name: getattr(self, name) for name in self._names()}

    def set_params(self, **params: Any) -> _Detector:
        unknown = set(params) - set(self._names())
        if unknown:
            raise ValueError(f"{type(self).__name__} has no hyper-parameter {sorted(unknown)[0]!r}; it has "
                             f"{', '.join(self._names())}")
        for name, value in params.items():
            setattr(self, name, value)
        self._check()
        return self

    @classmethod
    def _names(cls) -> tuple[str, ...]:
        return ("aggregator", "stopword_handling", *KINDS[cls.kind].defaults, "random_state")

    def _check(self) -> dict[str, Any]:
        params = self.get_params()
        for name, value in params.items():
            check, what = CONSTRAINTS[name]
            if not check(value):
                raise ValueError(f"{name} must be {what}, got {value!r}")
        heads = KINDS[self.kind].fixed.get("heads")
        if heads and params["hidden"] % heads:
            raise ValueError(f"hidden must be a multiple of {heads} (the claim head's attention heads), got "
                             f"{params['hidden']!r}")
        return params

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self.get_params().items())})"

    def fit(self, train: Any, validation: Any, *, internals: Any = None, checkpoint: str | Path | None = None,
            protocol: dict[str, Any] | None = None, progress: bool = True) -> _Detector:
        """Fit on ``train`` with early stopping on ``validation``; returns ``self`` (fitted: ``detector_``,
        ``history_``).

        Parameters
        ----------
        train, validation : datasets.Dataset or list of rows
            MUCH rows (token arrays, ``token_chunks``, ``labels``, optional ``stopword_mask``, ``generation_id``);
            make them with :func:`much_metric.learned.make_folds` so that no question, article or generation is in
            both. Their generation_ids are recorded (``training_rows.json``) and left out wherever the detector is
            scored.
        internals : path or InternalsPack, optional
            The internals pack (:func:`much_dataset.load_internals`) that :class:`ProbeDetector` and
            :class:`ClaimHeadDetector` read (required there, refused by the probability-only detectors); its
            observer (model, weights hash, layers, heads, the hidden layer or window read) is recorded in the
            folder and checked wherever the detector is scored.
        checkpoint : path, optional
            Folder of the per-epoch training state: a killed fit resumes from it (see
            :mod:`much_metric.learned.training`).
        protocol : dict, optional
            Recorded in the config (protocol ``name``, ``fold``, ``data``, what was ``purged``).
        progress : bool, default True
            A tqdm bar over the epochs.
        """
        from much_metric.learned.training import fit_detector

        detector, history = fit_detector(KINDS[self.kind], self._check(), train, validation, checkpoint=checkpoint,
                                         progress=progress, internals=internals)
        detector.config["protocol"] = dict(protocol or {})
        self.detector_, self.history_ = detector, history
        return self

    def _fitted(self):
        if not hasattr(self, "detector_"):
            raise ValueError(f"this {type(self).__name__} is not fitted yet: call fit(train, validation) first")
        return self.detector_

    def save(self, folder: str | Path) -> Path:
        """Write the fitted detector's folder (config, weights, training rows, card); returns the folder."""
        from much_metric.learned.training import card

        detector = self._fitted()
        return detector.save(folder, card=card(detector.config, self.history_))

    def token_scores(self, data: Any, internals: Any = None) -> Any:
        """Flat token uncertainties in (0, 1) of the fitted detector (see ``Detector.token_scores``)."""
        return self._fitted().token_scores(data, internals)


class LinearDetector(_Detector):
    """Logistic regression on the token-probability features of :func:`~much_metric.learned.token_features`,
    trained through the metric's claim aggregator on the claim labels (see :mod:`much_metric.learned._torch`).

    Parameters
    ----------
    aggregator : str, default "product"
        Claim score of the loss, recorded in the folder (score the detector with the same one).
    stopword_handling : {"null", "exclude"}, default "null"
    learning_rate : float in (0, 10], default 0.02
    batch_size, max_epochs, patience : int, default 64, 60, 5
        Adam's batch, most epochs, epochs without validation improvement before stopping.
    random_state : int, default 0
        Parameter initialisation and batch order.

    Examples
    --------
    Fit on the sample's leave-one-language-out fold ``de`` (2 epochs here), score its held-out rows:

    >>> import much_dataset
    >>> from much_metric.learned import LinearDetector, make_folds, row_info
    >>> data = much_dataset.load("sample", split="test")
    >>> fold = make_folds(row_info(data), "leave-one-language-out", only="de")[0]
    >>> model = LinearDetector(max_epochs=2, random_state=0)
    >>> model.get_params()["learning_rate"]
    0.02
    >>> model = model.fit(data.select(fold.train), data.select(fold.validation), progress=False)
    >>> test = data.select(fold.test)
    >>> scores = model.token_scores(test)  # one per output token, in (0, 1), higher = more uncertain
    >>> len(scores) == sum(len(tokens) for tokens in test["output_tokens"]), bool(((scores > 0) & (scores < 1)).all())
    (True, True)
    >>> model.detector_.training_rows["validation"] == sorted(data.select(fold.validation)["generation_id"])
    True
    """

    kind = "linear"

    def __init__(self, *, aggregator: str = "product", stopword_handling: str = "null", learning_rate: float = 0.02,
                 batch_size: int = 64, max_epochs: int = 60, patience: int = 5, random_state: int = 0) -> None:
        self.aggregator, self.stopword_handling = aggregator, stopword_handling
        self.learning_rate, self.batch_size, self.max_epochs, self.patience = (learning_rate, batch_size, max_epochs,
                                                                               patience)
        self.random_state = random_state
        self._check()


class SequenceDetector(_Detector):
    """A causal one-layer GRU over each token's top-24 log-probabilities (:func:`~much_metric.learned.sequence_inputs`)
    with a per-token read-out, trained through the metric's claim aggregator (see :mod:`much_metric.learned._torch`).

    Parameters are those of :class:`LinearDetector` (defaults: learning_rate 0.005, batch_size 32, max_epochs 15,
    patience 3), plus ``hidden`` : int in [1, 1024], default 32, the GRU's state size.
    """

    kind = "sequence"

    def __init__(self, *, aggregator: str = "product", stopword_handling: str = "null", learning_rate: float = 0.005,
                 batch_size: int = 32, max_epochs: int = 15, patience: int = 3, hidden: int = 32,
                 random_state: int = 0) -> None:
        self.aggregator, self.stopword_handling = aggregator, stopword_handling
        self.learning_rate, self.batch_size, self.max_epochs, self.patience = (learning_rate, batch_size, max_epochs,
                                                                               patience)
        self.hidden, self.random_state = hidden, random_state
        self._check()


class ProbeDetector(_Detector):
    """A linear probe on one hidden layer of an internals pack: scikit-learn's L2 logistic regression on the
    standardised hidden state of every token of a labelled claim (its claim's label; stopwords and the last chunk
    left out), stored as a linear detector folder (``linear.weight``, ``linear.bias`` and the standardisation in
    safetensors), so its token logit is the regression's ``decision_function`` and its score ``predict_proba``.
    ``fit(train, validation, internals=PACK)``; the validation part gives the folder's validation numbers.

    Parameters
    ----------
    aggregator, stopword_handling : as :class:`LinearDetector` (how the folder is scored)
    layer : int or None, default None
        The ``hidden_states`` index read (one of the pack's ``hidden_layers``; None: the middle one).
    C : float > 0, default 0.05
        Inverse L2 strength (strong: tens of thousands of tokens, hundreds of dimensions).
    max_iter : int, default 500
    class_weight : "balanced" or None, default "balanced"
    random_state : int, default 0
    """

    kind = "probe"

    def __init__(self, *, aggregator: str = "product", stopword_handling: str = "null", layer: int | None = None,
                 C: float = 0.05, max_iter: int = 500, class_weight: str | None = "balanced",
                 random_state: int = 0) -> None:
        self.aggregator, self.stopword_handling = aggregator, stopword_handling
        self.layer, self.C, self.max_iter, self.class_weight = layer, C, max_iter, class_weight
        self.random_state = random_state
        self._check()


class ClaimHeadDetector(_Detector):
    """The claim head (after the uncertainty heads of Shelmanov et al., EMNLP 2025): per token, the observer's
    previous-token attention of every layer and head (plus its ``attention_window`` columns when the pack has them),
    the top-24 log-probabilities, and the claim features (claim mask, position in the claim, claim length, stopword
    flag), projected and passed through a small transformer encoder whose attention stays within each claim, then a
    per-token read-out; trained like the other detectors through the metric's aggregator on the claim labels
    (:mod:`much_metric.learned._torch`). A claim's token scores depend on its own tokens only.

    Parameters
    ----------
    aggregator, stopword_handling : as :class:`LinearDetector`
    learning_rate : float, default 0.002
    max_epochs, patience : int, default 30, 4
    hidden : int, default 32
        Encoder width (a multiple of 4: the encoder has 4 attention heads).
    layers : int in [1, 8], default 1
        Encoder layers.
    random_state : int, default 0

    Notes
    -----
    Fixed, and recorded in the folder: batch size 16, 4 attention heads, and every ``attention_window`` column of
    the internals pack (none in a pack built without ``--attention-window``).
    """

    kind = "claim_head"

    def __init__(self, *, aggregator: str = "product", stopword_handling: str = "null", learning_rate: float = 0.002,
                 max_epochs: int = 30, patience: int = 4, hidden: int = 32, layers: int = 1,
                 random_state: int = 0) -> None:
        self.aggregator, self.stopword_handling = aggregator, stopword_handling
        self.learning_rate, self.max_epochs, self.patience = learning_rate, max_epochs, patience
        self.hidden, self.layers, self.random_state = hidden, layers, random_state
        self._check()


#: Detector kind -> its estimator class (the CLI's ``--detector`` choices).
ESTIMATORS: dict[str, type[_Detector]] = {cls.kind: cls for cls in (LinearDetector, SequenceDetector, ProbeDetector,
                                                                     ClaimHeadDetector)}
