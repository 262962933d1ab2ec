"""The samples resource: N further answers per question, for the sampling-consistency detectors.

A samples pack (``python -m builder samples``, opened by :func:`much_dataset.load_samples`) holds, for each MUCH row,
N further answers to the same prompt by the same generating configuration: one row per sample with the columns of a
``generate`` row (``output``, ``output_tokens``, ``logits_token_ids``, ``logits_values``, ``finished``,
``sampling``) plus ``generation_id`` (the answer's) and ``sample_index``, ordered by dataset row then
``sample_index``. The detectors read only the texts: :class:`SampleSet` keeps, per ``generation_id``, the cleaned
``output`` of each sample in ``sample_index`` order.

:func:`open_samples` is the one place a run turns what it was given (``much run --samples``, ``ResourceOptions(
samples=...)``) into a :class:`SampleSet`: a loaded ``datasets.Dataset`` (or list of rows) in the pack's format is used
as it is; anything else (a pack folder, ``"sample"`` for the embedded sample's own pack) goes through
``much_dataset.load_samples``, with the pack's own tokenizer when its manifest names one known offline
(:func:`much_metric.models.local_tokenizer`: each sample's text must then be its tokens decoded; else an
``UncheckedTextWarning`` says the texts were not compared). A row of the split without samples is an error naming it.

Texts: :func:`clean_text` removes the special-token strings that ``output`` keeps (``<|im_end|>``, ``<|eot_id|>``,
``</s>``, ...); :func:`split_sentences` cuts a text after ``.``, ``!``, ``?`` (and their full-width forms) followed by
a space or the end, and at line breaks -- the unit the SummaC / SelfCheckGPT scorers compare a claim with.
"""

from __future__ import annotations

import numbers
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from much_dataset.params import POSITIVE_INT, Interval, check_param
from much_dataset.schema import GENERATION_ID, OUTPUT
from much_metric._cache import BoundedCache

__all__ = ["SAMPLE_INDEX", "SampleSet", "clean_text", "open_samples", "split_sentences"]

#: Column of a samples pack: the sample's position among the N answers of its row.
SAMPLE_INDEX = "sample_index"
#: Rows whose sentences a :class:`SampleSet` keeps split (a method reads a row's several times within a block).
SENTENCE_ROWS = 4096

_SPECIAL = re.compile(r"<\|[^<>|\s]{1,40}\|>|</?s>|<eos>|<bos>|<pad>|<end_of_turn>|<start_of_turn>|\[/?INST\]")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])|\n+")


def clean_text(text: str) -> str:
    """``text`` without the special-token strings a decoded output keeps, whitespace-trimmed."""
    return _SPECIAL.sub("", str(text)).strip()


def split_sentences(text: str) -> list[str]:
    """The sentences of ``text`` (see the module docstring); never empty strings."""
    return [part.strip() for part in _SENTENCE_END.split(clean_text(text)) if part and part.strip()]


@dataclass(frozen=True)
class SampleSet:
    """The samples of a run, by ``generation_id``: ``texts[gid]`` = cleaned outputs in ``sample_index`` order.

    ``source`` says where they come from (for signal metadata); ``n_max`` caps the samples used per row (the first
    ``n_max`` by ``sample_index``; None = all): :meth:`first` makes the N-curve of the benchmark.
    """

    texts: Mapping[str, tuple[str, ...]]
    source: str = "in memory"
    n_max: int | None = None
    unfinished: int = 0
    #: sentences of the rows read lately (:data:`SENTENCE_ROWS` at most): the toolkit's bounded, locked cache, so a
    #: set kept for a whole split (or shared by threads) holds no more than that
    _sentences: BoundedCache[str, tuple[tuple[str, ...], ...]] = field(
        default_factory=lambda: BoundedCache(SENTENCE_ROWS), compare=False, repr=False)

    def of(self, generation_id: str) -> tuple[str, ...]:
        """The sample texts of one row (at most ``n_max``); ``ValueError`` naming the row when it has none."""
        texts = self.texts.get(generation_id)
        if not texts:
            raise ValueError(f"{GENERATION_ID}={generation_id!r}: no samples for this row in the samples pack "
                             f"({self.source}); build them with `python -m builder samples` for every row of the split")
        return texts if self.n_max is None else texts[: self.n_max]

    def sentences(self, generation_id: str) -> tuple[tuple[str, ...], ...]:
        """Per sample, its sentences (:func:`split_sentences`), cached."""
        return self._sentences.get_or_compute(
            generation_id, lambda: tuple(tuple(split_sentences(text)) for text in self.of(generation_id)))

    def first(self, n: int) -> SampleSet:
        """The same samples, at most the first ``n`` per row."""
        check_param("n", n, POSITIVE_INT, owner="SampleSet.first", hint="the number of samples per row")
        return SampleSet(self.texts, self.source, n, self.unfinished)

    def counts(self) -> np.ndarray:
        """Samples used per row (after ``n_max``)."""
        return np.array([len(v) if self.n_max is None else min(len(v), self.n_max) for v in self.texts.values()])

    def record(self) -> dict[str, Any]:
        """What signal metadata stores about these samples."""
        counts = self.counts()
        return {"source": self.source, "rows": len(self.texts), "n_min": int(counts.min()) if counts.size else 0,
                "n_max": int(counts.max()) if counts.size else 0}

    def describe(self) -> str:
        """One line for ``much run``'s notes."""
        record = self.record()
        spread = f"{record['n_min']}" if record["n_min"] == record["n_max"] else f"{record['n_min']}-{record['n_max']}"
        return f"{spread} samples per row for {record['rows']:,} rows ({self.source})" + \
            (f"; {self.unfinished:,} samples ended without EOS (kept)" if self.unfinished else "")


