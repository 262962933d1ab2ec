"""Batched, de-duplicated NLI inference for CCP and SAR.

CCP and SAR turn every generated token into a few (premise, hypothesis) pairs; a MUCH split yields hundreds of
thousands of them. :class:`NliScorer` runs a whole split's pairs at once: identical pairs are run once, each
distinct text is tokenized once (:mod:`much_metric.baselines._pair_encoding`), the distinct pairs are sorted by
token length and cut into batches of at most ``batch_size`` pairs and ``max_batch_tokens`` padded tokens, batches
run under ``torch.inference_mode`` (float16 on GPU by default), and the class probabilities are scattered back to
the input order. The result equals running the pairs one at a time (up to float rounding of padded batches;
tested).

Labels are read from the model's own ``config.id2label`` by name (:func:`nli_label_indices`) -- never hard-coded:
the reference hard-coded {0: contradiction, 1: entailment} for a model whose hub labels are {0: entailment,
1: not_entailment}, inverting it (docs/reference-behaviour.md#nli-label-mapping).

Any object with an ``id2label`` mapping and a ``predict_proba(premises, hypotheses) -> (n_pairs, n_labels)``
method can stand in for :class:`NliScorer` (e.g. a stub in tests, or a remote service).
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from much_dataset.params import POSITIVE_INT, InvalidParameterError, check_param
from much_metric._progress import nested_bar_disabled
from much_metric.baselines._pair_encoding import (
    EncodedPairs,
    infer_pair_template,
    matches_tokenizer,
    plain_encode,
    template_encode,
)

__all__ = [
    "pair_generation_ids",
    "run_nli",
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_MAX_BATCH_TOKENS",
    "DEFAULT_NLI_MODEL",
    "REFERENCE_NLI_SIZES",
    "NliBatching",
    "NliLabels",
    "NliScorer",
    "nli_label_indices",
    "load_nli",
    "nli_signal_suffix",
    "resolve_nli",
]

#: The NLI model of the paper and of the original CCP (size "L", no suffix in signal names).
DEFAULT_NLI_MODEL = "microsoft/deberta-large-mnli"
#: The reference's three NLI models and the suffix their signals carry (``ccp_24_8_M`` ...).
REFERENCE_NLI_SIZES = {
    "microsoft/deberta-large-mnli": "",
    "microsoft/deberta-base-mnli": "_M",
    "MoritzLaurer/DeBERTa-v3-xsmall-mnli-fever-anli-ling-binary": "_S",
}
#: Most pairs per forward pass (see :class:`NliScorer`).
DEFAULT_BATCH_SIZE = 256
#: Most padded tokens (pairs x longest pair) per forward pass (see :class:`NliScorer`).
DEFAULT_MAX_BATCH_TOKENS = 16_384
#: Assembled pairs of each call checked against ``tokenizer(premise, hypothesis)``: the first ones and the longest.
_CHECKED_PAIRS = 2


@dataclass(frozen=True)
class NliLabels:
    """Column of each NLI class in the model's output.

    ``contradiction`` is the class CCP counts against the token: "contradiction" for 3-way models, the
    "not_entailment" class for binary ones (what the reference intended for its binary model). ``neutral`` is
    None for binary models.
    """

    entailment: int
    contradiction: int
    neutral: int | None
    n_labels: int


def _kind(label: str) -> str | None:
    name = re.sub(r"[^a-z]", "", str(label).lower())
    if name.startswith(("not", "non")) and "entail" in name:
        return "contradiction"  # not_entailment / non-entailment: the negative class of a binary model
    if name.startswith("entail"):
        return "entailment"
    if name.startswith("contradict"):
        return "contradiction"
    if name.startswith("neutral"):
        return "neutral"
    return None


def nli_label_indices(id2label: Mapping[Any, str]) -> NliLabels:
    """Find the entailment / contradiction / neutral columns from ``config.id2label``.

    Names are matched case-insensitively by prefix: ``entail*`` -> entailment, ``contradict*`` -> contradiction,
    ``neutral*`` -> neutral, ``not_entail*`` / ``non-entail*`` -> the non-entailment class (used as contradiction).

    Raises
    ------
    ValueError
        If a label cannot be recognised (e.g. ``LABEL_0``), a class is given twice, or the entailment or the
        contradiction/non-entailment class is missing.
    """
    if not isinstance(id2label, Mapping) or not id2label:
        raise ValueError(f"id2label must be a non-empty mapping from class index to name, got {id2label!r}")
    found: dict[str, int] = {}
    indices = sorted(int(i) for i in id2label)
    if indices != list(range(len(indices))):
        raise ValueError(f"id2label keys must be 0..n-1, got {sorted(id2label)}")
    for index in indices:
        label = id2label[index] if index in id2label else id2label[str(index)]
        kind = _kind(label)
        if kind is None:
            raise ValueError(
                f"cannot infer the NLI meaning of label {label!r} (id2label={dict(id2label)}); expected names like "
                "entailment / neutral / contradiction / not_entailment -- fix the model's config.id2label"
            )
        if kind in found:
            raise ValueError(f"two labels map to {kind}: {dict(id2label)}")
        found[kind] = index
    for needed in ("entailment", "contradiction"):
        if needed not in found:
            raise ValueError(f"the NLI model has no {needed} class (id2label={dict(id2label)})")
    return NliLabels(found["entailment"], found["contradiction"], found.get("neutral"), len(indices))


def _torch_dtype(dtype: Any, device: str):
    import torch

    if dtype is None:
        # Half precision is what makes NLI cheap on GPU; CPUs gain little from it and lose accuracy.
        return torch.float16 if device.startswith("cuda") else torch.float32
    if isinstance(dtype, str):
        if not hasattr(torch, dtype):
            raise ValueError(f"unknown torch dtype {dtype!r} (float32, float16, bfloat16)")
        return getattr(torch, dtype)
    return dtype


@dataclass(frozen=True, kw_only=True)
class NliBatching:
    """How :class:`NliScorer` cuts a split's pairs into forward passes.

    Attributes
    ----------
    batch_size : int, default 256
        Most distinct pairs per forward pass.
    max_batch_tokens : int, default 16384
        Most padded tokens per forward pass: pairs x longest pair of the batch (a longer single pair runs alone).
        Every forward pass has a fixed cost (Python, kernel launches), so short pairs should go in large batches;
        long ones in the same number would waste compute on padding and take memory that grows with the padded
        size (attention quadratically). The sorted pairs fill a batch until either limit is reached.
    deduplicate, sort_by_length : bool, default True
        Run identical pairs once / sort by length before batching. Switching them off only costs time (the
        probabilities are the same up to float rounding of padded batches).

    Examples
    --------
    >>> from much_metric.baselines import NliBatching
    >>> NliBatching(batch_size=32).max_batch_tokens
    16384
    >>> NliBatching(batch_size=0)
    Traceback (most recent call last):
    ...
    much_dataset.params.InvalidParameterError: NliBatching: batch_size must be a positive integer, got 0
    """

    batch_size: int = DEFAULT_BATCH_SIZE
    max_batch_tokens: int = DEFAULT_MAX_BATCH_TOKENS
    deduplicate: bool = True
    sort_by_length: bool = True

    def __post_init__(self) -> None:
        check_param("batch_size", self.batch_size, POSITIVE_INT, owner="NliBatching")
        check_param("max_batch_tokens", self.max_batch_tokens, POSITIVE_INT, owner="NliBatching")
        for flag in ("deduplicate", "sort_by_length"):
            if not isinstance(getattr(self, flag), bool):
                raise InvalidParameterError(f"NliBatching: {flag} must be True or False, got {getattr(self, flag)!r}")


def token_budget_batches(lengths: np.ndarray, order: np.ndarray, batch_size: int,
                         max_batch_tokens: int) -> list[np.ndarray]:
    """Cut ``order`` (row indices into ``lengths``) into consecutive batches for the forward passes.

    A batch holds at most ``batch_size`` rows and at most ``max_batch_tokens`` padded tokens (rows x longest row
    of the batch). A row longer than ``max_batch_tokens`` on its own runs alone (it cannot be split; the model sees
    it whole, as it would one pair at a time).

    Returns a list of int64 arrays whose concatenation is ``order``.
    """
    batches, start, longest = [], 0, 0
    for end, length in enumerate(lengths[order].tolist()):
        wider = max(longest, length)
        if end > start and (end - start == batch_size or (end - start + 1) * wider > max_batch_tokens):
            batches.append(order[start:end])
            start, wider = end, length
        longest = wider
    if start < len(order):
        batches.append(order[start:])
    return batches


class NliScorer:
    """Class probabilities of (premise, hypothesis) pairs with a sequence-classification NLI model.

    Parameters
    ----------
    model : transformers PreTrainedModel (sequence classification)
        Its ``config.id2label`` names the classes (see :func:`nli_label_indices`). It is moved to ``device`` and
        ``dtype`` in place and put in eval mode.
    tokenizer : transformers tokenizer
        Encodes a pair as ``tokenizer(premises, hypotheses)``; needs a pad token. With a fast tokenizer whose pair
        layout is inferred at construction (``pair_template``), each distinct text is tokenized once and the pairs
        are assembled from it; the encodings are identical (checked on a few pairs of every call).
    batching : NliBatching, default NliBatching()
        Pairs and padded tokens per forward pass, de-duplication, length sorting (read back as
        ``scorer.batch_size``, ``scorer.max_batch_tokens``, ``scorer.deduplicate``, ``scorer.sort_by_length``).
    device : str, optional
        Default ``"cuda"`` when available, else ``"cpu"``.
    dtype : str or torch.dtype, optional
        Default float16 on GPU, float32 on CPU.
    progress : bool, default True
        tqdm bar over batches.
    name : str, optional
        Model name (for signal names and messages).
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        batching: NliBatching = NliBatching(),
        device: str | None = None,
        dtype: Any = None,
        progress: bool = True,
        name: str | None = None,
    ) -> None:
        import torch

        if not isinstance(batching, NliBatching):
            raise InvalidParameterError(f"NliScorer: batching must be an NliBatching, got {type(batching).__name__}")
        self.batching = batching
        self.id2label = {int(k): v for k, v in model.config.id2label.items()}
        self.labels = nli_label_indices(self.id2label)
        if tokenizer.pad_token_id is None:
            raise ValueError("the NLI tokenizer has no pad token; set tokenizer.pad_token")
        from much_metric.models import check_device

        check_device(device)
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.model = model.to(device=self.device, dtype=_torch_dtype(dtype, self.device)).eval()
        self.tokenizer = tokenizer
        #: How the tokenizer lays out a pair (None: every pair is encoded by ``tokenizer(premise, hypothesis)``).
        self.pair_template = infer_pair_template(tokenizer)
        self.progress = progress
        self.name = name or getattr(model.config, "_name_or_path", None) or type(model).__name__
        #: Forward passes run so far (read by :meth:`usage`: a signal file's cost records them).
        self.forward_passes = 0

    @property
    def batch_size(self) -> int:
        """Most distinct pairs per forward pass (``batching.batch_size``)."""
        return self.batching.batch_size

    @property
    def max_batch_tokens(self) -> int:
        """Most padded tokens per forward pass (``batching.max_batch_tokens``)."""
        return self.batching.max_batch_tokens

    @property
    def deduplicate(self) -> bool:
        """Whether identical pairs run once (``batching.deduplicate``)."""
        return self.batching.deduplicate

    @property
    def sort_by_length(self) -> bool:
        """Whether pairs are sorted by length before batching (``batching.sort_by_length``)."""
        return self.batching.sort_by_length

    def _encode(self, premises: list[str], hypotheses: list[str]) -> EncodedPairs:
        if self.pair_template is not None:
            encoded = template_encode(self.tokenizer, self.pair_template, premises, hypotheses)
            lengths = encoded.pair_lengths
            checked = sorted({*range(min(_CHECKED_PAIRS, len(premises))), int(lengths.argmax())})
            if matches_tokenizer(self.tokenizer, encoded, checked, premises, hypotheses):
                return encoded
            warnings.warn("the NLI tokenizer's pair encoding does not follow the template inferred at construction "
                          "(tokenizer changed?); encoding every pair with tokenizer(premise, hypothesis) from now on",
                          RuntimeWarning, stacklevel=3)
            self.pair_template = None
        return plain_encode(self.tokenizer, premises, hypotheses)

    def _batch_tensors(self, encoded: EncodedPairs, rows: np.ndarray):
        import torch

        left = getattr(self.tokenizer, "padding_side", "right") == "left"
        arrays = encoded.batch(rows, self.tokenizer.pad_token_id, left=left)
        return {key: torch.from_numpy(array).to(self.device) for key, array in arrays.items()}

    def predict_proba(self, premises: Sequence[str], hypotheses: Sequence[str]) -> np.ndarray:
        """Softmax class probabilities, shape (n_pairs, n_labels), columns in ``id2label`` order (float64)."""
        import torch
        from tqdm.auto import tqdm

        if len(premises) != len(hypotheses):
            raise ValueError(f"{len(premises)} premises but {len(hypotheses)} hypotheses")
        n = len(premises)
        if n == 0:
            return np.zeros((0, self.labels.n_labels))
        if self.deduplicate:
            unique: dict[tuple[str, str], int] = {}
            given = zip(premises, hypotheses, strict=True)
            inverse = np.fromiter((unique.setdefault(pair, len(unique)) for pair in given), dtype=np.int64, count=n)
            pairs = list(unique)
        else:
            inverse, pairs = np.arange(n), list(zip(premises, hypotheses, strict=True))
        encoded = self._encode([p for p, _ in pairs], [h for _, h in pairs])
        lengths = encoded.pair_lengths
        order = np.argsort(lengths, kind="stable") if self.sort_by_length else np.arange(len(pairs))
        batches = token_budget_batches(lengths, order, self.batch_size, self.max_batch_tokens)
        out = np.empty((len(pairs), self.labels.n_labels), dtype=np.float64)
        with torch.inference_mode():
            for rows in tqdm(batches, desc=f"NLI {len(pairs)} pairs", unit="batch", leave=False,
                             disable=nested_bar_disabled(self.progress)):  # nested under the signal's blocks
                logits = self.model(**self._batch_tensors(encoded, rows)).logits
                out[rows] = torch.softmax(logits.float(), dim=-1).cpu().numpy()
                self.forward_passes += 1
        return out[inverse]

    def usage(self) -> dict[str, int]:
        """What this scorer ran so far, as a signal's cost counts it: ``{"forward_passes": n}``."""
        return {"forward_passes": self.forward_passes}


