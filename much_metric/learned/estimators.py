"""The detectors as scikit-learn-shaped estimators: hyper-parameters in the constructor, then ``fit``.

``LinearDetector(...).fit(train, validation).save(folder)`` writes a detector folder;
:func:`~much_metric.learned.load_detector` reads one back; ``much run --signals learned:FOLDER`` scores it.

Each estimator is generated from its kind's record (:class:`~much_metric.learned.Kind`): the constructor takes
``aggregation`` (how token scores become claim scores in the loss, recorded in the folder), the kind's
hyper-parameters with their defaults, and ``random_state``, all keyword-only, and stores them unchanged; each
constraint is the record's (:mod:`much_dataset.params`), checked when the estimator is built and again when it is
fitted. ``get_params`` / ``set_params`` follow scikit-learn, so ``sklearn.base.clone`` works. A kind added by a
plugin gets its estimator from :func:`estimator_class`.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

from much_dataset.params import InvalidParameterError, check_param
from much_metric.learned._kinds import BUILTIN_KINDS, KINDS, SEED, Kind, kind_of
from much_metric.scoring import Aggregation
from much_metric.scoring.engine import as_aggregation

__all__ = ["ESTIMATORS", "ClaimHeadDetector", "LearnedDetector", "LinearDetector", "ProbeDetector",
           "SequenceDetector", "estimator_class"]

#: The estimators' own parameters besides the kind's hyper-parameters (first and last in every signature).
_FIRST, _LAST = ("aggregation",), ("random_state",)
_DEFAULTS = {"aggregation": "product", "random_state": 0}


def _aggregation(owner: str, value: Any) -> Aggregation:
    """``value`` (an Aggregation or an aggregator name) as the Aggregation the training loss uses; only the
    aggregator and the stopword rule are a detector's (the EOS claim is always left out, scores are uncertainties)."""
    aggregation = as_aggregation(value, owner)
    if not aggregation.drop_last_chunk or aggregation.score_type != "uncertainty":
        raise InvalidParameterError(f"{owner}: aggregation must keep drop_last_chunk=True and score_type="
                                    f"'uncertainty' (a detector's token scores are uncertainties and the EOS claim is "
                                    f"never a claim), got {aggregation!r}")
    return aggregation


def _constructor(kind: Kind) -> Callable[..., None]:
    """``__init__`` of the estimator of ``kind``: keyword-only ``aggregation``, the kind's hyper-parameters and
    ``random_state``, with their defaults, as ``inspect.signature`` (and scikit-learn's ``get_params``) read it."""
    names = (*_FIRST, *kind.defaults, *_LAST)
    defaults = {**_DEFAULTS, **kind.defaults}

    def __init__(self, **params: Any) -> None:
        params = _renamed_aggregation(type(self).__name__, params)
        unknown = sorted(set(params) - set(names))
        if unknown:
            raise TypeError(f"{type(self).__name__}.__init__() got an unexpected keyword argument {unknown[0]!r}")
        for name in names:
            setattr(self, name, params.get(name, defaults[name]))
        self._check()

    __init__.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        + [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=defaults[name]) for name in names])
    __init__.__doc__ = f"Hyper-parameters of a {kind.name} detector (keyword-only): {', '.join(names)}."
    return __init__


def _renamed_aggregation(owner: str, params: dict[str, Any]) -> dict[str, Any]:
    """The flat ``aggregator=`` / ``stopword_handling=`` of before one ``aggregation=`` everywhere: folded into an
    :class:`~much_metric.scoring.Aggregation`, with a ``FutureWarning``."""
    old = {name: params.pop(name) for name in ("aggregator", "stopword_handling") if name in params}
    if not old:
        return params
    if "aggregation" in params:
        raise InvalidParameterError(f"{owner}: pass aggregation=Aggregation(...) alone, not with "
                                    f"{' and '.join(f'{name}=' for name in old)}")
    warnings.warn(f"{owner}({', '.join(f'{k}=...' for k in old)}) is deprecated and will be removed: pass "
                  "aggregation=Aggregation(aggregator=..., stopword_handling=...) (or an aggregator name), the one "
                  "aggregation option of the toolkit", FutureWarning, stacklevel=3)
    return {**params, "aggregation": Aggregation(**old)}


