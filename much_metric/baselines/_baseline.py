"""What one method is: a :class:`Baseline` (its signal-name pattern, what it needs, how it computes token scores)
and a :class:`BaselineSpec` (a signal name resolved to a baseline and its parameters). The registry that finds them
by name is :mod:`much_metric.baselines.registry`."""

from __future__ import annotations

import numbers
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from much_dataset.params import Interval, check_param
from much_dataset.schema import TOP_K
from much_metric.baselines.resource_table import RESOURCES

__all__ = ["LEVELS", "RESOURCES", "Baseline", "BaselineSpec", "PluginComputeError", "Requirements"]

#: What a method scores: ``"token"`` (one value per output token, aggregated into claims by the tables) or ``"claim"``
#: (one value per claim, stored under ``<name>@claim`` and scored as it is, :mod:`much_metric.baselines.claims`).
LEVELS = ("token", "claim")


class PluginComputeError(ValueError):
    """A plugin's baseline (an entry point) raised something other than the toolkit's own input errors while
    computing its signal: named with the signal and the plugin, reported as a failure of that input, not a bug of
    MUCH."""


#: How many of the stored candidates a method reads.
_DEPTH = Interval(numbers.Integral, 0, TOP_K)
_FIELD = re.compile(r"\{(\w+)\}")