def pair_generation_ids(arrays: Any, token_rows: np.ndarray) -> list[str]:
    """The generation_id of each pair, from the flat token each pair belongs to (for per-language NLI routing)."""
    sample = np.searchsorted(arrays.offsets, token_rows, side="right") - 1
    return [arrays.generation_ids[s] for s in sample.tolist()]


def run_nli(nli: Any, premises: list[str], hypotheses: list[str], n_labels: int,
            generation_ids: list[str] | None = None) -> np.ndarray:
    """NLI class probabilities (n_pairs, n_labels) of (premise, hypothesis) pairs, shape checked."""
    if not premises:
        return np.zeros((0, n_labels))
    # A scorer that routes by sample (NliRouter, maybe behind an NliCache) is told each pair's generation_id.
    kwargs = {"generation_ids": generation_ids} if getattr(nli, "routes_by_sample", False) else {}
    probabilities = np.asarray(nli.predict_proba(premises, hypotheses, **kwargs))
    if probabilities.shape != (len(premises), n_labels):
        raise ValueError(f"the NLI model returned shape {probabilities.shape}, expected ({len(premises)}, {n_labels})")
    return probabilities


def load_nli(
    name_or_path: str = DEFAULT_NLI_MODEL,
    *,
    device: str | None = None,
    dtype: Any = None,
    batching: NliBatching | None = None,
    local_files_only: bool = False,
    progress: bool = True,
) -> NliScorer:
    """Load a sequence-classification NLI model and its tokenizer with transformers (hub id or local folder).

    ``batching``: None = ``NliBatching()`` (:data:`DEFAULT_BATCH_SIZE` pairs, :data:`DEFAULT_MAX_BATCH_TOKENS`).
    ``local_files_only=True`` never touches the network (only the local Hugging Face cache / folder).
    """
    from transformers import AutoModelForSequenceClassification

    from much_metric.models import load_tokenizer

    tokenizer = load_tokenizer(name_or_path, local_files_only=local_files_only)
    model = AutoModelForSequenceClassification.from_pretrained(name_or_path, local_files_only=local_files_only)
    return NliScorer(model, tokenizer, device=device, dtype=dtype,
                     batching=NliBatching() if batching is None else batching, progress=progress, name=name_or_path)


