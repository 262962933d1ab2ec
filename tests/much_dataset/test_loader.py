"""much_dataset.load: local published folder, rows/ folder, "sample", hub id (monkeypatched), stopword_mask fill."""

from __future__ import annotations

import copy
import json
import os

import datasets
import numpy as np
import pyarrow as pa
import pytest

import much_dataset
from much_dataset import card, loader, schema, synthetic
from much_dataset.stopwords import EVALUATION_STOPWORDS
from much_dataset.validation import InvalidSampleError
from tests import assets
from tests.much_dataset._helpers import naive_bad_rows, write_rows

ROWS = synthetic.make_rows(24, seed=21)
SPLIT_ROWS = {"train": ROWS[:16], "test": ROWS[16:]}


def _hub_layout(rows):
    """The hub's untyped list-of-lists layout: float64 probabilities, int64 ids, no stopword_mask."""
    hub_rows = [{name: row[name] for name in schema.HUB_COLUMNS} for row in rows]
    return datasets.Dataset(pa.Table.from_pylist(hub_rows))


def _ids(dataset):
    return list(dataset[schema.GENERATION_ID])


def test_lazy_export():
    assert much_dataset.load is loader.load


def test_local_published_folder(tmp_path):
    card.write_parquet_folder(SPLIT_ROWS, tmp_path / "much")
    ds = much_dataset.load(tmp_path / "much", "es", "test", cache_dir=tmp_path / "cache")
    assert isinstance(ds, datasets.Dataset)
    assert ds.features == schema.features()
    assert _ids(ds) == [r[schema.GENERATION_ID] for r in SPLIT_ROWS["test"] if r[schema.LANG] == "es"]
    both = much_dataset.load(str(tmp_path / "much"), cache_dir=tmp_path / "cache")
    assert {split: len(part) for split, part in both.items()} == {"train": 16, "test": 8}


def test_local_rows_folder_goes_through_the_builder(tmp_path):
    folder = write_rows(tmp_path / "out", SPLIT_ROWS)
    ds = much_dataset.load(folder, "fr", cache_dir=tmp_path / "cache")
    assert ds["train"].features == schema.features()
    assert _ids(ds["train"]) == [r[schema.GENERATION_ID] for r in SPLIT_ROWS["train"] if r[schema.LANG] == "fr"]


def test_local_rows_folder_invalid_row_raises_our_error(tmp_path):
    rows = copy.deepcopy(SPLIT_ROWS["test"])
    rows[1][schema.OUTPUT_TOKENS].append(7)
    folder = write_rows(tmp_path / "out", {"train": SPLIT_ROWS["train"], "test": rows})
    with pytest.raises(InvalidSampleError) as caught:
        much_dataset.load(folder, cache_dir=tmp_path / "cache")
    assert caught.value.generation_id == rows[1][schema.GENERATION_ID]
    assert caught.value.field == schema.LOGITS_TOKEN_IDS


def test_local_rows_folder_drop_mode_reports(tmp_path):
    rows = copy.deepcopy(SPLIT_ROWS["train"])
    rows[2][schema.LABELS].append(1)
    folder = write_rows(tmp_path / "out", {"train": rows, "test": SPLIT_ROWS["test"]})
    with pytest.warns(UserWarning, match="dropped invalid rows"):
        ds = much_dataset.load(folder, split="train", on_error="drop", cache_dir=tmp_path / "c")
    assert len(ds) == len(rows) - 1
    # a fresh cache: a rows folder already prepared in a cache does not know its dropped rows' problems any more
    result = much_dataset.load_with_problems(folder, split="train", cache_dir=tmp_path / "c2")
    assert _ids(result.dataset) == _ids(ds)
    assert [(p.generation_id, p.field) for p in result.problems] == [(rows[2][schema.GENERATION_ID], schema.LABELS)]


def test_published_folder_is_validated_on_load(tmp_path):
    rows = copy.deepcopy(SPLIT_ROWS["train"])
    rows[4][schema.HUMAN_LABELS_0] = [5]
    card.write_parquet_folder({"train": rows}, tmp_path / "much", validate=False)
    with pytest.raises(InvalidSampleError) as caught:
        much_dataset.load(tmp_path / "much", split="train", cache_dir=tmp_path / "cache")
    assert (caught.value.generation_id, caught.value.field) == (rows[4][schema.GENERATION_ID], schema.HUMAN_LABELS_0)
    with pytest.warns(UserWarning):
        ds = much_dataset.load(tmp_path / "much", split="train", on_error="drop", cache_dir=tmp_path / "cache")
    assert rows[4][schema.GENERATION_ID] not in _ids(ds) and len(ds) == len(rows) - 1
    result = much_dataset.load_with_problems(tmp_path / "much", split="train", cache_dir=tmp_path / "cache")
    # two problems of one field: the label count and the label value
    assert {(p.generation_id, p.field) for p in result.problems} == {(rows[4][schema.GENERATION_ID],
                                                                       schema.HUMAN_LABELS_0)}
    assert len(result.problems) == 2


