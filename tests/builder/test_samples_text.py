"""Issue #54: a sample's text is its tokens decoded, checked wherever the pack's tokenizer is known without a hub
call -- ``check_sample_texts`` after ``load_samples``, ``much run --samples``, a resumed ``builder samples`` -- by
the rule ``builder verify`` applies to generate rows (:mod:`much_dataset.decoded_text`). Where no tokenizer is known
the reader says so instead of passing the texts as checked.

The tokenizer is SmolLM2's packaged one (``much_metric.models.load_tokenizer("smollm2")``, no hub); the fake packs'
texts are written as that tokenizer decodes their tokens, so an untouched pack passes and only an edited text fails.
"""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import pytest

from builder.cli import main
from builder.generation.dtype import run_dtype
from builder.generation.rows import EngineInfo, EngineResult, RowLimits, make_record
from much_dataset.decoded_text import UncheckedTextWarning, text_difference, text_problems
from much_dataset.offline_tokenizers import file_sha256
from much_dataset.samples import SAMPLE_PACK_DIR, SamplesError, check_sample_texts, load_samples
from much_metric.models import load_tokenizer
from tests.builder._samples_fakes import CONFIG, VOCAB, fake_identity, fake_pack, fake_rows, forge

ANSWERS = [{"generation_id": gid, "generation_config": "theirs", "question_id": f"q-{gid}", "lang": "en",
            "wiki_url": f"https://en.wikipedia.org/wiki/{gid}", "prompt": f"question {gid}"} for gid in "abc"]
EDITED = "an edited text"


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer("smollm2")


def _decoded_rows(tokenizer, gid: str, indices: range, prompt: str) -> list[dict]:
    rows = fake_rows(gid, indices, prompt=prompt)
    for row in rows:
        row["output"] = tokenizer.decode(row["output_tokens"], skip_special_tokens=False)
    return rows


def _pack(tmp_path: Path, tokenizer, **kwargs) -> Path:
    pack = tmp_path / "pack"
    fake_pack(pack, [row for a in ANSWERS for row in _decoded_rows(tokenizer, a["generation_id"], range(4),
                                                                   a["prompt"])], **kwargs)
    return pack


def _edit_text(pack: Path, gid: str = "a") -> str:
    """Rewrite sample 0 of ``gid`` with another text, its tokens untouched (a consistent pack otherwise)."""
    def change(rows, target):
        next(r for r in rows if r["generation_id"] == gid and r["sample_index"] == 0)["output"] = EDITED
        return rows, target
    return forge(pack, change, gid=gid)


def test_the_rule_is_the_straightforward_comparison(tokenizer):
    texts = ["abc", "abd", "", "same"]
    decoded = ["abc", "abc", "x", "same"]
    found = text_problems(texts, [[0]] * 4, lambda batch: decoded)
    expected = [(i, text_difference(a, b)) for i, (a, b) in enumerate(zip(texts, decoded, strict=True)) if a != b]
    assert found == expected
    assert "at character 2 ('d' vs 'c')" in found[0][1] and "at character 0 ('' vs 'x')" in found[1][1]


def test_an_untouched_pack_passes_with_its_tokenizer(tmp_path, tokenizer):
    pack = _pack(tmp_path, tokenizer)
    samples = load_samples(pack, dataset=ANSWERS, cache_dir=tmp_path / "cache")
    check_sample_texts(samples, tokenizer, pack=pack)
    assert samples.num_rows == 12


def test_an_edited_text_is_refused_naming_pack_shard_sample_column_and_character(tmp_path, tokenizer):
    pack = _pack(tmp_path, tokenizer)
    shard = _edit_text(pack)
    samples = load_samples(pack, dataset=ANSWERS, cache_dir=tmp_path / "cache")
    with pytest.raises(SamplesError) as raised:
        check_sample_texts(samples, tokenizer, pack=pack)
    said = str(raised.value)
    for words in (str(pack), shard, "generation_id='a'", "sample_index 0", "column 'output'",
                  "differs from the decoded tokens at character 0", repr(EDITED)):
        assert words in said, said


def test_the_reader_says_it_did_not_compare_the_texts(tmp_path, tokenizer):
    pack = _pack(tmp_path, tokenizer)
    _edit_text(pack)
    with pytest.warns(UncheckedTextWarning, match="not compared with their decoded tokens"):
        samples = load_samples(pack, dataset=ANSWERS, cache_dir=tmp_path / "cache")
    assert samples.num_rows == 12


# ----------------------------------------------------------------------------------------------------------------
# much run --samples: the pack's manifest names SmolLM2, whose tokenizer is packaged


def _folder(tmp_path: Path):
    from tests.much_metric.baselines._sampling import sample_split

    split = sample_split()
    for lang in sorted(set(split["lang"])):
        (tmp_path / "data" / lang).mkdir(parents=True)
        split.filter(lambda r, lang=lang: r["lang"] == lang).to_parquet(
            tmp_path / "data" / lang / "test-00000-of-00001.parquet")
    return tmp_path, split["generation_id"][0]


