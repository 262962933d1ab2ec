"""The dataset card's descriptive metadata and sizes: the embedded sample's card, and what write_parquet_folder
records (num_bytes = the Arrow size of the rows, download_size = the parquet bytes)."""

from __future__ import annotations

import pyarrow.parquet as pq
import yaml

from much_dataset import card, schema
from much_dataset.loader import SAMPLE_DIR
from much_dataset.synthetic import make_rows


def _header(folder):
    text = (folder / card.CARD_FILENAME).read_text(encoding="utf-8")
    return yaml.safe_load(text.split("---\n")[1]), text


def test_sample_card_is_complete_and_has_no_empty_rows():
    meta, text = _header(SAMPLE_DIR)
    assert meta["license"] == "cc-by-4.0"  # Mu-SHROOM's licence
    assert meta["language"] == ["en", "fr", "es", "de"]
    assert "Mu-SHROOM" in meta["pretty_name"] and meta["task_categories"] and meta["size_categories"] == ["n<1K"]
    for info in meta["dataset_info"]:
        assert [s["name"] for s in info["splits"]] == ["test"]
        assert all(s["num_bytes"] > 0 for s in info["splits"]) and info["download_size"] > 0
    for empty in ("| train | 0", "| trash (not published) | 0"):
        assert empty not in text


def test_num_bytes_and_download_size_are_measured(tmp_path):
    rows = make_rows(12)
    card.write_parquet_folder({"train": rows[:8], "test": rows[8:]}, tmp_path)
    meta, _ = _header(tmp_path)
    assert "license" not in meta  # only the builder knows the source's licence
    infos = {info["config_name"]: info for info in meta["dataset_info"]}
    for lang in schema.LANGUAGES:
        if lang not in infos:
            continue
        for split in infos[lang]["splits"]:
            shard = tmp_path / card.shard_path(lang, split["name"])
            # The Arrow size as written; read back, validity buffers may add a few bytes per column.
            assert abs(split["num_bytes"] - pq.read_table(shard).nbytes) <= 0.05 * split["num_bytes"]
        assert infos[lang]["download_size"] == sum((tmp_path / card.shard_path(lang, s["name"])).stat().st_size
                                                   for s in infos[lang]["splits"])
    total = sum(s["num_bytes"] for s in infos["all"]["splits"])
    assert infos["all"]["dataset_size"] == total > 0
    assert meta["language"] == [lang for lang in schema.LANGUAGES if lang in infos]