def resolve_nli(nli: Any) -> Any:
    """A model name/path -> :func:`load_nli`; an object with ``predict_proba`` and ``id2label`` is used as is."""
    if isinstance(nli, str):
        return load_nli(nli)
    if nli is None:
        raise ValueError(f"CCP and SAR need an NLI model (nli=...; e.g. {DEFAULT_NLI_MODEL!r})")
    if not hasattr(nli, "predict_proba") or not hasattr(nli, "id2label"):
        raise InvalidParameterError("nli must be a model name, an NliScorer, or an object with id2label and "
                                    "predict_proba()")
    return nli


def nli_signal_suffix(name: str | None) -> str:
    """Signal-name suffix of an NLI model: "" (deberta-large), "_M", "_S" as the reference, else ``_<alias>``.

    The alias of another model is its last path component, lower-cased, non-alphanumerics replaced by ``-``.
    Note: the published ``*_S`` signals were computed with that model's classes inverted
    (docs/reference-behaviour.md#nli-label-mapping); ours read its
    ``id2label``, so our ``*_S`` values differ from the published ones, by design.
    """
    if name is None or name in REFERENCE_NLI_SIZES:
        return REFERENCE_NLI_SIZES.get(name, "")
    alias = re.sub(r"[^a-z0-9]+", "-", str(name).rstrip("/").split("/")[-1].lower()).strip("-")
    return f"_{alias}" if alias else ""


#: Regular expression of the NLI suffix of a CCP/SAR signal name (``_M``, ``_S``, ``_<alias>``, or none).
NLI_SUFFIX_PATTERN = r"(?:_[A-Za-z0-9-]+)?"


def checked_signal_name(signal: str, suffix: str, name: str, nli_name: str | None) -> str:
    """``name`` (the signal name the NLI model gives), after checking that the asked ``signal``'s suffix agrees."""
    if suffix and not name.endswith(suffix):
        raise ValueError(f"signal {signal} asked for, but the NLI model {nli_name!r} gives signal name {name!r}")
    return name
