"""Neighbour statistics: a hand-made corpus counted by hand, counting against a per-token Counter loop, sharded =
unsharded byte for byte, resume after a kill, the hub path on a local dataset folder, the file format, the CLI."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest
from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from tokenizers.pre_tokenizers import Whitespace

from much_metric.baselines.neighbour_job import (
    CountOptions,
    Source,
    count_shard,
    files_source,
    hub_source,
    parse_shard,
    reduce_shards,
)
from much_metric.baselines.neighbours import NeighbourStats, clip_top, count_pairs, load_neighbours, merge_counts
from much_metric.cli import main

WORDS = ["[UNK]", "a", "b", "c", "d", "e"]

BLOCKS_OF_5 = CountOptions(block_size=5)
BLOCKS_OF_7 = CountOptions(block_size=7)
SMALL = CountOptions(block_size=5, keep=3)


def word_tokenizer(words=WORDS):
    tokenizer = Tokenizer(WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = Whitespace()
    return tokenizer


def test_hand_corpus(tmp_path):
    # "a b c": b (interior) has neighbours a, c. "b a b": a has neighbour b twice. First/last tokens are no targets.
    source = Source("hand", lambda: ["a b c", "b a b"])
    for position, want_b, want_a in ((0, [1, 3], [2]), (1, [3], [2])):
        out = tmp_path / str(position)
        count_shard([source], word_tokenizer(), out, tokenizer_name="words",
                    options=CountOptions(position=position))
        stats = reduce_shards(out, word_tokenizer(), top=4)
        assert stats.neighbours[2][stats.neighbours[2] >= 0].tolist() == want_b
        assert stats.neighbours[1][stats.neighbours[1] >= 0].tolist() == want_a
        assert stats.counts[1, 0] == (2 if position == 0 else 1)
        assert (stats.neighbours[[0, 3, 4, 5]] == -1).all()
        assert stats.n_tokens == 6 and stats.vocabulary == tuple(WORDS) and stats.position == position


def counter_loop(docs, vocab_size, position=0):
    """The reference's structure: a dict per token, one Python step per token."""
    neighbours = [Counter() for _ in range(vocab_size)]
    for ids in docs:
        for i in range(1, len(ids) - 1):
            if position == 0:
                neighbours[ids[i]][ids[i - 1]] += 1
            neighbours[ids[i]][ids[i + 1]] += 1
    return neighbours


@pytest.mark.parametrize("position", [0, 1])
def test_count_pairs_matches_counter_loop(position):
    rng = np.random.default_rng(position)
    docs = [rng.integers(0, 30, rng.integers(0, 12)).tolist() for _ in range(200)]
    keys, counts = count_pairs(np.concatenate([np.asarray(d, dtype=np.int64) for d in docs]),
                               np.asarray([len(d) for d in docs]), 30, position=position)
    got = [Counter() for _ in range(30)]
    for key, count in zip(keys.tolist(), counts.tolist(), strict=True):
        got[key // 30][key % 30] = count
    assert got == counter_loop(docs, 30, position)
    # Clipping keeps the most frequent, ties to the smaller id.
    clipped_keys, clipped_counts = clip_top(keys, counts, 30, 2)
    for target in range(30):
        ranked = sorted(got[target].items(), key=lambda kv: (-kv[1], kv[0]))[:2]
        mine = [(int(k % 30), int(c)) for k, c in zip(clipped_keys, clipped_counts, strict=True) if k // 30 == target]
        assert sorted(mine) == sorted(ranked)
    # Merging is exact summation.
    merged_keys, merged_counts = merge_counts([(keys, counts), (keys[::2], counts[::2])])
    assert merged_counts.sum() == counts.sum() + counts[::2].sum()


def _corpus(n_docs=57, seed=0):
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS[1:], rng.integers(1, 9))) for _ in range(n_docs)]


def test_sharded_equals_unsharded_byte_for_byte(tmp_path):
    docs_a, docs_b = _corpus(57, 0), _corpus(23, 1)
    sources = [Source("a", lambda: docs_a), Source("b", lambda: docs_b)]
    count_shard(sources, word_tokenizer(), tmp_path / "one", tokenizer_name="w", options=SMALL)
    one = reduce_shards(tmp_path / "one", word_tokenizer(), top=2).to_bytes()
    for shard in range(3):
        count_shard(sources, word_tokenizer(), tmp_path / "three", tokenizer_name="w", options=SMALL,
                    shard=(shard, 3))
        if shard < 2:
            with pytest.raises(ValueError, match="have not finished"):
                reduce_shards(tmp_path / "three", word_tokenizer(), top=2)
    assert reduce_shards(tmp_path / "three", word_tokenizer(), top=2).to_bytes() == one
    saved = tmp_path / "stats.npz"
    stats = reduce_shards(tmp_path / "one", word_tokenizer(), top=2)
    stats.save(saved)
    loaded = load_neighbours(saved)
    assert loaded.to_bytes() == stats.to_bytes() and loaded.vocabulary == stats.vocabulary
    with pytest.raises(FileNotFoundError, match="holds no neighbours.npz"):
        load_neighbours(tmp_path)
    with pytest.raises(ValueError, match="not a neighbour statistics file"):
        NeighbourStats.from_file(tmp_path / "one" / "manifest.json")


