"""The reference evaluation modes of MUCH (docs/reference-behaviour.md#evaluation-modes): which samples the "manual" and
"auto" benchmarks use."""

from __future__ import annotations

from typing import Any

from much_dataset.schema import HUMAN_LABELS_0, HUMAN_LABELS_1, NO_HUMAN_LABEL

__all__ = ["select_samples"]


def _is_labelled(values: Any) -> bool:
    return values is not None and list(values) != list(NO_HUMAN_LABEL)


def select_samples(dataset: Any, *, manual: bool | None = None) -> Any:
    """Samples of the reference evaluation modes (docs/reference-behaviour.md#evaluation-modes); ground truth stays
    ``labels`` in every mode.

    Parameters
    ----------
    dataset : datasets.Dataset or sequence of row mappings
        Needs the ``human_labels_0`` / ``human_labels_1`` columns.
    manual : bool or None
        ``True`` ("manual", the paper's human-checked benchmark): samples labelled by both annotators **and** on
        which they agree (the test split's agreed samples). ``False`` ("auto"): samples with no human label
        (the 4,673 train samples). ``None``: all samples.

    Returns
    -------
    The selected samples, as ``dataset.select(indices)`` for a ``datasets.Dataset`` or a list of rows otherwise.
    """
    if manual is None:
        return dataset
    if hasattr(dataset, "select") and hasattr(dataset, "column_names"):
        first, second = dataset[HUMAN_LABELS_0], dataset[HUMAN_LABELS_1]
    else:
        first = [row[HUMAN_LABELS_0] for row in dataset]
        second = [row[HUMAN_LABELS_1] for row in dataset]
    keep = []
    for index, (a, b) in enumerate(zip(first, second, strict=True)):
        has_a, has_b = _is_labelled(a), _is_labelled(b)
        if manual and has_a and has_b and list(a) == list(b) or not manual and not has_a and not has_b:
            keep.append(index)
    if hasattr(dataset, "select") and hasattr(dataset, "column_names"):
        return dataset.select(keep)
    return [dataset[i] for i in keep]

