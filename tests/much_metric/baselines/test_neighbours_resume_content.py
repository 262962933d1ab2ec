"""``much neighbours`` resumes by content (#22): blocks are keyed by a digest of their documents, not by the corpus
file's name, so a changed file in the same ``--out`` is recounted and never gives the old corpus's statistics."""

from __future__ import annotations

import pytest

from much_metric.baselines.neighbour_job import CountOptions, Source, count_shard, files_source, reduce_shards
from much_metric.baselines.neighbours import load_neighbours
from much_metric.cli import main
from tests.much_metric.baselines.test_neighbours import _corpus, word_tokenizer

BLOCKS_OF_5 = CountOptions(block_size=5)


def _fresh(tmp_path, docs, name):
    count_shard([Source("s", lambda: docs)], word_tokenizer(), tmp_path / name, tokenizer_name="w", options=BLOCKS_OF_5)
    return reduce_shards(tmp_path / name, word_tokenizer()).to_bytes()


def test_a_changed_corpus_in_the_same_folder_is_recounted(tmp_path):
    old, new = _corpus(40, 0), _corpus(40, 1)
    new[:10] = old[:10]  # the first two blocks are unchanged: they are reused, the rest recounted
    count_shard([Source("s", lambda: old)], word_tokenizer(), tmp_path / "job", tokenizer_name="w", options=BLOCKS_OF_5)
    summary = count_shard([Source("s", lambda: new)], word_tokenizer(), tmp_path / "job", tokenizer_name="w",
                          options=BLOCKS_OF_5)
    assert (summary["counted"], summary["skipped"]) == (6, 2)
    assert reduce_shards(tmp_path / "job", word_tokenizer()).to_bytes() == _fresh(tmp_path, new, "clean")
    assert _fresh(tmp_path, new, "clean") != _fresh(tmp_path, old, "old")  # the test would see stale counts
    assert len(list((tmp_path / "job" / "blocks").iterdir())) == 8  # stale blocks removed


def test_shards_that_read_different_corpora_are_refused(tmp_path):
    old, new = _corpus(40, 0), _corpus(40, 1)
    count_shard([Source("s", lambda: old)], word_tokenizer(), tmp_path / "job", tokenizer_name="w", options=BLOCKS_OF_5,
                shard=(0, 2))
    count_shard([Source("s", lambda: new)], word_tokenizer(), tmp_path / "job", tokenizer_name="w", options=BLOCKS_OF_5,
                shard=(1, 2))
    with pytest.raises(ValueError, match="corpus changed"):
        reduce_shards(tmp_path / "job", word_tokenizer())


def test_cli_rerun_after_editing_the_file(tmp_path, capsys):
    text = tmp_path / "corpus.txt"
    tokenizer = tmp_path / "tokenizer.json"
    word_tokenizer().save(str(tokenizer))
    argv = ["neighbours", "--tokenizer", str(tokenizer), "--files", str(text), "--out", str(tmp_path / "job"),
            "--no-progress", "--top", "2"]
    text.write_text("a b c\nb a b\n", encoding="utf-8")
    assert main(argv) == 0
    text.write_text("d e d\ne d e\n", encoding="utf-8")  # same name, same size, other content
    assert main(argv) == 0
    assert "1 blocks counted, 0 already done" in capsys.readouterr().out
    stats = load_neighbours(tmp_path / "job")
    fresh = tmp_path / "fresh"
    assert main([*argv[:-5], "--out", str(fresh), "--no-progress", "--top", "2"]) == 0
    assert stats.to_bytes() == load_neighbours(fresh).to_bytes()
    assert list(files_source([text]).documents()) == ["d e d", "e d e"]