def test_sample(tmp_path):
    if card.is_parquet_folder(loader.SAMPLE_DIR):
        ds = much_dataset.load("sample", cache_dir=tmp_path)
        for part in ds.values():
            assert part.features[schema.LOGITS_VALUES] == schema.features()[schema.LOGITS_VALUES]
            assert len(part) > 0
            # Real rows (Mu-SHROOM outputs): the naive per-row validator agrees that every row is valid.
            rows = part.to_list()
            assert naive_bad_rows(rows) == set()
            arrays = loader.to_numpy(part, [schema.LOGITS_VALUES, schema.OUTPUT_TOKENS])
            assert all(v.shape == (len(t), schema.TOP_K)
                       for v, t in zip(arrays[schema.LOGITS_VALUES], arrays[schema.OUTPUT_TOKENS], strict=True))
        return
    if os.environ.get("CI"):
        pytest.fail(f"the embedded sample {loader.SAMPLE_DIR} is missing (CI is set)")
    # Until the builder writes it, "sample" must fail clearly rather than load something else.
    with pytest.raises(FileNotFoundError, match="embedded MUCH sample is missing"):
        much_dataset.load("sample", cache_dir=tmp_path)


def test_local_copy_of_the_hub_layout_without_configs(tmp_path):
    """Not monkeypatched: a folder laid out like orailix/MUCH (one default config, list-of-lists parquet)."""
    import pyarrow.parquet as pq

    (tmp_path / "hub" / "data").mkdir(parents=True)
    for split, rows in SPLIT_ROWS.items():
        hub_rows = [{name: row[name] for name in schema.HUB_COLUMNS} for row in rows]
        pq.write_table(pa.Table.from_pylist(hub_rows), tmp_path / "hub" / "data" / f"{split}-00000-of-00001.parquet")
    with pytest.warns(UserWarning, match="stopword_mask cannot be computed"):
        ds = much_dataset.load(tmp_path / "hub", "fr", cache_dir=tmp_path / "cache")
    for split, rows in SPLIT_ROWS.items():
        assert ds[split].features == schema.features(with_stopword_mask=False)
        assert _ids(ds[split]) == [r[schema.GENERATION_ID] for r in rows if r[schema.LANG] == "fr"]


def test_unrecognised_local_folder(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="neither a published MUCH folder"):
        much_dataset.load(tmp_path / "empty")


def test_bad_arguments():
    with pytest.raises(ValueError, match="config"):
        much_dataset.load("sample", config="it")
    with pytest.raises(ValueError, match="split"):
        much_dataset.load("sample", split="trash")
    with pytest.raises(ValueError, match="on_error"):
        much_dataset.load("sample", on_error="skip")


class _FakeHub:
    """Stands in for datasets.load_dataset on a hub id: one default config, list-of-lists columns."""

    def __init__(self, rows_by_split, *, configs=("default",)):
        self.rows_by_split = rows_by_split
        self.configs = configs
        self.calls = []

    def __call__(self, path, name=None, split=None, cache_dir=None, revision=None, **kwargs):
        self.calls.append((path, name, split, revision))
        if name is not None and name not in self.configs:
            raise ValueError(f"BuilderConfig '{name}' not found. Available: {list(self.configs)}")
        if split is not None:
            return _hub_layout(self.rows_by_split[split])
        return datasets.DatasetDict({s: _hub_layout(rows) for s, rows in self.rows_by_split.items()})


def test_hub_list_of_lists_cast_to_typed_view(monkeypatch):
    fake = _FakeHub(SPLIT_ROWS)
    monkeypatch.setattr(datasets, "load_dataset", fake)
    raw = _hub_layout(SPLIT_ROWS["test"])
    assert raw.features[schema.LOGITS_VALUES] == datasets.List(datasets.List(datasets.Value("float64")))
    with pytest.warns(UserWarning, match="stopword_mask cannot be computed"):
        ds = much_dataset.load(split="test", revision="main")
    assert fake.calls[0] == (schema.HUB_REPO_ID, "all", "test", "main")
    assert ds.features == schema.features(with_stopword_mask=False)
    batch = ds.with_format("numpy", dtype=None)[:]
    for values, ids, row in zip(batch[schema.LOGITS_VALUES], batch[schema.LOGITS_TOKEN_IDS], SPLIT_ROWS["test"],
                                strict=True):
        assert values.dtype == np.float32 and ids.dtype == np.int32
        np.testing.assert_array_equal(values, np.asarray(row[schema.LOGITS_VALUES], np.float32))
        np.testing.assert_array_equal(ids, np.asarray(row[schema.LOGITS_TOKEN_IDS]))


