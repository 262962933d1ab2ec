"""Other label sources of published Mu-SHROOM-derived rows: the same claims labelled under another span rule.

The embedded sample's ``labels`` follow Mu-SHROOM's majority ``hard_labels`` (``import-mushroom --labels hard``).
:func:`mushroom_label_source` labels the same published rows under another rule of :mod:`builder._mushroom_labels`
(``reference``: soft-label probability >= 1.0, every annotator, ends inclusive -- the "soft" source) from the
Mu-SHROOM records and the rows' own tokens, without any model: each row is matched to its record by language, prompt
and output text, and each claim's characters come from decoding the row's token prefixes with the tokenizer that
made them. :func:`write_mushroom_label_source` writes the result as a label file
(:mod:`much_dataset.label_files`); ``scripts/data/make_sample.py`` ships the sample's as
``much_dataset/sample/label_sources/soft.json``, which the leaderboard reads as a second label source (the rank
correlation of detectors under each source, docs/leaderboard.md#label-sources).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from builder import _mushroom_labels as ml
from builder.errors import BuilderError
from much_dataset import schema
from much_dataset.label_files import LabelFile, rows_fingerprint, write_label_file
from much_metric import mushroom

__all__ = ["mushroom_label_source", "write_mushroom_label_source", "SOFT_DESCRIPTION"]

SOFT_DESCRIPTION = ("Mu-SHROOM soft labels: a claim is -1 when its characters intersect a soft-label span that every "
                    "annotator marked (probability 1.0, end inclusive; the reference's rule)")


def _record_index(records: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], list[Mapping[str, Any]]]:
    index: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for record in records:
        index.setdefault((str(record["lang"]).lower(), str(record["model_input"])), []).append(record)
    return index


def mushroom_label_source(rows: Any, records: Iterable[Mapping[str, Any]], tokenizer: Any, *, rule: str = "reference",
                          threshold: float = 1.0) -> dict[str, list[int]]:
    """``{generation_id: labels}`` (one per claim, EOS claim +1) of ``rows`` (a dataset or row mappings) under
    ``rule``; raises :class:`~builder.errors.BuilderError` naming a row that matches no record or several."""
    index = _record_index(records)
    out: dict[str, list[int]] = {}
    for row in rows:
        gid, output = str(row[schema.GENERATION_ID]), str(row[schema.OUTPUT])
        found = [r for r in index.get((str(row[schema.LANG]), str(row[schema.PROMPT])), [])
                 if output.startswith(mushroom.output_text(r))]
        if len(found) != 1:
            raise BuilderError(f"generation_id={gid!r}: {len(found)} Mu-SHROOM records match its language, prompt "
                               "and output (expected one)")
        ids = [int(t) for t in row[schema.OUTPUT_TOKENS]]
        ends = [len(tokenizer.decode(ids[: i + 1], skip_special_tokens=False)) for i in range(len(ids))]
        ranges = ml.claim_char_ranges(ends, row[schema.TOKEN_CHUNKS])
        labels = ml.claim_labels(ranges, ml.hallucinated_mask(len(output), found[0], rule=rule, threshold=threshold))
        labels[-1] = schema.CORRECT  # the EOS claim, by definition
        out[gid] = labels
    return out


def write_mushroom_label_source(path: str | Path, rows: Any, records: Iterable[Mapping[str, Any]], tokenizer: Any,
                                *, rule: str = "reference") -> str:
    """Write :func:`mushroom_label_source` of ``rows`` as a label file (with its ``.sha256``) named after the rule
    (``soft`` for ``reference``); returns its digest."""
    labels = mushroom_label_source(rows, records, tokenizer, rule=rule)
    return write_label_file(path, LabelFile(
        name="soft" if rule == "reference" else rule, rows={gid: {schema.LABELS: v} for gid, v in labels.items()},
        rows_sha256=rows_fingerprint(rows),
        description=SOFT_DESCRIPTION if rule == "reference" else f"Mu-SHROOM rule {rule!r}"), mode=0o644)
