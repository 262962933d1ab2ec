"""Rows a signal was trained on: never scored there silently.

A signal computed by a method trained on MUCH rows (a learned detector, ``learned:<folder>``) carries signal
metadata (:func:`much_metric.signals.read_signal_metadata`; the contract shared with the leaderboard):

* ``training_generation_ids``: the sorted ``generation_id`` of every row that trained or validated the method;
* ``detector``: ``{"kind", "protocol", "fold"}`` (and the ``aggregator`` / ``stopword_handling`` it was trained
  for).

:func:`training_exclusions` turns the metadata of the signals of one evaluation into the rows to leave out of each
signal and the messages saying how many and why; :func:`much_metric.report.evaluate_signals` (``training_rows=``)
leaves them out. With ``include_training_rows=True`` nothing is left out and the message is a warning that the
numbers include the method's own training rows. A detector scored through another aggregator than the one it was
trained for gets a warning too.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from much_metric.scoring import MuchMetricWarning

__all__ = ["DETECTOR_KEY", "TRAINING_IDS_KEY", "TrainingRowsWarning", "scored_rows", "signal_metadata_of",
           "training_exclusions", "training_label", "with_scored_rows"]

TRAINING_IDS_KEY = "training_generation_ids"
DETECTOR_KEY = "detector"


class TrainingRowsWarning(MuchMetricWarning):
    """A signal is scored on rows it was trained on, or through another aggregator than it was trained for."""


def signal_metadata_of(path: str | os.PathLike) -> dict[str, dict[str, Any]]:
    """Signal name -> the signal metadata of the file that holds it, for a signal file or a folder of them (only
    files with signal metadata appear)."""
    from much_metric.signals._files import read_signals, signal_files_in
    from much_metric.signals._metadata import read_signal_metadata

    path = Path(path)
    files = signal_files_in(path) if path.is_dir() else [path]
    out: dict[str, dict[str, Any]] = {}
    for file in files:
        metadata = read_signal_metadata(file)
        if metadata:
            out.update({name: metadata for name in read_signals(file)})
    return out


def _ids(name: str, metadata: Mapping[str, Any]) -> list[str]:
    ids = metadata.get(TRAINING_IDS_KEY)
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise ValueError(f"signal {name!r}: metadata field {TRAINING_IDS_KEY!r} must be a list of generation_ids, got "
                         f"{type(ids).__name__}")
    return ids


def training_label(metadata: Mapping[str, Any]) -> str | None:
    """``"linear; leave-one-language-out, held out lang=de"`` from a learned signal's metadata (None without a
    ``detector`` field): what a table row adds to the stored name, so the row names detector, protocol and fold.

    >>> from much_metric.signals import training_label
    >>> training_label({"detector": {"kind": "linear", "protocol": "leave-one-language-out", "fold": "lang=de"}})
    'linear; leave-one-language-out, held out lang=de'
    >>> training_label({}) is None
    True
    """
    detector = metadata.get(DETECTOR_KEY)
    if not isinstance(detector, Mapping):
        return None
    trained = ", ".join(part for part in (detector.get("protocol") and str(detector["protocol"]),
                                          detector.get("fold") and f"held out {detector['fold']}") if part)
    return f"{detector.get('kind') or 'learned'}; {trained or 'protocol not recorded'}"


def _fold_value(key: str, lang: str, generation_config: str) -> str:
    """A row's value of a fold key: its language, or its generating model as the protocols read it (the model of
    a MUCH generation config, else the config id itself; :func:`much_metric.learned.row_info`)."""
    from much_dataset.schema import MUCH_CONFIGS

    return lang if key == "lang" else MUCH_CONFIGS.get(generation_config, (generation_config, None))[0]


def scored_rows(metadata: Mapping[str, Any], rows: Mapping[str, Sequence[str]]) -> str | None:
    """Which rows a learned signal's table row was scored on, exactly: ``"150 lang=de test + 112 purged rows"``
    (the held-out fold's rows, and the rows of the other folds that the protocol purged from training, for
    leave-one-language-out / leave-one-model-out), ``"262 held-out rows"`` for another fold, ``"+ 344 training
    rows"`` when rows that trained or validated it were scored too. ``rows``: the scored rows' ``generation_id``,
    ``lang`` and ``generation_config`` columns. None without a ``detector`` field.

    >>> from much_metric.signals import scored_rows
    >>> rows = {"generation_id": ["a", "b", "c", "d"], "lang": ["de", "de", "fr", "fr"], "generation_config": ["x"] * 4}
    >>> scored_rows({"detector": {"fold": "lang=de"}, "training_generation_ids": ["d"]}, rows)
    '2 lang=de test + 1 purged + 1 training rows'
    """
    detector = metadata.get(DETECTOR_KEY)
    if not isinstance(detector, Mapping):
        return None
    training = set(metadata.get(TRAINING_IDS_KEY) or ())
    held_out = [i for i, gid in enumerate(rows["generation_id"]) if gid not in training]
    n_training = len(rows["generation_id"]) - len(held_out)
    fold = str(detector.get("fold") or "")
    key, _, value = fold.partition("=")
    if key in ("lang", "model") and value:
        test = sum(_fold_value(key, rows["lang"][i], rows["generation_config"][i]) == value for i in held_out)
        parts = [f"{test} {fold} test", *([f"{len(held_out) - test} purged"] if len(held_out) > test else [])]
    else:
        parts = [f"{len(held_out)} held-out"]
    return " + ".join([*parts, *([f"{n_training} training"] if n_training else [])]) + " rows"


def with_scored_rows(label: str, metadata: Mapping[str, Any], rows: Mapping[str, Sequence[str]]) -> str:
    """A learned row's ``label`` (``"Learned linear (linear-de; leave-one-language-out, held out lang=de)"``) with
    its protocol and fold replaced by the rows it was scored on (:func:`scored_rows`): ``"Learned linear (linear-de;
    150 lang=de test + 112 purged rows)"``; unchanged for a signal without a detector."""
    scored = scored_rows(metadata, rows)
    if scored is None:
        return label
    detector = metadata[DETECTOR_KEY]
    held_out = f"held out {detector.get('fold')}"
    for fragment in (f"{detector.get('protocol')}, {held_out}", held_out):
        if detector.get("fold") and fragment in label:  # the protocol is in the run's note: the row names the rows
            return label.replace(fragment, scored)
    return f"{label} ({scored})"


