"""What a method needs, said the same way by every table: "needs top-24", "needs an NLI model".

A method's needs are declared once, in its registry entry (:class:`~much_metric.baselines.Baseline`): how many of
the stored candidates it reads (``top_k``, 0 = only the sampled token's probability) and the resources it takes
(``needs``, among :data:`~much_metric.baselines.registry.RESOURCES`). :func:`unmet_needs` compares them with what a
run has -- an input view of K candidates (``much run --top-k K``) and the resources that loaded -- and
:func:`needs_text` writes them for a table.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from much_dataset.schema import TOP_K
from much_metric.baselines._baseline import RESOURCES, Baseline, BaselineSpec

__all__ = ["declared_needs", "depth_label", "needs_text", "unmet_needs"]


def depth_label(baseline: Baseline) -> str:
    """How deep a registered pattern reads, before its parameters are known: ``"top-1"``, ``"top-<delta>"``,
    ``"top-?"`` (a function of the parameters)."""
    declared = baseline.top_k
    if isinstance(declared, str):
        return f"top-<{declared}>"
    return "top-?" if callable(declared) else f"top-{declared}"


def declared_needs(spec: BaselineSpec) -> tuple[str, ...]:
    """Every need of one signal as table words, the top-k depth first: ``("top-10", "an NLI model")``;
    ``("the sampled token's probability",)`` for a method that reads no candidate and nothing else."""
    depth = spec.top_k
    words = [f"top-{depth}" if depth else "the sampled token's probability"]
    return (*words, *(RESOURCES[need] for need in spec.needs))


def unmet_needs(spec: BaselineSpec, *, top_k: int | None = None, available: Collection[str] = ()) -> tuple[str, ...]:
    """The needs of ``spec`` a run cannot meet, as table words (empty: it can run).

    Parameters
    ----------
    spec : BaselineSpec
        A resolved signal (:func:`~much_metric.baselines.resolve`).
    top_k : int or None
        Candidates per token the run's input view holds (None: the stored 24).
    available : collection of str
        The resources (keys of ``RESOURCES``) the run has.

    Examples
    --------
    >>> from much_metric.baselines import resolve
    >>> from much_metric.baselines.needs import needs_text, unmet_needs
    >>> unmet_needs(resolve("token_entropy_24"), top_k=5), unmet_needs(resolve("token_likelihood"), top_k=0)
    (('top-24',), ())
    >>> needs_text(unmet_needs(resolve("ccp_10_8"), top_k=5, available=("tokenizer",)))
    'needs top-10, an NLI model'
    """
    have = TOP_K if top_k is None else top_k
    missing = [f"top-{spec.top_k}"] if spec.top_k > have else []
    return (*missing, *(RESOURCES[need] for need in spec.needs if need not in available))


def needs_text(needs: Sequence[str]) -> str:
    """``"needs top-24, an NLI model"`` (empty for no need)."""
    return f"needs {', '.join(needs)}" if needs else ""
