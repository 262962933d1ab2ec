"""Which internals pack a signal was computed from: recorded by ``much run --internals PACK --out DIR``, checked when
such a signal file is resumed or evaluated.

A signal that reads a model's internals (RAUQ, LLM-Check's attention score, a probe or claim head) is a function of
the pack it read, not only of the MUCH rows: a file of such values is only meaningful next to that pack. Its signal
metadata (:func:`much_metric.signals.read_signal_metadata`) therefore carries ``internals_pack``: the pack's model
name, weights sha256 and :attr:`~much_dataset.internals.InternalsPack.fingerprint` (how its arrays were computed;
unchanged as the pack grows). :func:`check_internals_pack` compares a file's record with a pack:

* ``compute_signals`` (``much run --out DIR``) refuses to resume a file computed from another pack (or with no
  record: computed before the record existed) -- otherwise one file would mix two observers' values;
* ``much evaluate --internals PACK`` (:func:`check_signal_files`) refuses a signal file computed from another pack,
  so the table printed is the table of that pack.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

__all__ = ["INTERNALS_PACK_KEY", "check_internals_pack", "check_signal_files", "internals_pack_record"]

#: Signal-metadata key of the record of the internals pack a signal was computed from.
INTERNALS_PACK_KEY = "internals_pack"


def internals_pack_record(pack: Any) -> dict[str, str]:
    """``{"model", "weights_sha256", "fingerprint"}`` of an opened :class:`~much_dataset.internals.InternalsPack`."""
    manifest = pack.manifest
    return {"model": str(manifest.get("model")), "weights_sha256": str(manifest.get("weights_sha256")),
            "fingerprint": pack.fingerprint}


def check_internals_pack(metadata: Mapping[str, Any], pack: Any, *, file: str | os.PathLike) -> None:
    """Raise :class:`~much_dataset.internals.InternalsError` unless the signal metadata of ``file`` records
    ``pack`` (an opened :class:`~much_dataset.internals.InternalsPack`) as the pack it was computed from."""
    from much_dataset.internals import InternalsError

    recorded = metadata.get(INTERNALS_PACK_KEY)
    expected = internals_pack_record(pack)
    if not isinstance(recorded, Mapping):
        raise InternalsError(f"{file}: its signal metadata does not record the internals pack it was computed from "
                             f"(no {INTERNALS_PACK_KEY!r}; written before this check existed?): recompute it from "
                             f"{pack.path} into another folder")
    if recorded.get("fingerprint") != expected["fingerprint"]:
        model, weights = str(recorded.get("model"))[:120], str(recorded.get("weights_sha256"))[:12]
        how = "the same model's weights built another way (layers, dtypes, compression or prompt)" \
            if recorded.get("weights_sha256") == expected["weights_sha256"] else \
            f"another model ({model!r}, weights {weights})"
        raise InternalsError(f"{file}: computed from another internals pack than {pack.path}: {how}; pack fingerprint "
                             f"{str(recorded.get('fingerprint'))[:12]} there, {expected['fingerprint'][:12]} here")


def check_signal_files(scores: str | os.PathLike, pack: Any, signal_names: Collection[str]) -> list[str]:
    """``much evaluate --scores SCORES --internals PACK``: check every file of ``scores`` (a signal file or a folder
    of them) holding one of ``signal_names`` and recording an internals pack against ``pack`` (a path is opened).

    Returns the names of the signals that record ``pack``; raises
    :class:`~much_dataset.internals.InternalsError` naming the first file computed from another pack. Files that
    record no pack are signals of the probabilities only, and are not checked.
    """
    from much_dataset.internals import load_internals
    from much_metric.signals._files import read_signals, signal_files_in
    from much_metric.signals._metadata import read_signal_metadata

    if isinstance(pack, str | os.PathLike):
        pack = load_internals(pack)
    path = Path(scores)
    files = signal_files_in(path) if path.is_dir() else [path]
    checked: list[str] = []
    for file in files:
        metadata = read_signal_metadata(file)
        if INTERNALS_PACK_KEY not in metadata:
            continue
        names = [name for name in read_signals(file) if name in signal_names]
        if names:
            check_internals_pack(metadata, pack, file=file)
            checked.extend(names)
    return checked