def _rows(samples: Any) -> tuple[list[str], list[int], list[str], list[Any]]:
    columns = (GENERATION_ID, SAMPLE_INDEX, OUTPUT, "finished")
    if hasattr(samples, "column_names"):
        missing = [c for c in columns[:3] if c not in samples.column_names]
        if missing:
            raise ValueError(f"the samples lack the column(s) {missing} of the samples-pack format")
        finished = samples["finished"] if "finished" in samples.column_names else [True] * len(samples)
        return list(samples[GENERATION_ID]), list(samples[SAMPLE_INDEX]), list(samples[OUTPUT]), list(finished)
    rows = list(samples)
    for index, row in enumerate(rows):
        missing = [c for c in columns[:3] if c not in row]
        if missing:
            raise ValueError(f"sample row {index}: no field(s) {missing} of the samples-pack format")
    return ([r[GENERATION_ID] for r in rows], [r[SAMPLE_INDEX] for r in rows], [r[OUTPUT] for r in rows],
            [r.get("finished", True) for r in rows])


def sample_set(samples: Any, *, source: str = "in memory") -> SampleSet:
    """A :class:`SampleSet` from rows in the samples-pack format (a ``datasets.Dataset`` or a list of dicts)."""
    ids, indices, outputs, finished = _rows(samples)
    grouped: dict[str, dict[int, str]] = {}
    for position, (gid, index, text) in enumerate(zip(ids, indices, outputs, strict=True)):
        check_param(SAMPLE_INDEX, index, Interval(numbers.Integral, 0, None),
                    owner=f"sample row {position} ({GENERATION_ID}={gid!r})")
        if not isinstance(text, str):
            raise ValueError(f"sample row {position} ({GENERATION_ID}={gid!r}): field {OUTPUT!r} is not a string")
        row = grouped.setdefault(str(gid), {})
        if int(index) in row:
            raise ValueError(f"{GENERATION_ID}={gid!r}: {SAMPLE_INDEX} {index} appears twice in the samples")
        row[int(index)] = clean_text(text)
    texts = {gid: tuple(row[i] for i in sorted(row)) for gid, row in grouped.items()}
    return SampleSet(texts, source, None, sum(1 for f in finished if f is False))


def open_samples(value: Any, dataset: Any = None) -> SampleSet:
    """The samples of a run (the one resolution seam; see the module docstring).

    ``value``: a :class:`SampleSet` (returned as is), rows in the samples-pack format (a ``datasets.Dataset`` or a
    list of dicts), or what :func:`much_dataset.load_samples` opens (a pack folder; ``"sample"``, the embedded
    sample's pack). ``dataset``: the split being scored, handed to ``load_samples`` so that it checks and orders the
    pack against it.
    """
    if isinstance(value, SampleSet):
        return value
    if value is None:
        raise ValueError("no samples: pass samples= (much run --samples PACK; `python -m builder samples` builds one)")
    if hasattr(value, "column_names") or (isinstance(value, Sequence) and not isinstance(value, str)):
        return sample_set(value)
    try:
        from much_dataset import load_samples
    except ImportError as error:  # the samples packs (issue #46) are not in this install
        raise ValueError(f"--samples {value}: this install of much_dataset has no load_samples (samples packs); "
                         "pass the samples as a datasets.Dataset in the pack's format") from error
    kwargs = {"dataset": dataset} if dataset is not None and not hasattr(dataset, "offsets") else {}
    return sample_set(_load_checked(load_samples, str(value), kwargs), source=str(value))


def _load_checked(load_samples: Any, pack: str, kwargs: dict[str, Any]) -> Any:
    """``load_samples``, then every text compared with its decoded tokens by the pack's own tokenizer when one is
    known offline; else an ``UncheckedTextWarning`` says why they were not."""
    import warnings

    from much_dataset.decoded_text import UncheckedTextWarning
    from much_dataset.samples import check_sample_texts, read_samples_manifest
    from much_metric.models import local_tokenizer

    manifest = read_samples_manifest(pack)
    config = manifest.get("config") if isinstance(manifest.get("config"), Mapping) else {}
    tokenizer, said = local_tokenizer([manifest.get("model"), manifest.get("model_name"), config.get("model_name")])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UncheckedTextWarning)  # compared below, or said with the reason
        rows = load_samples(pack, **kwargs)
    if tokenizer is not None:
        check_sample_texts(rows, tokenizer, pack=pack)
    else:
        warnings.warn(f"--samples {pack}: texts not compared with their decoded tokens ({said})",
                      UncheckedTextWarning, stacklevel=1)
    return rows