def test_hub_without_language_configs_is_filtered(monkeypatch):
    fake = _FakeHub(SPLIT_ROWS)
    monkeypatch.setattr(datasets, "load_dataset", fake)
    with pytest.warns(UserWarning):
        ds = much_dataset.load("someone/MUCH", "de")
    assert [call[1] for call in fake.calls] == ["de", None]
    for split, rows in SPLIT_ROWS.items():
        assert _ids(ds[split]) == [r[schema.GENERATION_ID] for r in rows if r[schema.LANG] == "de"]


def test_hub_other_errors_propagate(monkeypatch):
    def broken(*args, **kwargs):
        raise ValueError("Couldn't reach the hub")

    monkeypatch.setattr(datasets, "load_dataset", broken)
    with pytest.raises(ValueError, match="reach the hub"):
        much_dataset.load("someone/MUCH", "fr")


def test_hub_invalid_rows_are_caught(monkeypatch):
    rows = copy.deepcopy(SPLIT_ROWS["train"])
    rows[1][schema.LOGITS_VALUES][0][3] = float("nan")
    monkeypatch.setattr(datasets, "load_dataset", _FakeHub({"train": rows}))
    with pytest.raises(InvalidSampleError) as caught:
        much_dataset.load(split="train")
    assert (caught.value.generation_id, caught.value.field) == (rows[1][schema.GENERATION_ID], schema.LOGITS_VALUES)


def test_hub_row_with_23_candidates_named_before_the_cast(monkeypatch):
    rows = copy.deepcopy(SPLIT_ROWS["test"])
    rows[2][schema.LOGITS_VALUES][4].pop()
    rows[2][schema.LOGITS_TOKEN_IDS][4].pop()
    monkeypatch.setattr(datasets, "load_dataset", _FakeHub({"test": rows}))
    with pytest.raises(InvalidSampleError, match="token 4") as caught:
        much_dataset.load(split="test")
    assert caught.value.generation_id == rows[2][schema.GENERATION_ID]


def test_hub_missing_column(monkeypatch):
    monkeypatch.setattr(datasets, "load_dataset", lambda *a, **k: _hub_layout(ROWS).remove_columns(schema.LABELS))
    with pytest.raises(ValueError, match="labels"):
        much_dataset.load(split="test")


# --- stopword_mask fill -----------------------------------------------------------------------------------------------

# meta-llama/Llama-3.1-8B-Instruct, T=1.0 (docs/reference-behaviour.md#generation-configs)
LLAMA_CONFIG = "HmRDWrH188fefK4uXNC_ew"
GEMMA_CONFIG = "Q6U-toJrtxVpeYhI11BKiQ"
OTHER_CONFIG = "not-a-MUCH-config-llama3"


