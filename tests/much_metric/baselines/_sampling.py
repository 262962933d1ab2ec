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


class _AnyTitle(dict):
    """Pages for every title: an extract made from the title, the row's own answer for ``own``, and no page for
    ``missing`` (titles with spaces, as MediaWiki answers)."""

    def __init__(self, own: dict[str, str], missing: set[str]) -> None:
        super().__init__()
        self.own, self.missing = own, missing

    def get(self, key, default=None):
        lang, title = key
        if title in self.missing:
            return None
        text = self.own.get(title) or (f"{title} is the subject of this article. It was described in 1901 by "
                                        f"Ada Lovelace.\n\n== History ==\n{title} has a long history in Europe.")
        return {"extract": text, "wikitext": "{{Infobox thing\n| name = " + title + "\n}}"}


def _title(url: str) -> str:
    from builder.wiki import parse_wiki_url

    return parse_wiki_url(url)[1].replace("_", " ")


def fetch_reference(out, rows, own=(), missing=(), context=False):
    """``builder wiki`` (and ``context``) for ``rows`` into ``out`` from a local MediaWiki stand-in: an article made
    from each title, the row's own answer for ``own``, no page for ``missing``."""
    from builder.cli import main
    from tests.builder.fake_servers import FakeMediaWiki

    out.mkdir(parents=True, exist_ok=True)
    keep = ("generation_id", "generation_config", "lang", "wiki_url", "prompt", "output")
    (out / "generations.jsonl").write_text("".join(json.dumps({k: r[k] for k in keep}) + "\n" for r in rows),
                                           encoding="utf-8")
    pages = _AnyTitle({_title(r["wiki_url"]): r["output"].replace("<|im_end|>", "") for r in own},
                      {_title(r["wiki_url"]) for r in missing})
    with FakeMediaWiki(redirects={}) as server:
        server.pages = pages  # every title (the constructor copies into a plain dict)
        assert main(["wiki", "--out", str(out), "--api", server.api_template, "--min-interval", "0"]) == 0
    if context:
        assert main(["context", "--out", str(out), "--embeddings", "local"]) == 0
