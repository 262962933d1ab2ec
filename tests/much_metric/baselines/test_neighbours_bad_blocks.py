"""Issue #31 regression: ``much neighbours --reduce`` over a block file that is not a block (garbage, a truncated
archive, an archive with wrong arrays) was a ``BadZipFile`` traceback; it is one line naming the file, exit 2."""

from __future__ import annotations

import io
import zipfile

import numpy as np
import pytest

from much_metric.cli import main
from tests.much_metric.baselines.test_neighbours import word_tokenizer


def _npz(**arrays) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


@pytest.mark.parametrize("damage", [
    lambda data: b"garbage, not an archive",
    lambda data: data[: len(data) // 2],
    lambda data: _npz(keys=np.arange(3), counts=np.arange(2), n=np.array([1, 1])),
    lambda data: _npz(keys=np.array([0.5]), counts=np.array([1]), n=np.array([1, 1])),
    lambda data: _npz(other=np.arange(3)),
], ids=["garbage", "truncated", "shapes", "float keys", "other arrays"])
def test_reduce_over_a_bad_block_is_one_line_naming_the_file(tmp_path, capsys, damage):
    text = tmp_path / "corpus.txt"
    text.write_text("a b c\nb a b\n", encoding="utf-8")
    tokenizer = tmp_path / "tokenizer.json"
    word_tokenizer().save(str(tokenizer))
    argv = ["neighbours", "--tokenizer", str(tokenizer), "--files", str(text), "--out", str(tmp_path / "job"),
            "--no-progress", "--top", "2"]
    assert main(argv) == 0
    capsys.readouterr()
    (block,) = (tmp_path / "job" / "blocks").iterdir()
    assert zipfile.is_zipfile(block)
    block.write_bytes(damage(block.read_bytes()))
    code = main([*argv, "--reduce"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert block.name in err and "not a readable block" in err and "re-run its shard" in err