def _rows_with_real_tokens(tokenizer, config, *, n=6, offset=0):
    """Synthetic rows whose output_tokens are the real tokenization of Mu-SHROOM outputs."""
    texts = []
    for path in assets.mushroom_files():
        with path.open(encoding="utf-8") as handle:
            texts.extend(json.loads(line)["model_output_text"] for _, line in zip(range(3), handle, strict=False))
    rows = synthetic.make_rows(n, seed=31 + offset, with_stopword_mask=False)
    for row, text in zip(rows, texts[offset:], strict=False):
        tokens = tokenizer.encode(text, add_special_tokens=False)[:40]
        n_tokens = len(row[schema.OUTPUT_TOKENS])
        tokens = (tokens * (n_tokens // max(len(tokens), 1) + 1))[:n_tokens]
        row[schema.OUTPUT_TOKENS] = tokens
        for ids, token in zip(row[schema.LOGITS_TOKEN_IDS], tokens, strict=True):
            if token not in ids:
                ids[0] = token  # keep the sampled token among the candidates
        row[schema.GENERATION_CONFIG] = config
        row[schema.GENERATION_ID] = f"{config}-{row[schema.GENERATION_ID]}"
    return rows


def _expected_mask(tokens, tokenizer):
    # Independent, straightforward: one decode per token, no caching, no numpy.
    return [tokenizer.decode([token]).lower().strip() in EVALUATION_STOPWORDS for token in tokens]


def test_stopword_mask_filled_with_a_real_tokenizer_by_model_name(monkeypatch):
    assets.require("mushroom")
    tokenizer = assets.llama3_tokenizer()
    rows = _rows_with_real_tokens(tokenizer, LLAMA_CONFIG)
    monkeypatch.setattr(datasets, "load_dataset", _FakeHub({"test": rows}))
    ds = much_dataset.load(split="test", tokenizers={"meta-llama/Llama-3.1-8B-Instruct": tokenizer})
    assert ds.features[schema.STOPWORD_MASK] == datasets.List(datasets.Value("bool"))
    masks = list(ds[schema.STOPWORD_MASK])
    for mask, row in zip(masks, rows, strict=True):
        assert mask == _expected_mask(row[schema.OUTPUT_TOKENS], tokenizer)
    flat = np.concatenate(masks)
    assert 0 < flat.sum() < len(flat)  # real text has both stopwords and content tokens


def test_stopword_mask_partial_fill_names_the_missing_model(monkeypatch):
    # A config outside MUCH (here: Llama-3 token ids under another config id) has no packaged table.
    assets.require("mushroom")
    llama = assets.llama3_tokenizer()
    gemma = assets.gemma3_tokenizer()
    rows = _rows_with_real_tokens(llama, OTHER_CONFIG, n=4) + _rows_with_real_tokens(gemma, GEMMA_CONFIG, n=4,
                                                                                     offset=4)
    monkeypatch.setattr(datasets, "load_dataset", _FakeHub({"train": rows}))
    calls = []

    def tokenizer_for(config):
        calls.append(config)
        return gemma if config == GEMMA_CONFIG else None

    with pytest.warns(UserWarning, match=OTHER_CONFIG) as record:
        ds = much_dataset.load(split="train", tokenizers=tokenizer_for)
    assert len(record) == 1 and "gemma" not in str(record[0].message)
    assert sorted(calls) == sorted([GEMMA_CONFIG, OTHER_CONFIG])
    for mask, row in zip(ds[schema.STOPWORD_MASK], rows, strict=True):
        if row[schema.GENERATION_CONFIG] == GEMMA_CONFIG:
            assert mask == _expected_mask(row[schema.OUTPUT_TOKENS], gemma)
        else:
            assert mask is None


def test_existing_stopword_mask_is_kept(tmp_path):
    card.write_parquet_folder(SPLIT_ROWS, tmp_path / "much")

    class Exploding:
        def decode(self, ids):
            raise AssertionError("must not decode when the column exists")

    ds = much_dataset.load(tmp_path / "much", split="train", tokenizers={"synthetic": Exploding()},
                           cache_dir=tmp_path / "cache")
    # The "all" config reads the shards language by language, so compare by generation_id.
    got = dict(zip(ds[schema.GENERATION_ID], ds[schema.STOPWORD_MASK], strict=True))
    assert got == {row[schema.GENERATION_ID]: row[schema.STOPWORD_MASK] for row in SPLIT_ROWS["train"]}


def test_fill_on_a_filtered_dataset_uses_the_selected_rows():
    rows = synthetic.make_rows(10, seed=2, with_stopword_mask=False)

    class Parity:
        def decode(self, ids):
            return "the" if ids[0] % 2 else "cat"

    ds = _hub_layout(rows).select([7, 2, 5])
    filled = loader.fill_stopword_mask(ds, tokenizers={"synthetic": Parity()})
    for mask, index in zip(filled[schema.STOPWORD_MASK], [7, 2, 5], strict=True):
        assert mask == [token % 2 == 1 for token in rows[index][schema.OUTPUT_TOKENS]]


# --- to_numpy -------------------------------------------------------------------------------------------------------


def test_to_numpy_matches_the_datasets_numpy_formatter(tmp_path):
    rows = synthetic.make_rows(30, seed=9)
    rows[4][schema.STOPWORD_MASK] = None
    card.write_parquet_folder({"train": rows}, tmp_path / "much")
    ds = much_dataset.load(tmp_path / "much", split="train", cache_dir=tmp_path / "cache").select([5, 1, 20, 4, 7])
    fast = loader.to_numpy(ds)
    reference = ds.with_format("numpy", dtype=None)[:]
    assert set(fast) == set(ds.column_names)
    for name in ds.column_names:
        for got, want in zip(fast[name], reference[name], strict=True):
            if name == schema.TOKEN_CHUNKS:
                assert [chunk.tolist() for chunk in got] == [np.asarray(chunk).tolist() for chunk in want]
                assert all(chunk.dtype == np.int32 for chunk in got)
            elif want is None or isinstance(want, str):
                assert got == want
            else:
                want = np.asarray(want)
                assert got.dtype == want.dtype, name
                np.testing.assert_array_equal(got, want)
    assert fast[schema.LOGITS_VALUES][0].shape == (len(fast[schema.OUTPUT_TOKENS][0]), schema.TOP_K)
    assert loader.to_numpy(ds.select([]), [schema.LOGITS_VALUES, schema.LABELS]) == {
        schema.LOGITS_VALUES: [], schema.LABELS: []}
