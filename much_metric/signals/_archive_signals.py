"""The signal files of a submission archive (already size- and schema-checked by
:mod:`much_metric.signals._archive`), read with the toolkit's own reader: the values, and the metadata of a learned
detector's signal (its detector and the rows it was trained and validated on), per sample or for the whole signal as
``much run --signals learned:DIR --out OUT`` writes it."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from much_metric.signals._archive_limits import SIGNAL_NAME_PATTERN, ArchiveLimits, SubmissionRejected
from much_metric.signals._cost import COST_KEY, cost_of
from much_metric.signals._training import DETECTOR_KEY, TRAINING_IDS_KEY

__all__ = ["parse_signal_files"]


def _learned(name: str, per_sample: dict[str, Any], signal_level: dict[str, Any]) -> dict[str, Any] | None:
    """The detector and training rows a learned signal's metadata records (None: not a learned signal): the
    per-sample metadata, or the signal-level metadata that ``much run --signals learned:DIR --out OUT`` writes."""
    detectors, ids = [], set()
    sources = [(f"generation_id={generation_id[:80]!r}", values) for generation_id, values in per_sample.items()]
    if signal_level:
        sources.append(("signal metadata", signal_level))
    for where, values in sources:
        if not isinstance(values, dict):
            raise SubmissionRejected(f"signal {name!r}, {where}: metadata must be an object")
        if DETECTOR_KEY in values:
            detectors.append(values[DETECTOR_KEY])
        if TRAINING_IDS_KEY in values:
            found = values[TRAINING_IDS_KEY]
            if not isinstance(found, list) or not all(isinstance(i, str) for i in found):
                raise SubmissionRejected(f"signal {name!r}, {where}: metadata "
                                         f"{TRAINING_IDS_KEY!r} must be a list of generation_id strings")
            ids.update(found)
    if not detectors and not ids:
        return None
    detector = detectors[0] if detectors else None
    fields = ("kind", "protocol", "fold")
    if not isinstance(detector, dict) or any(d != detector for d in detectors) or not all(
            isinstance(detector.get(f), str | type(None)) and len(str(detector.get(f))) <= 80 for f in fields):
        raise SubmissionRejected(f"signal {name!r}: a learned signal's metadata needs one {DETECTOR_KEY!r} object "
                                 f"{{'kind', 'protocol', 'fold'}} (short strings) and the {TRAINING_IDS_KEY!r} it "
                                 "was trained and validated on")
    if not ids:
        raise SubmissionRejected(f"signal {name!r}: a learned detector's signal must list its "
                                 f"{TRAINING_IDS_KEY!r} (the rows it was trained and validated on)")
    return {DETECTOR_KEY: {f: detector.get(f) for f in fields}, TRAINING_IDS_KEY: frozenset(ids)}


def parse_signal_files(signal_files: dict[str, bytes], limits: ArchiveLimits
                       ) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]], dict[str, Any]]:
    """``(signals, learned, costs)``: the values, each learned signal's detector and training rows, and the
    :class:`~much_metric.signals.SignalCost` each signal's metadata records (``much run --out``)."""
    from much_metric.signals._files import read_records
    from much_metric.signals._metadata import read_sample_metadata, read_signal_metadata

    signals: dict[str, dict[str, Any]] = {}
    metadata: dict[str, dict[str, dict[str, Any]]] = {}
    signal_level: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="much-submission-") as folder:
        for name, blob in signal_files.items():
            path = Path(folder) / name
            path.write_bytes(blob)
            try:
                records = read_records(path)
                per_sample = read_sample_metadata(path)
                whole_signal = read_signal_metadata(path)
            except json.JSONDecodeError as error:
                raise SubmissionRejected(f"{name}: its metadata is not valid JSON ({error})") from None
            except (ValueError, KeyError, OSError) as error:
                message = str(error).replace(folder + "/", "").replace(folder, "the archive")
                raise SubmissionRejected(message) from None
            for generation_id, signal, values in records:
                per_signal = signals.setdefault(signal, {})
                if generation_id in per_signal:  # a broken submission, not a warning
                    raise SubmissionRejected(f"{name}: (generation_id={generation_id[:80]!r}, signal_name="
                                             f"{signal[:80]!r}) given twice")
                per_signal[generation_id] = values
            for signal in {record[1] for record in records}:
                metadata.setdefault(signal, {}).update(per_sample)
                signal_level.setdefault(signal, {}).update(whole_signal)
    if len(signals) > limits.max_signals:
        raise SubmissionRejected(f"{len(signals)} signals in one submission, more than the limit of "
                                 f"{limits.max_signals}")
    bad = [name for name in signals if not SIGNAL_NAME_PATTERN.match(name)]
    if bad:
        raise SubmissionRejected(f"signal_name {bad[0][:100]!r}: names may use letters, digits and _ . + @ - "
                                 "(80 at most)")
    learned = {name: info for name in signals
               if (info := _learned(name, metadata.get(name, {}), signal_level.get(name, {}))) is not None}
    return signals, learned, _recorded_costs(signals, signal_level)


def _recorded_costs(signals: dict[str, Any], signal_level: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Signal name -> the :class:`~much_metric.signals.SignalCost` its metadata records (the submitter's word)."""
    costs = {}
    for name in signals:
        try:
            cost = cost_of(signal_level.get(name, {}))
        except ValueError as error:
            raise SubmissionRejected(f"signal {name[:80]!r}: its signal metadata's {COST_KEY!r}: {error}") from None
        if cost is not None:
            costs[name] = cost
    return costs
