"""Issue #31 regression: every file layout that ``push_to_hub`` and the hub write loads from a local copy, with or
without ``stopword_mask`` -- including per-language names ``data/<split>-<lang>-00000-of-00001.parquet``, which
``datasets``' default split patterns reject ("Split name should match ...")."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import much_dataset
from much_dataset import schema
from tests.much_dataset.test_loader_shards import SPLIT_ROWS

#: (relative path template, whether one file per language): datasets 5.x push_to_hub writes
#: ``{data_dir}/{split}-{index:05d}-of-{num_shards:05d}.parquet`` with data_dir ``data`` for the default config and the
#: config's name otherwise; the reference's hub copy holds one file per split and language.
LAYOUTS = {
    "push_to_hub default config": ("data/{split}-00000-of-00001.parquet", False),
    "push_to_hub named config": ("all/{split}-00000-of-00001.parquet", False),
    "per-language names": ("data/{split}-{lang}-00000-of-00001.parquet", True),
    "per-language folders": ("data/{lang}/{split}-00000-of-00001.parquet", True),
    "split folders": ("{split}/{lang}.parquet", True),
}


def _write(folder, template, per_lang, columns):
    for split, rows in SPLIT_ROWS.items():
        groups = {lang: [r for r in rows if r[schema.LANG] == lang] for lang in schema.LANGUAGES} if per_lang \
            else {"": rows}
        for lang, part in groups.items():
            if not part:
                continue
            path = folder / template.format(split=split, lang=lang)
            path.parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(pa.Table.from_pylist([{name: row[name] for name in columns} for row in part]), path)


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("with_mask", [False, True], ids=["without stopword_mask", "with stopword_mask"])
def test_every_hub_layout_loads(tmp_path, layout, with_mask):
    template, per_lang = LAYOUTS[layout]
    columns = [*schema.HUB_COLUMNS, *([schema.STOPWORD_MASK] if with_mask else [])]
    _write(tmp_path / "hub", template, per_lang, columns)
    if with_mask:
        loaded = much_dataset.load(tmp_path / "hub")
    else:
        with pytest.warns(UserWarning, match="stopword_mask"):
            loaded = much_dataset.load(tmp_path / "hub")
    assert {split: sorted(loaded[split][schema.GENERATION_ID]) for split in loaded} == {
        split: sorted(r[schema.GENERATION_ID] for r in rows) for split, rows in SPLIT_ROWS.items()}
    lang = SPLIT_ROWS["test"][0][schema.LANG]
    if with_mask:
        english = much_dataset.load(tmp_path / "hub", config=lang, split="test")
    else:
        with pytest.warns(UserWarning, match="stopword_mask"):
            english = much_dataset.load(tmp_path / "hub", config=lang, split="test")
    assert set(english[schema.LANG]) == {lang}
    assert len(english) == sum(r[schema.LANG] == lang for r in SPLIT_ROWS["test"])


def test_a_file_of_no_split_is_named(tmp_path):
    _write(tmp_path / "hub", "data/{split}-{lang}-00000-of-00001.parquet", True, schema.HUB_COLUMNS)
    (tmp_path / "hub" / "data" / "extra-00000.parquet").write_bytes(
        (next((tmp_path / "hub" / "data").iterdir())).read_bytes())
    with pytest.raises(FileNotFoundError, match="extra-00000.parquet: cannot tell which split"):
        much_dataset.load(tmp_path / "hub")
