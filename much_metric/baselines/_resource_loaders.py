"""The loaders and checks of the built-in resources of :data:`~much_metric.baselines.resource_table.RESOURCE_TABLE`,
named there as ``"module:function"`` strings: each imports its resource's module only when a run needs it, and the
table itself imports none of them (a method module imports the registry, which imports the table)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def nli_resource(value: Any, split: Any) -> Any:
    from much_metric.baselines.nli import resolve_nli

    return resolve_nli(value)


def neighbours_resource(value: Any, split: Any) -> Any:
    if value is not None:
        return value
    from much_metric.baselines.methods.ktc import default_neighbours  # the embedded sample ships its statistics

    return default_neighbours(split)


def internals_resource(value: Any, split: Any) -> Any:
    if not isinstance(value, str | Path):
        return value
    from much_dataset.internals import load_internals

    # The samples it holds are checked by compute_signals: a pack of part of the split scores those.
    return load_internals(value)


def samples_resource(value: Any, split: Any) -> Any:
    if value is None:
        return None
    from much_metric.baselines.samples import open_samples

    return open_samples(value, split)


def reference_resource(value: Any, split: Any) -> Any:
    if value is None:
        return None
    from much_metric.baselines.reference import open_reference

    return open_reference(value, split)


def encoder_resource(value: Any, split: Any) -> Any:
    from much_metric.baselines.encoders import load_encoder

    return load_encoder(value)


def check_encoder_value(value: Any) -> None:
    if isinstance(value, str | Path):
        from much_metric.baselines.encoders import check_encoder_name

        check_encoder_name(value)