def _what(name: str, metadata: Mapping[str, Any]) -> str:
    detector = metadata.get(DETECTOR_KEY) if isinstance(metadata.get(DETECTOR_KEY), Mapping) else {}
    parts = [str(detector[key]) for key in ("protocol", "fold") if detector.get(key)]
    kind = f"{detector['kind']} detector" if detector.get("kind") else "method"
    return f"the {kind} {name!r}" + (f" ({', '.join(parts)})" if parts else "")


def _aggregator_names(aggregation: Any, renamed: Mapping[str, Any]) -> list[str]:
    """The aggregator names of ``aggregation`` (Aggregation objects or names); ``aggregators=`` of before with a
    ``FutureWarning``."""
    unknown = sorted(set(renamed) - {"aggregators"})
    if unknown:
        raise TypeError(f"training_exclusions() got an unexpected keyword argument {unknown[0]!r}")
    if renamed:
        warnings.warn("training_exclusions(aggregators=...) is deprecated and will be removed: pass aggregation= "
                      "(EvaluationOptions.aggregation, Aggregation objects or names), the one aggregation option of "
                      "the toolkit", FutureWarning, stacklevel=3)
        aggregation = renamed["aggregators"]
    items = (aggregation,) if isinstance(aggregation, str) or hasattr(aggregation, "aggregator") else aggregation
    return [getattr(item, "aggregator", item) for item in items]


def training_exclusions(
    metadata: Mapping[str, Mapping[str, Any]],
    dataset_ids: Sequence[str],
    *,
    include_training_rows: bool = False,
    aggregation: Any = (),
    **renamed: Any,
) -> tuple[dict[str, Collection[str]], list[str]]:
    """Rows to leave out of each signal's evaluation, and one message per signal that had training rows here.

    Parameters
    ----------
    metadata : mapping
        Signal name -> its signal metadata (``{}`` for a signal without training rows).
    dataset_ids : sequence of str
        The ``generation_id`` of the evaluated rows (the count in the message is over these).
    include_training_rows : bool, keyword-only, default False
        Score every row anyway: nothing is left out, a :class:`TrainingRowsWarning` says so.
    aggregation : Aggregation, str or sequence of them, keyword-only
        The evaluation's aggregation(s) (``EvaluationOptions.aggregation``): an aggregator that differs from the
        detector's gets a warning. (``aggregators=``, its name of before, still works with a ``FutureWarning``.)

    Returns
    -------
    (dict, list of str)
        Signal name -> generation_ids to leave out (empty when ``include_training_rows``), and the messages.
    """
    aggregators = _aggregator_names(aggregation, renamed)
    present = set(dataset_ids)
    excluded: dict[str, Collection[str]] = {}
    messages: list[str] = []
    for name, values in metadata.items():
        if not values:
            continue
        detector = values.get(DETECTOR_KEY) if isinstance(values.get(DETECTOR_KEY), Mapping) else {}
        trained_for = detector.get("aggregator")
        other = [a for a in aggregators if trained_for and a != trained_for]
        if other:
            warnings.warn(f"signal {name!r} was trained through the {trained_for} aggregator and is scored with "
                          f"{', '.join(other)}: its numbers under another aggregator are not what it was trained for",
                          TrainingRowsWarning, stacklevel=3)
        if TRAINING_IDS_KEY not in values:
            continue
        overlap = present.intersection(_ids(name, values))
        if not overlap:
            continue
        if include_training_rows:
            message = (f"{_what(name, values)} is scored on all {len(present)} rows, {len(overlap)} of which trained "
                       "or validated it (include_training_rows): its numbers are not held-out numbers")
            warnings.warn(message, TrainingRowsWarning, stacklevel=3)
        else:
            excluded[name] = frozenset(overlap)
            message = (f"{_what(name, values)}: {len(overlap)} of {len(present)} rows left out because they trained "
                       f"or validated it; scored on the {len(present) - len(overlap)} held-out rows "
                       "(--include-training-rows / include_training_rows=True scores every row)")
        messages.append(message)
    return excluded, messages