def test_much_run_refuses_a_pack_whose_text_was_edited(tmp_path, capsys):
    from much_metric.cli import main as much

    folder, gid = _folder(tmp_path / "source")
    pack = tmp_path / "pack"
    shutil.copytree(SAMPLE_PACK_DIR, pack)
    shard = _edit_text(pack, gid)
    code = much(["run", "--source", str(folder), "--tokenizer", "smollm2", "--samples", str(pack), "--signals",
                 "sample_rouge1", "--bootstrap", "0", "--no-progress"])
    said = capsys.readouterr()
    assert code == 2, said
    for words in (shard, f"generation_id={gid!r}", "sample_index 0", "column 'output'", "decoded tokens"):
        assert words in said.err, said.err


def test_the_embedded_pack_passes_with_the_tokenizer_its_manifest_names(tmp_path):
    from much_metric.baselines.samples import open_samples

    folder, _ = _folder(tmp_path / "source")
    with warnings.catch_warnings():
        warnings.simplefilter("error", UncheckedTextWarning)  # SmolLM2 is known offline: every text compared
        samples = open_samples("sample")
    assert samples is not None


# ----------------------------------------------------------------------------------------------------------------
# builder samples resumed into a pack with an edited text: the shard is redrawn


class _DecodingEngine:
    """Draws valid samples without a model, their texts decoded by the tokenizer."""

    name, version, dtype = "hf", "0", "float32"
    limits = RowLimits(vocab_size=VOCAB, max_new_tokens=CONFIG.max_new_tokens)

    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer

    def generate(self, questions):
        for question in questions:
            row = _decoded_rows(self.tokenizer, "x", range(1), question["prompt"])[0]
            result = EngineResult(tokens=row["output_tokens"], ids=row["logits_token_ids"],
                                  probs=row["logits_values"], output=row["output"], finished=True)
            yield question, make_record(CONFIG, question, result, engine=EngineInfo("hf", "0"))


def _resume(tmp_path: Path, monkeypatch, tokenizer, *, known: bool) -> tuple[Path, list[str]]:
    source = tmp_path / "answers"
    source.mkdir()
    (source / "generations.jsonl").write_text("".join(json.dumps(a) + "\n" for a in ANSWERS))
    model = source / "generations.jsonl"  # a file: its sha256 is the pack's weights hash, not a tokenizer
    identity = fake_identity(weights=file_sha256(model), dtype=run_dtype("hf", None, None))
    pack = _pack(tmp_path, tokenizer, identity=identity)
    monkeypatch.setattr("builder.samples.make_executed_engine", lambda *a, **k: _DecodingEngine(tokenizer))
    if known:  # the fake model "fake" has no tokenizer: stand SmolLM2's in for it, as a local file would resolve
        monkeypatch.setattr("much_metric.models.local_tokenizer", lambda names: (tokenizer, "smollm2"))
    argv = ["samples", "--source", str(source), "--out", str(pack), "--model", str(model), "--model-name", "fake",
            "--n", "4", "--max-new-tokens", str(CONFIG.max_new_tokens)]
    return pack, argv


def test_a_resume_redraws_a_shard_whose_text_was_edited(tmp_path, monkeypatch, capsys, tokenizer):
    pack, argv = _resume(tmp_path, monkeypatch, tokenizer, known=True)
    assert main(argv) == 0
    assert "12 done, 0 to go" in capsys.readouterr().out
    shard = _edit_text(pack)
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "8 done, 4 to go" in out, out
    [said] = [line for line in out.splitlines() if "does not match its manifest" in line]
    assert shard in said and "column 'output'" in said and "decoded tokens" in said, said
    check_sample_texts(load_samples(pack, dataset=ANSWERS, cache_dir=tmp_path / "cache"), tokenizer, pack=pack)
    assert main(argv) == 0
    assert "12 done, 0 to go" in capsys.readouterr().out


def test_a_resume_without_a_known_tokenizer_says_the_texts_were_not_compared(tmp_path, monkeypatch, capsys,
                                                                            tokenizer):
    pack, argv = _resume(tmp_path, monkeypatch, tokenizer, known=False)
    _edit_text(pack)
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "12 done, 0 to go" in out and "not compared with their decoded tokens" in out, out


def test_verify_and_the_samples_reader_apply_one_rule():
    from builder.verify import row_problems

    row = fake_rows("a", range(1))[0]
    decoded = "a decoded text"
    [problem] = [p for p in row_problems({**row, "output": "a stored text"}, eos_ids=set(), decode=lambda t: decoded)
                 if p.rule == "output"]
    assert problem.detail == f"output {text_difference('a stored text', decoded)}"
    assert text_problems(["a stored text"], [row["output_tokens"]], lambda batch: [decoded]) == [
        (0, text_difference("a stored text", decoded))]