def test_resume_after_kill(tmp_path):
    docs = _corpus(40)
    calls = []

    class Killed(Exception):
        pass

    def killed_after(n):
        def documents():
            for i, doc in enumerate(docs):
                if i == n:
                    raise Killed
                yield doc
        return documents

    class Counting:
        def __init__(self):
            self.inner = word_tokenizer()

        def encode_batch(self, texts, add_special_tokens=True):
            calls.append(len(texts))
            return self.inner.encode_batch(texts, add_special_tokens=add_special_tokens)

        def get_vocab(self, with_added_tokens=True):
            return self.inner.get_vocab(with_added_tokens=with_added_tokens)

    with pytest.raises(Killed):
        count_shard([Source("s", killed_after(23))], Counting(), tmp_path / "job", tokenizer_name="w",
                    options=BLOCKS_OF_5)
    assert calls == [5, 5, 5, 5]  # four whole blocks written before the kill
    calls.clear()
    count_shard([Source("s", lambda: docs)], Counting(), tmp_path / "job", tokenizer_name="w", options=BLOCKS_OF_5)
    assert calls == [5, 5, 5, 5]  # only the blocks not on disk
    count_shard([Source("s", lambda: docs)], word_tokenizer(), tmp_path / "clean", tokenizer_name="w",
                options=BLOCKS_OF_5)
    assert (reduce_shards(tmp_path / "job", word_tokenizer()).to_bytes()
            == reduce_shards(tmp_path / "clean", word_tokenizer()).to_bytes())
    with pytest.raises(ValueError, match="another job"):
        count_shard([Source("s", lambda: docs)], word_tokenizer(), tmp_path / "job", tokenizer_name="w",
                    options=BLOCKS_OF_7)


def test_hub_source_on_a_local_dataset_folder(tmp_path):
    folder = tmp_path / "wiki"
    folder.mkdir()
    docs = _corpus(30, 3)
    (folder / "train.jsonl").write_text("".join(json.dumps({"text": d, "id": i}) + "\n" for i, d in enumerate(docs)))
    streamed = list(hub_source(str(folder), None, n_articles=10, streaming=True).documents())
    assert len(streamed) == 10 and set(streamed) <= set(docs)
    assert streamed == list(hub_source(str(folder), None, n_articles=10, streaming=True).documents())  # seeded
    full = list(hub_source(str(folder), None, n_articles=10, streaming=False).documents())
    import datasets

    want = datasets.load_dataset(str(folder), split="train").shuffle(seed=42).select(range(10))["text"]
    assert full == want  # the reference's selection


def test_files_source_and_cli(tmp_path, capsys):
    text = tmp_path / "corpus.txt"
    text.write_text("a b c\n\nb a b\n", encoding="utf-8")
    assert list(files_source([text]).documents()) == ["a b c", "b a b"]
    tokenizer = tmp_path / "tokenizer.json"
    word_tokenizer().save(str(tokenizer))
    out = tmp_path / "job"
    assert main(["neighbours", "--tokenizer", str(tokenizer), "--files", str(text), "--out", str(out),
                 "--no-progress", "--top", "4"]) == 0
    stats = load_neighbours(out)
    assert stats.neighbours[2][:2].tolist() == [1, 3]
    assert main(["neighbours", "--tokenizer", str(tokenizer), "--out", str(tmp_path / "x")]) == 2
    assert "much neighbours: error: give a corpus" in capsys.readouterr().err
    with pytest.raises(ValueError, match="i/n"):
        parse_shard("3")
    with pytest.raises(ValueError, match="need 0 <= i < n"):
        parse_shard("4/4")


def test_encode_documents_matches_per_document_encode():
    """The batched (fast) Rust encoding gives each document's ids as the tokenizer's own per-document encode, on the
    real SmolLM2 tokenizer (multilingual text, special tokens as encode adds them)."""
    from much_metric.baselines.neighbour_job import encode_documents
    from much_metric.models import SMOLLM2, load_tokenizer

    tokenizer = load_tokenizer(SMOLLM2)
    texts = ["Die Hauptstadt ist Berlin.", "", "¿Dónde está la estación?  L'été à Paris…", "a" * 300, "\n\n x"]
    ids, lengths = encode_documents(tokenizer, texts)
    want = [tokenizer.encode(text) for text in texts]
    assert lengths.tolist() == [len(w) for w in want]
    assert ids.tolist() == [i for w in want for i in w]
