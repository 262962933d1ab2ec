"""What one method is: a :class:`Baseline` (its signal-name pattern, what it needs, how it computes token scores)
and a :class:`BaselineSpec` (a signal name resolved to a baseline and its parameters). The registry that finds them
by name is :mod:`much_metric.baselines.registry`."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from much_dataset.schema import TOP_K

__all__ = ["LEVELS", "RESOURCES", "Baseline", "BaselineSpec", "PluginComputeError"]

#: What a method scores: ``"token"`` (one value per output token, aggregated into claims by the tables) or ``"claim"``
#: (one value per claim, stored under ``<name>@claim`` and scored as it is, :mod:`much_metric.baselines.claims`).
LEVELS = ("token", "claim")


class PluginComputeError(ValueError):
    """A plugin's baseline (an entry point) raised something other than the toolkit's own input errors while
    computing its signal: named with the signal and the plugin, reported as a failure of that input, not a bug of
    MUCH."""


#: What a baseline may need besides the stored probabilities -- one entry per kind of resource: its name (the keyword
#: ``compute`` receives it under, and the field of :class:`~much_metric.baselines.ResourceOptions`) and how a table
#: or an error says it is missing ("needs an NLI model"). The generating LLM's tokenizer (or a per-sample decoder), an
#: NLI scorer, KTC's token-neighbour statistics, an internals pack (:func:`much_dataset.load_internals`: attention and
#: hidden states per output token; RAUQ, probes), the samples (N further answers per question,
#: :class:`much_metric.baselines.samples.SampleSet`), the reference (the Wikipedia article and RAG chunks of
#: ``builder wiki``/``context``, :class:`much_metric.baselines.reference.ReferenceSet`) and a text encoder
#: (:mod:`much_metric.baselines.encoders`). A new kind of resource is one entry here (and its loading in
#: ``ResourceOptions``). How deep into the top-24 candidates a method reads is not a resource: ``Baseline.top_k``.
RESOURCES: dict[str, str] = {
    "tokenizer": "the generating LLM's tokenizer",
    "nli": "an NLI model",
    "neighbours": "token-neighbour statistics",
    "internals": "an internals pack",
    "samples": "samples of every row (python -m builder samples; much run --samples PACK)",
    "reference": "the reference articles (python -m builder wiki / context; much run --reference FOLDER)",
    "encoder": "a text encoder (much run --encoder NAME)",
}

_FIELD = re.compile(r"\{(\w+)\}")


@dataclass(frozen=True)
class Baseline:
    """One uncertainty method: token-level (one score per output token) or claim-level (``level="claim"``).

    Parameters
    ----------
    name : str
        Signal name, or a pattern with ``{field}`` parameters (``token_entropy_{delta}``). Signal files and tables
        use the concrete name (``token_entropy_24``).
    compute : callable
        ``compute(arrays, **params, **resources)`` -> float array of shape (N_tokens,) over the split's
        concatenated tokens (or a list of per-sample arrays). ``arrays`` is a
        :class:`much_metric.baselines.TokenArrays` (sample offsets, sampled token ids, top-K candidate ids and
        probabilities); ``params`` are the fields of the name; ``resources`` are those of ``needs``.
        Higher = more uncertain.
    display : str or callable, optional
        Table label, may use the fields (``"Token Entropy-{delta}"``), or a function of the fields returning the
        label; defaults to the name.
    level : {"token", "claim"}, default "token"
        ``"claim"``: a claim-level method. ``compute`` returns, per sample, one value per claim (``token_chunks``
        order, EOS claim included; :func:`much_metric.baselines.claims.claim_signal`); its signal is stored under
        its name followed by ``@claim`` and every table scores it without a token-to-claim aggregator.
    needs : tuple of str
        Among :data:`RESOURCES`.
    top_k : int, str or callable, default 24
        How many of the stored candidates (by decreasing probability) the method reads: an int in [0, 24], the name
        of the field that gives it (``"delta"``), or ``top_k(params)`` -> int. 0 = only the sampled token's own
        probability (``token_likelihood``). A method that does not say is taken to read all 24. ``much run --top-k K``
        scores a method only when ``top_k <= K`` (then on the view it gives exactly the numbers of the full data;
        docs/methods.md#what-a-method-needs) and lists the others as "needs top-N".
    description : str
        One line for ``much run --help`` (formula and source).
    params : mapping of str to str
        Regular expressions of fields that are not plain integers.
    defaults : tuple of str
        Concrete signal names run by the group ``all`` (and ``all-probability`` when ``needs`` is empty); a name
        without fields defaults to itself.
    options : tuple of str
        Run-wide options the runner forwards when set (``reference_window`` for CCP/SAR).
    signal_name : callable, optional
        ``signal_name(name, params, resources)`` -> the stored name when it depends on a resource (CCP/SAR add the
        NLI model's suffix).
    order : float, default 100
        Position in tables and help (table 3's rows: CCP 10, SAR 20, Max Likelihood 30, Token Likelihood 40, Token
        Entropy 50); ties keep registration order.
    check : callable, optional
        ``check(params)`` raises ``ValueError`` for parameters out of range; called when a name is resolved, so a
        bad ``--signals`` fails before any work.
    metadata : callable, optional
        ``metadata(params)`` -> a JSON-able mapping stored with the signal (its file's signal metadata). A method
        trained on MUCH rows gives ``training_generation_ids`` (sorted): every evaluation leaves those rows out of
        that signal unless asked to include them (see :mod:`much_metric.signals._training`).
    needs_of : callable, optional
        ``needs_of(params)`` -> the resources (among :data:`RESOURCES`) one instance needs when they depend on its
        parameters (a learned detector folder that reads an internals pack); replaces ``needs`` for that instance.

    Examples
    --------
    A method with one parameter ``k``, scored on the embedded sample (offline). Registering it (:func:`register`
    in a notebook, ``BASELINES = (...)`` in a file of this package, or a ``much.baselines`` entry point) makes
    ``much run --signals top_gap_2`` work; here it is only called:

    >>> import much_dataset
    >>> from much_metric import score
    >>> from much_metric.baselines import Baseline, token_arrays
    >>> def top_gap(arrays, *, k):
    ...     # 1 - (p1 - pk): the top candidate barely ahead of the k-th one = uncertain
    ...     p = arrays.probabilities                     # (N_tokens, 24), by decreasing probability
    ...     return 1.0 - (p[:, 0] - p[:, k - 1])         # one score per token, higher = more uncertain
    >>> gap = Baseline(name="top_gap_{k}", compute=top_gap, display="Top gap-{k}", description="1 - (p1 - pk)")
    >>> gap.match("top_gap_2"), gap.label({"k": 2}), gap.match("token_entropy_24")
    ({'k': 2}, 'Top gap-2', None)
    >>> data = much_dataset.load("sample", split="test")
    >>> arrays = token_arrays(data)
    >>> token_scores = arrays.split(gap.compute(arrays, k=2))
    >>> result = score(token_scores, data["token_chunks"], data["labels"], data["stopword_mask"])
    >>> result.n_claims, 0.5 < result.roc_auc < 1.0
    (10320, True)
    """

    name: str
    compute: Callable[..., Any]
    display: str | Callable[[Mapping[str, Any]], str] | None = None
    needs: tuple[str, ...] = ()
    description: str = ""
    params: Mapping[str, str] = field(default_factory=dict)
    defaults: tuple[str, ...] = ()
    options: tuple[str, ...] = ()
    signal_name: Callable[[str, dict[str, Any], dict[str, Any]], str] | None = None
    check: Callable[[dict[str, Any]], None] | None = None
    order: float = 100.0
    metadata: Callable[[dict[str, Any]], Mapping[str, Any]] | None = None
    needs_of: Callable[[dict[str, Any]], Sequence[str]] | None = None
    top_k: int | str | Callable[[dict[str, Any]], int] = TOP_K
    level: str = "token"

    def __post_init__(self) -> None:
        if self.level not in LEVELS:
            raise ValueError(f"Baseline {self.name!r}: level must be one of {LEVELS}, got {self.level!r}")
        if not isinstance(self.name, str) or not re.fullmatch(r"[A-Za-z][\w{}.:-]*", self.name):
            raise ValueError(f"Baseline name must be a signal name or pattern like 'token_entropy_{{delta}}', got "
                             f"{self.name!r}")
        if not callable(self.compute):
            raise TypeError(f"Baseline {self.name!r}: compute must be callable, got {type(self.compute).__name__}")
        unknown = set(self.needs) - set(RESOURCES)
        if unknown:
            raise ValueError(f"Baseline {self.name!r}: unknown needs {sorted(unknown)}; choose among "
                             f"{tuple(RESOURCES)}")
        fields = _FIELD.findall(self.name)
        if isinstance(self.top_k, str) and self.top_k not in fields:
            raise ValueError(f"Baseline {self.name!r}: top_k={self.top_k!r} is not a field of its name")
        if not isinstance(self.top_k, str) and not callable(self.top_k):
            _check_top_k(self.top_k, f"Baseline {self.name!r}")
        if set(self.params) - set(fields):
            raise ValueError(f"Baseline {self.name!r}: params {sorted(set(self.params) - set(fields))} are not "
                             "fields of its name")
        object.__setattr__(self, "needs", tuple(self.needs))
        object.__setattr__(self, "defaults", tuple(self.defaults) or (() if fields else (self.name,)))

    @property
    def fields(self) -> tuple[str, ...]:
        return tuple(_FIELD.findall(self.name))

    def match(self, signal: str) -> dict[str, Any] | None:
        """The parameters of ``signal`` if it is an instance of this baseline's name, else None."""
        match = self._pattern().fullmatch(signal)
        if match is None:
            return None
        return {key: _convert(value) for key, value in match.groupdict().items()}

    def _pattern(self) -> re.Pattern[str]:
        parts, last = [], 0
        for found in _FIELD.finditer(self.name):
            parts.append(re.escape(self.name[last:found.start()]))
            key = found.group(1)
            parts.append(f"(?P<{key}>{self.params.get(key, r'[0-9]+')})")
            last = found.end()
        parts.append(re.escape(self.name[last:]))
        return re.compile("".join(parts))

    def label(self, params: Mapping[str, Any]) -> str:
        """The table label of one instance (``Token Entropy-24``)."""
        if callable(self.display):
            return self.display(params)
        return (self.display or self.name).format(**params)


@dataclass(frozen=True)
class BaselineSpec:
    """A resolved signal name: the baseline and its parameters."""

    signal: str
    baseline: Baseline
    params: dict[str, Any]
    #: where the baseline was registered (:func:`much_metric.baselines.registry.origin`): a plugin's failures are
    #: reported as the plugin's
    origin: str = ""

    @property
    def needs(self) -> tuple[str, ...]:
        if self.baseline.needs_of is None:
            return self.baseline.needs
        needs = tuple(self.baseline.needs_of(dict(self.params)))
        unknown = set(needs) - set(RESOURCES)
        if unknown:
            raise ValueError(f"signal {self.signal!r} needs {sorted(unknown)}, not among {tuple(RESOURCES)}")
        return needs

    @property
    def top_k(self) -> int:
        """How many of the stored candidates this instance reads (0: only the sampled token's probability)."""
        declared = self.baseline.top_k
        if isinstance(declared, str):
            declared = self.params[declared]
        elif callable(declared):
            declared = declared(dict(self.params))
        return _check_top_k(declared, f"signal {self.signal!r}")

    @property
    def display(self) -> str:
        return self.baseline.label(self.params)

    def stored_name(self, resources: Mapping[str, Any]) -> str:
        """The signal name written to files (a baseline may add a resource's suffix, e.g. the NLI model's; a
        claim-level one ends with ``@claim``)."""
        from much_metric.signals import CLAIM_SUFFIX

        name = self.signal if self.baseline.signal_name is None else \
            self.baseline.signal_name(self.signal, dict(self.params), dict(resources))
        if self.baseline.level == "claim" and not name.endswith(CLAIM_SUFFIX):
            name += CLAIM_SUFFIX
        return name

    def split(self, arrays: Any, flat: np.ndarray) -> list[np.ndarray]:
        """:meth:`compute`'s flat values -> per-sample arrays (per token, or per claim for a claim-level method)."""
        if self.baseline.level == "claim":
            from much_metric.baselines.claims import split_claims

            return split_claims(arrays, flat)
        return arrays.split(flat)

    def signal_metadata(self) -> dict[str, Any]:
        """The metadata stored with this signal ({} for most baselines; a learned one's training rows)."""
        return {} if self.baseline.metadata is None else dict(self.baseline.metadata(dict(self.params)))

    def compute(self, arrays: Any, resources: Mapping[str, Any], options: Mapping[str, Any]) -> np.ndarray:
        """Flat float64 scores (N_tokens,) of this signal -- (N_claims,) for a claim-level method, all samples'
        claims in order -- checked against the shape the baseline must return."""
        kwargs = {**self.params, **{need: resources.get(need) for need in self.needs}}
        kwargs.update({key: options[key] for key in self.baseline.options if key in options})
        try:
            values = self.baseline.compute(arrays, **kwargs)
        except (ValueError, OSError, ImportError):
            raise  # the toolkit's own input errors name the sample and the field already
        except Exception as error:
            where = self.origin
            message = f"signal {self.signal!r}: its computation raised {type(error).__name__}: {error}"
            if where.startswith("entry point"):
                raise PluginComputeError(f"{message} (the plugin's {where}; see its documentation, or leave the "
                                         "signal out)") from error
            raise RuntimeError(message) from error
        if self.baseline.level == "claim":
            return self._claim_values(arrays, values)
        if isinstance(values, np.ndarray) and values.ndim == 1:
            flat = values
        elif isinstance(values, Sequence) and len(values) == arrays.n_samples:
            lengths = [len(v) for v in values]
            expected = np.diff(arrays.offsets).tolist()
            for index, (got, want) in enumerate(zip(lengths, expected, strict=True)):
                if got != want:
                    raise ValueError(f"baseline {self.signal!r} returned {got} scores for generation_id="
                                     f"{arrays.generation_ids[index]!r}, which has {want} output tokens")
            flat = np.concatenate([np.asarray(v, dtype=np.float64) for v in values]) if values else np.zeros(0)
        else:
            raise TypeError(f"baseline {self.signal!r} must return a 1-D array of {arrays.n_tokens} token scores or "
                            f"a list of {arrays.n_samples} per-sample arrays, got {type(values).__name__}")
        flat = np.asarray(flat, dtype=np.float64)
        if flat.shape != (arrays.n_tokens,):
            raise ValueError(f"baseline {self.signal!r} returned {flat.shape[0]} token scores for a split of "
                             f"{arrays.n_tokens} output tokens")
        return flat

    def _claim_values(self, arrays: Any, values: Any) -> np.ndarray:
        """A claim-level method's per-sample claim scores, checked, as one flat (N_claims,) array."""
        from much_metric.baselines.claims import claim_signal

        if not isinstance(values, Sequence | np.ndarray):
            raise TypeError(f"baseline {self.signal!r} is claim-level: it must return a list of {arrays.n_samples} "
                            f"per-sample arrays of claim scores, got {type(values).__name__}")
        claims = claim_signal(arrays, values, f"baseline {self.signal!r}")
        return np.concatenate(claims) if claims else np.zeros(0)


def _check_top_k(value: Any, owner: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or not 0 <= value <= TOP_K:
        raise ValueError(f"{owner}: top_k must be an integer in [0, {TOP_K}] (how many stored candidates it reads), "
                         f"got {value!r}")
    return int(value)


def _convert(text: str) -> Any:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text
