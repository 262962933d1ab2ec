"""A private split made from part of the embedded sample, the way a maintainer makes one (test helper).

:func:`make_hidden_split` writes builder artifacts (``generations.jsonl``, ``segments.jsonl``, the Mu-SHROOM judge's
``labels.mushroom.jsonl``, ``configs.jsonl``) for the sample rows whose ``generation_id`` hashes odd, runs
``python -m builder export --split test --judge mushroom --withhold-labels`` on them, and writes the other rows as a
labelled published folder: the public split of a board whose private split is the exported one.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")


@dataclass(frozen=True)
class HiddenSplit:
    public: Path  # labelled published folder (the public split)
    private: Path  # published folder of the private split: no label
    labels: Path  # its label file (+ .sha256 next to it)
    out: Path  # the builder's artifact folder
    private_ids: frozenset[str]


def is_private(generation_id: str) -> bool:
    return int(hashlib.sha256(generation_id.encode()).hexdigest()[:8], 16) % 2 == 1


def _write(path: Path, records) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")


def _fresh(row: dict) -> dict:
    """The row as a fresh generation: another id and another generation config (no row of the sample)."""
    config = hashlib.sha256(("fresh/" + row["generation_config"]).encode()).hexdigest()[:len(row["generation_config"])]
    return {**row, "generation_id": "fresh-" + row["generation_id"], "generation_config": config}


def make_hidden_split(folder: Path, *, fresh: bool = False, one_class: bool = False) -> HiddenSplit:
    """``fresh``: the private rows get new ids and configs (a split of rows the sample does not hold, as a real hidden
    split is, so a board over the whole sample can take it); ``one_class``: every label of the private split is +1."""
    import much_dataset
    from builder.cli import main
    from much_dataset import schema
    from much_dataset.card import write_parquet_folder
    from much_dataset.loader import SAMPLE_DIR

    folder = Path(folder)
    sample = much_dataset.load("sample", split="test")
    private_rows = sample.filter(lambda gid: is_private(gid), input_columns=schema.GENERATION_ID)
    public_rows = sample.filter(lambda gid: not is_private(gid), input_columns=schema.GENERATION_ID)
    write_parquet_folder({"test": public_rows.with_format("arrow")[:]}, folder / "public")
    # the sample's second label source (soft Mu-SHROOM labels) labels the public rows too
    shutil.copytree(SAMPLE_DIR / "label_sources", folder / "public" / "label_sources")
    out = folder / "builder"
    out.mkdir(parents=True, exist_ok=True)
    rows = private_rows.to_list()
    if fresh:
        rows = [_fresh(r) for r in rows]
    if one_class:
        rows = [{**r, schema.LABELS: [1] * len(r[schema.LABELS])} for r in rows]
    _write(out / "generations.jsonl", [{**{k: r[k] for k in schema.HUB_COLUMNS[:9]}, "finished": True}
                                       for r in rows])
    _write(out / "segments.jsonl", [{schema.GENERATION_ID: r[schema.GENERATION_ID],
                                     schema.TOKEN_CHUNKS: r[schema.TOKEN_CHUNKS],
                                     schema.STOPWORD_MASK: r[schema.STOPWORD_MASK], "segmenter": "0.2.1"}
                                    for r in rows])
    # what import-mushroom writes: the judge's labels and its per-claim annotations (label-derived fields)
    _write(out / "labels.mushroom.jsonl", [{schema.GENERATION_ID: r[schema.GENERATION_ID], "judge": "mushroom",
                                            schema.LABELS: r[schema.LABELS], "rule": "hard",
                                            "labels_hard": r[schema.LABELS],
                                            "soft_max": [float(v == -1) for v in r[schema.LABELS]]} for r in rows])
    configs = sorted({r[schema.GENERATION_CONFIG] for r in rows})
    _write(out / "configs.jsonl", [{schema.GENERATION_CONFIG: c, "model_name": f"model-{c[:6]}", "temperature": 1.0,
                                    "seed": 2, "top_p": 0.9, "top_k": 20, "max_new_tokens": 500} for c in configs])
    code = main(["export", "--out", str(out), "--split", "test", "--judge", "mushroom", "--withhold-labels",
                 "--folder", str(folder / "private")])
    assert code == 0
    return HiddenSplit(public=folder / "public", private=folder / "private", labels=out / "private" / "labels.json",
                       out=out, private_ids=frozenset(r[schema.GENERATION_ID] for r in rows))


def made_in_session(tmp_path_factory, name: str = "hidden_split", **options) -> HiddenSplit:
    """:func:`make_hidden_split` for a session- or module-scoped fixture: with its own datasets cache (the per-test
    private caches are not set up at that scope)."""
    import pytest

    cache = tmp_path_factory.mktemp(f"{name}_datasets_cache")
    with pytest.MonkeyPatch.context() as patch:
        import datasets.config

        patch.setenv("HF_DATASETS_CACHE", str(cache))
        patch.setattr(datasets.config, "HF_DATASETS_CACHE", cache)
        patch.setattr(datasets.config, "DOWNLOADED_DATASETS_PATH", cache / "downloads")
        patch.setattr(datasets.config, "EXTRACTED_DATASETS_PATH", cache / "downloads" / "extracted")
        return make_hidden_split(tmp_path_factory.mktemp(name), **options)