class LearnedDetector:
    """An estimator of one detector kind (a subclass per kind: ``class MyDetector(LearnedDetector, kind="name")``,
    or :func:`estimator_class`). Its constructor is generated from the kind's record: keyword-only ``aggregation``,
    the kind's hyper-parameters and ``random_state``, each stored as the attribute of that name (the subclasses'
    ``Attributes``), as scikit-learn's estimators do."""

    kind: ClassVar[str] = ""
    _record: ClassVar[Kind | None] = None

    def __init_subclass__(cls, *, kind: str | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if kind is not None:
            record = BUILTIN_KINDS.get(kind) or kind_of(kind)
            cls.kind, cls._record = kind, record
            cls.__init__ = _constructor(record)  # type: ignore[method-assign]

    def __init__(self, **params: Any) -> None:
        raise TypeError("LearnedDetector is the base of the detector estimators: use LinearDetector, "
                        "SequenceDetector, ProbeDetector, ClaimHeadDetector or estimator_class(kind)")

    @classmethod
    def _names(cls) -> tuple[str, ...]:
        return (*_FIRST, *kind_of(cls.kind).defaults, *_LAST)

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The constructor's parameters, as given (scikit-learn's protocol; nothing nested to expand)."""
        return {name: getattr(self, name) for name in self._names()}

    def set_params(self, **params: Any) -> LearnedDetector:
        """Set parameters (checked again); returns ``self``."""
        params = _renamed_aggregation(type(self).__name__, params)
        unknown = set(params) - set(self._names())
        if unknown:
            raise ValueError(f"{type(self).__name__} has no parameter {sorted(unknown)[0]!r}; it has "
                             f"{', '.join(self._names())}")
        for name, value in params.items():
            setattr(self, name, value)
        self._check()
        return self

    def _check(self) -> dict[str, Any]:
        """The training settings: the aggregator and stopword rule of ``aggregation``, the hyper-parameters and
        the seed, each checked against its constraint (``<Class>: <name> must be ..., got ...``)."""
        owner = type(self).__name__
        kind = kind_of(self.kind)
        aggregation = _aggregation(owner, self.aggregation)
        hyper = {name: getattr(self, name) for name in kind.defaults}
        kind.check_hyperparameters(hyper, owner=owner)
        check_param("random_state", self.random_state, SEED, owner=owner)
        return {"aggregator": aggregation.aggregator, "stopword_handling": aggregation.stopword_handling, **hyper,
                "random_state": self.random_state}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self.get_params().items())})"

    def fit(self, train: Any, validation: Any, *, internals: Any = None, checkpoint: str | Path | None = None,
            protocol: dict[str, Any] | None = None, progress: bool = True) -> LearnedDetector:
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

        detector, history = fit_detector(kind_of(self.kind), self._check(), train, validation,
                                         checkpoint=checkpoint, progress=progress, internals=internals)
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

    def sample_scores(self, data: Any, internals: Any = None) -> Any:
        """One array of token uncertainties per sample (see ``Detector.sample_scores``): what ``score`` takes."""
        return self._fitted().sample_scores(data, internals)


class LinearDetector(LearnedDetector, kind="linear"):
    """Logistic regression on the token-probability features of :func:`~much_metric.learned.token_features`,
    trained through the metric's claim aggregator on the claim labels (see :mod:`much_metric.learned._torch`).

    Attributes
    ----------
    aggregation : Aggregation or str, default "product"
        The claim score of the loss (an :class:`~much_metric.Aggregation`: aggregator and stopword rule, or an
        aggregator name), recorded in the folder (score the detector with the same one).
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


class SequenceDetector(LearnedDetector, kind="sequence"):
    """A causal one-layer GRU over each token's top-24 log-probabilities (:func:`~much_metric.learned.sequence_inputs`)
    with a per-token read-out, trained through the metric's claim aggregator (see :mod:`much_metric.learned._torch`).

    Parameters are those of :class:`LinearDetector` (defaults: learning_rate 0.005, batch_size 32, max_epochs 15,
    patience 3), plus ``hidden`` : int in [1, 1024], default 32, the GRU's state size.
    """


class ProbeDetector(LearnedDetector, kind="probe"):
    """A linear probe on one hidden layer of an internals pack: scikit-learn's L2 logistic regression on the
    standardised hidden state of every token of a labelled claim (its claim's label; stopwords and the last chunk
    left out), stored as a linear detector folder (``linear.weight``, ``linear.bias`` and the standardisation in
    safetensors), so its token logit is the regression's ``decision_function`` and its score ``predict_proba``.
    ``fit(train, validation, internals=PACK)``; the validation part gives the folder's validation numbers.

    Attributes
    ----------
    aggregation : as :class:`LinearDetector` (how the folder is scored)
    layer : int or None, default None
        The ``hidden_states`` index read (one of the pack's ``hidden_layers``; None: the middle one).
    C : float > 0, default 0.05
        Inverse L2 strength (strong: tens of thousands of tokens, hundreds of dimensions).
    max_iter : int, default 500
    class_weight : "balanced" or None, default "balanced"
    random_state : int, default 0
    """


class ClaimHeadDetector(LearnedDetector, kind="claim_head"):
    """The claim head (after the uncertainty heads of Shelmanov et al., EMNLP 2025): per token, the observer's
    previous-token attention of every layer and head (plus its ``attention_window`` columns when the pack has them),
    the top-24 log-probabilities, and the claim features (claim mask, position in the claim, claim length, stopword
    flag), projected and passed through a small transformer encoder whose attention stays within each claim, then a
    per-token read-out; trained like the other detectors through the metric's aggregator on the claim labels
    (:mod:`much_metric.learned._torch`). A claim's token scores depend on its own tokens only.

    Attributes
    ----------
    aggregation : as :class:`LinearDetector`
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


_CLASSES: dict[str, type[LearnedDetector]] = {cls.kind: cls for cls in (LinearDetector, SequenceDetector,
                                                                         ProbeDetector, ClaimHeadDetector)}


def estimator_class(kind: str) -> type[LearnedDetector]:
    """The estimator of the detector kind ``kind``: the toolkit's class for a built-in kind, else a class generated
    from the kind's record (named ``<Kind>Detector``, its docstring the record's ``description``), made once per
    record (a kind registered again under the same name gets a new class)."""
    record = kind_of(kind)
    cls = _CLASSES.get(kind)
    if cls is None or cls._record is not record:
        name = "".join(part.capitalize() for part in record.name.split("_")) + "Detector"
        cls = _CLASSES[kind] = type(name, (LearnedDetector,), {"__doc__": record.description or None,
                                                                "__module__": __name__}, kind=kind)
    return cls


class _Estimators(Mapping[str, type[LearnedDetector]]):
    """Detector kind -> its estimator class, for every kind of :data:`~much_metric.learned.KINDS`."""

    def __getitem__(self, kind: str) -> type[LearnedDetector]:
        if kind not in KINDS:
            raise KeyError(kind)
        return estimator_class(kind)

    def __iter__(self) -> Iterator[str]:
        return iter(KINDS)

    def __len__(self) -> int:
        return len(KINDS)


#: Detector kind -> its estimator class (the CLI's ``--detector`` choices).
ESTIMATORS: Mapping[str, type[LearnedDetector]] = _Estimators()
