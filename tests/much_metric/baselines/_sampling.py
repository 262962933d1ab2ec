"""Shared fixtures of the sampling / reference detector tests: a few embedded-sample rows, their samples in the
samples-pack format, and deterministic stand-ins for an encoder.

``tests/data/sample_samples.jsonl`` holds real SmolLM2-135M answers to five embedded-sample prompts (4 per row,
drawn once on CPU: T 1.0, top-p 0.9, top-k 20, 96 new tokens), the text
columns of a samples pack (``generation_id``, ``sample_index``, ``output``, ``finished``, ``sampling``) -- the token and
probability columns are left out to keep the file small; the detectors read only the texts.
"""

from __future__ import annotations

import functools
import json
import zlib
from pathlib import Path

import numpy as np

SAMPLES_FILE = Path(__file__).resolve().parents[2] / "data" / "sample_samples.jsonl"


@functools.lru_cache(maxsize=1)
def samples_rows() -> tuple[dict, ...]:
    return tuple(json.loads(line) for line in SAMPLES_FILE.read_text(encoding="utf-8").splitlines() if line)


def sample_split():
    """The embedded-sample rows that the samples file covers, in the sample's order."""
    import much_dataset

    data = much_dataset.load("sample", split="test")
    wanted = {row["generation_id"] for row in samples_rows()}
    return data.select([i for i, gid in enumerate(data["generation_id"]) if gid in wanted])


def samples_dataset(rows=None):
    """The samples as a ``datasets.Dataset`` in the pack's format and order (row order, then sample_index)."""
    import datasets

    rows = list(samples_rows() if rows is None else rows)
    order = {gid: i for i, gid in enumerate(sample_split()["generation_id"])}
    rows.sort(key=lambda r: (order.get(r["generation_id"], -1), r["sample_index"]))
    return datasets.Dataset.from_list(rows)


class HashEncoder:
    """A deterministic encoder: each text's vector is drawn from a generator seeded by the text's CRC-32."""

    name = "hash-encoder"

    def __init__(self, dim: int = 24) -> None:
        self.dim = dim
        self.calls: list[str] = []

    def encode(self, texts):
        self.calls.extend(texts)
        return np.array([np.random.default_rng(zlib.crc32(t.encode())).normal(size=self.dim) for t in texts])