@dataclass(frozen=True)
class Requirements:
    """What one method needs besides the answer itself: its one declaration (``Baseline(requirements=...)``).

    Attributes
    ----------
    top_k : int or str, default 24
        How many of the stored candidates (by decreasing probability) it reads: an int in [0, 24] or the name of the
        field of its signal name that gives it (``"delta"``). 0 = only the sampled token's own probability
        (``token_likelihood``); a method that does not say is taken to read all 24. ``much run --top-k K`` scores a
        method only when ``top_k <= K`` (then the view gives exactly its numbers on the full data;
        docs/methods.md#what-a-method-needs) and lists the others as "needs top-N".
    resources : tuple of str
        The resources its ``compute`` takes, names of the resource table
        (:data:`~much_metric.baselines.resource_table.RESOURCE_TABLE`: ``"tokenizer"``, ``"nli"``, ``"samples"``
        ...); each arrives as the keyword of that name.

    A method whose needs depend on its parameters (a learned detector folder that reads an internals pack) declares
    ``requirements=function``, ``function(params) -> Requirements``.

    >>> Requirements(top_k="delta", resources=("tokenizer",))
    Requirements(top_k='delta', resources=('tokenizer',))
    """

    top_k: int | str = TOP_K
    resources: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if isinstance(self.resources, str):
            raise ValueError(f"Requirements: resources must be a tuple of resource names, got {self.resources!r}")
        object.__setattr__(self, "resources", tuple(self.resources))
        unknown = sorted(set(self.resources) - set(RESOURCES))
        if unknown:
            raise ValueError(f"unknown needs {unknown}; choose among {tuple(RESOURCES)}")
        if not isinstance(self.top_k, str):
            _check_top_k(self.top_k, "")


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
    requirements : Requirements or callable, default Requirements()
        What it needs, declared once: the depth of the stored candidates it reads and the resources it takes
        (:class:`Requirements`), or ``requirements(params)`` -> ``Requirements`` when they depend on the
        parameters. Undeclared: all 24 candidates, no resource.
    needs, top_k, needs_of
        The old spelling of ``requirements`` (``needs=(...)``, ``top_k=...``, ``needs_of=function``), still
        accepted for plugins written before it and folded into ``requirements``; not together with it. After
        construction ``needs`` and ``top_k`` read the declaration back (``needs`` is empty and ``top_k`` a function
        when ``requirements`` is one).
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

    Examples
    --------
    A method with one parameter ``k``, scored on the embedded sample (offline). Registering it (:func:`register`
    in a notebook, ``BASELINES = (...)`` in a file of this package, or a ``much.baselines`` entry point) makes
    ``much run --signals top_gap_2`` work; here it is only called:

    >>> import much_dataset
    >>> from much_metric import score
    >>> from much_metric.baselines import Baseline, Requirements, token_arrays
    >>> def top_gap(arrays, *, k):
    ...     # 1 - (p1 - pk): the top candidate barely ahead of the k-th one = uncertain
    ...     p = arrays.probabilities                     # (N_tokens, 24), by decreasing probability
    ...     return 1.0 - (p[:, 0] - p[:, k - 1])         # one score per token, higher = more uncertain
    >>> gap = Baseline(name="top_gap_{k}", compute=top_gap, display="Top gap-{k}", description="1 - (p1 - pk)",
    ...                requirements=Requirements(top_k="k"))
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
    needs: tuple[str, ...] | None = None
    description: str = ""
    params: Mapping[str, str] = field(default_factory=dict)
    defaults: tuple[str, ...] = ()
    options: tuple[str, ...] = ()
    signal_name: Callable[[str, dict[str, Any], dict[str, Any]], str] | None = None
    check: Callable[[dict[str, Any]], None] | None = None
    order: float = 100.0
    metadata: Callable[[dict[str, Any]], Mapping[str, Any]] | None = None
    needs_of: Callable[[dict[str, Any]], Sequence[str]] | None = None
    top_k: int | str | Callable[[dict[str, Any]], int] | None = None
    requirements: Requirements | Callable[[dict[str, Any]], Requirements] | None = None
    level: str = "token"

    def __post_init__(self) -> None:
        from much_dataset.params import InvalidParameterError

        if self.level not in LEVELS:
            raise ValueError(f"Baseline {self.name!r}: level must be one of {LEVELS}, got {self.level!r}")
        if not isinstance(self.name, str) or not re.fullmatch(r"[A-Za-z][\w{}.:-]*", self.name):
            raise ValueError(f"Baseline name must be a signal name or pattern like 'token_entropy_{{delta}}', got "
                             f"{self.name!r}")
        if not callable(self.compute):
            raise InvalidParameterError(f"Baseline {self.name!r}: compute must be callable, got "
                                        f"{type(self.compute).__name__}")
        fields = _FIELD.findall(self.name)
        try:
            requirements = self._declared()
        except ValueError as error:
            raise ValueError(f"Baseline {self.name!r}: {error}") from None
        if isinstance(requirements, Requirements) and isinstance(requirements.top_k, str) \
                and requirements.top_k not in fields:
            raise ValueError(f"Baseline {self.name!r}: top_k={requirements.top_k!r} is not a field of its name")
        if set(self.params) - set(fields):
            raise ValueError(f"Baseline {self.name!r}: params {sorted(set(self.params) - set(fields))} are not "
                             "fields of its name")
        object.__setattr__(self, "requirements", requirements)
        # read back from the one declaration: the resources and depth of the pattern (a function: per instance)
        static = isinstance(requirements, Requirements)
        object.__setattr__(self, "needs", requirements.resources if static else ())
        object.__setattr__(self, "top_k", requirements.top_k if static else (lambda params: _depth(
            requirements(params), params)))
        object.__setattr__(self, "needs_of", None)
        object.__setattr__(self, "defaults", tuple(self.defaults) or (() if fields else (self.name,)))

    def _declared(self) -> Requirements | Callable[[dict[str, Any]], Requirements]:
        """``requirements``, or the old spelling (``needs``, ``top_k``, ``needs_of``) folded into it."""
        old = {key: value for key, value in (("needs", self.needs), ("top_k", self.top_k),
                                             ("needs_of", self.needs_of)) if value is not None}
        if self.requirements is not None:
            if old:
                raise ValueError(f"give requirements alone; {', '.join(old)} is its old spelling")
            if not isinstance(self.requirements, Requirements) and not callable(self.requirements):
                raise ValueError(f"requirements must be a Requirements or a function of the parameters returning "
                                 f"one, got {type(self.requirements).__name__}")
            return self.requirements
        needs, top_k, needs_of = tuple(self.needs or ()), TOP_K if self.top_k is None else self.top_k, self.needs_of
        if needs_of is None and not callable(top_k):
            return Requirements(top_k=top_k, resources=needs)
        Requirements(resources=needs)  # the static part is checked now

        def requirements(params: dict[str, Any]) -> Requirements:
            depth = top_k(params) if callable(top_k) else top_k
            return Requirements(top_k=depth, resources=tuple(needs_of(params)) if needs_of is not None else needs)

        return requirements

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
    def requirements(self) -> Requirements:
        """What this instance needs, its depth a number: the baseline's declaration at these parameters."""
        declared = self.baseline.requirements
        if isinstance(declared, Requirements):
            return Requirements(top_k=_depth(declared, self.params, f"signal {self.signal!r}"),
                                resources=declared.resources)
        try:
            found = declared(dict(self.params))
        except ValueError as error:
            raise ValueError(f"signal {self.signal!r}: {error}") from None
        if not isinstance(found, Requirements):
            raise ValueError(f"signal {self.signal!r}: its requirements function returned a "
                             f"{type(found).__name__}, not a Requirements")
        return Requirements(top_k=_depth(found, self.params, f"signal {self.signal!r}"), resources=found.resources)

    @property
    def needs(self) -> tuple[str, ...]:
        """The resources this instance takes (``requirements.resources``)."""
        return self.requirements.resources

    @property
    def top_k(self) -> int:
        """How many of the stored candidates this instance reads (0: only the sampled token's probability)."""
        return self.requirements.top_k

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


def _depth(requirements: Requirements, params: Mapping[str, Any], owner: str = "requirements") -> int:
    """The depth of ``requirements`` at ``params`` (a field name read from them), checked."""
    declared = params[requirements.top_k] if isinstance(requirements.top_k, str) else requirements.top_k
    return _check_top_k(declared, owner)


def _check_top_k(value: Any, owner: str) -> int:
    return int(check_param("top_k", value, _DEPTH, owner=owner or None, hint="how many stored candidates it reads"))


def _convert(text: str) -> Any:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text
