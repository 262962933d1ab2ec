"""The embedded sample's four languages as one JSONL source for ``python -m builder internals`` (bench helper)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq

SAMPLE = Path(__file__).resolve().parents[1] / "much_dataset" / "sample" / "data"
LANGS = ("de", "en", "es", "fr")


def write_sample_source(path: Path) -> Path:
    """Write every sample row to ``path`` as JSONL, the languages interleaved (de, en, es, fr, de, ...: a partial
    pack covers every language), once (an existing file is kept, so the fingerprint of a pack being resumed does not
    change)."""
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    per_language = [[row for shard in sorted((SAMPLE / lang).glob("*.parquet"))
                     for row in pq.read_table(shard).to_pylist()] for lang in LANGS]
    tmp = path.with_suffix(".partial")
    with open(tmp, "w", encoding="utf-8") as handle:
        for position in range(max(len(rows) for rows in per_language)):
            for rows in per_language:
                if position < len(rows):
                    handle.write(json.dumps(rows[position], ensure_ascii=False) + "\n")
    tmp.replace(path)
    return path


if __name__ == "__main__":
    import sys

    print(write_sample_source(Path(sys.argv[1])))
