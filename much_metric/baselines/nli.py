"""Batched, de-duplicated NLI inference for CCP and SAR.

CCP and SAR turn every generated token into a few (premise, hypothesis) pairs; a MUCH split yields hundreds of
thousands of them. :class:`NliScorer` runs a whole split's pairs at once: identical pairs are run once, the
distinct pairs are sorted by token length so each padded batch wastes little compute, batches run under
``torch.inference_mode`` (float16 on GPU by default), and the class probabilities are scattered back to the input
order. The result equals running the pairs one at a time (up to float rounding of padded batches; tested).

Labels are read from the model's own ``config.id2label`` by name (:func:`nli_label_indices`) -- never hard-coded:
the reference hard-coded {0: contradiction, 1: entailment} for a model whose hub labels are {0: entailment,
1: not_entailment}, inverting it (spec 11.2).

Any object with an ``id2label`` mapping and a ``predict_proba(premises, hypotheses) -> (n_pairs, n_labels)``
method can stand in for :class:`NliScorer` (e.g. a stub in tests, or a remote service).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "DEFAULT_NLI_MODEL",
    "REFERENCE_NLI_SIZES",
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


class NliScorer:
    """Class probabilities of (premise, hypothesis) pairs with a sequence-classification NLI model.

    Parameters
    ----------
    model : transformers PreTrainedModel (sequence classification)
        Its ``config.id2label`` names the classes (see :func:`nli_label_indices`). It is moved to ``device`` and
        ``dtype`` in place and put in eval mode.
    tokenizer : transformers tokenizer
        Encodes a pair as ``tokenizer(premises, hypotheses)``; needs a pad token.
    batch_size : int, default 64
        Distinct pairs per forward pass.
    device : str, optional
        Default ``"cuda"`` when available, else ``"cpu"``.
    dtype : str or torch.dtype, optional
        Default float16 on GPU, float32 on CPU.
    deduplicate, sort_by_length : bool, default True
        Run identical pairs once / sort by length before batching. Switching them off only costs time.
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
        batch_size: int = 64,
        device: str | None = None,
        dtype: Any = None,
        deduplicate: bool = True,
        sort_by_length: bool = True,
        progress: bool = True,
        name: str | None = None,
    ) -> None:
        import torch

        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        self.id2label = {int(k): v for k, v in model.config.id2label.items()}
        self.labels = nli_label_indices(self.id2label)
        if tokenizer.pad_token_id is None:
            raise ValueError("the NLI tokenizer has no pad token; set tokenizer.pad_token")
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.model = model.to(device=self.device, dtype=_torch_dtype(dtype, self.device)).eval()
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.deduplicate = deduplicate
        self.sort_by_length = sort_by_length
        self.progress = progress
        self.name = name or getattr(model.config, "_name_or_path", None) or type(model).__name__

    def _encode(self, premises: list[str], hypotheses: list[str]) -> dict[str, list[list[int]]]:
        encoded = self.tokenizer(premises, hypotheses, truncation=False, padding=False)
        return {key: list(encoded[key]) for key in ("input_ids", "token_type_ids") if key in encoded}

    def _batch_tensors(self, encoded: dict[str, list[list[int]]], rows: np.ndarray):
        import torch

        lengths = np.fromiter((len(encoded["input_ids"][r]) for r in rows), dtype=np.int64, count=len(rows))
        width = int(lengths.max())
        left = getattr(self.tokenizer, "padding_side", "right") == "left"
        tensors = {}
        for key, fill in (("input_ids", self.tokenizer.pad_token_id), ("token_type_ids", 0)):
            if key not in encoded:
                continue
            array = np.full((len(rows), width), fill, dtype=np.int64)
            for line, (row, length) in enumerate(zip(rows, lengths, strict=True)):
                if left:
                    array[line, width - length :] = encoded[key][row]
                else:
                    array[line, :length] = encoded[key][row]
            tensors[key] = torch.from_numpy(array).to(self.device)
        positions = np.arange(width)[None, :]
        mask = positions >= (width - lengths)[:, None] if left else positions < lengths[:, None]
        tensors["attention_mask"] = torch.from_numpy(mask.astype(np.int64)).to(self.device)
        return tensors

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
        lengths = np.fromiter(map(len, encoded["input_ids"]), dtype=np.int64, count=len(pairs))
        order = np.argsort(lengths, kind="stable") if self.sort_by_length else np.arange(len(pairs))
        out = np.empty((len(pairs), self.labels.n_labels), dtype=np.float64)
        starts = range(0, len(pairs), self.batch_size)
        with torch.inference_mode():
            for start in tqdm(starts, desc=f"NLI {len(pairs)} pairs", unit="batch", disable=not self.progress,
                              leave=False):
                rows = order[start : start + self.batch_size]
                logits = self.model(**self._batch_tensors(encoded, rows)).logits
                out[rows] = torch.softmax(logits.float(), dim=-1).cpu().numpy()
        return out[inverse]


def load_nli(
    name_or_path: str = DEFAULT_NLI_MODEL,
    *,
    device: str | None = None,
    dtype: Any = None,
    batch_size: int = 64,
    local_files_only: bool = False,
    progress: bool = True,
) -> NliScorer:
    """Load a sequence-classification NLI model and its tokenizer with transformers (hub id or local folder).

    ``local_files_only=True`` never touches the network (only the local Hugging Face cache / folder).
    """
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(name_or_path, local_files_only=local_files_only)
    model = AutoModelForSequenceClassification.from_pretrained(name_or_path, local_files_only=local_files_only)
    return NliScorer(model, tokenizer, device=device, dtype=dtype, batch_size=batch_size, progress=progress,
                     name=name_or_path)


def resolve_nli(nli: Any) -> Any:
    """A model name/path -> :func:`load_nli`; an object with ``predict_proba`` and ``id2label`` is used as is."""
    if isinstance(nli, str):
        return load_nli(nli)
    if nli is None:
        raise ValueError(f"CCP and SAR need an NLI model (nli=...; e.g. {DEFAULT_NLI_MODEL!r})")
    if not hasattr(nli, "predict_proba") or not hasattr(nli, "id2label"):
        raise TypeError("nli must be a model name, an NliScorer, or an object with id2label and predict_proba()")
    return nli


def nli_signal_suffix(name: str | None) -> str:
    """Signal-name suffix of an NLI model: "" (deberta-large), "_M", "_S" as the reference, else ``_<alias>``.

    The alias of another model is its last path component, lower-cased, non-alphanumerics replaced by ``-``.
    Note: the published ``*_S`` signals were computed with that model's classes inverted (spec 11.2); ours read its
    ``id2label``, so our ``*_S`` values differ from the published ones, by design.
    """
    if name is None or name in REFERENCE_NLI_SIZES:
        return REFERENCE_NLI_SIZES.get(name, "")
    alias = re.sub(r"[^a-z0-9]+", "-", str(name).rstrip("/").split("/")[-1].lower()).strip("-")
    return f"_{alias}" if alias else ""
