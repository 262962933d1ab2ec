"""segment step: claims equal much-segmenter 0.2.1's on real text and real tokens; stopword mask per token."""

from __future__ import annotations

import json

import pytest

from builder.cli import main
from builder.segment import segment_record
from builder.store import read_store
from much_dataset import schema
from much_dataset.stopwords import EVALUATION_STOPWORDS
from tests import assets
from tests.builder import _smollm


def _generation(tokenizer, text: str, gid: str, config: str = "cfg") -> dict:
    ids = tokenizer.encode(text, add_special_tokens=False) + [tokenizer.eos_token_id]
    return {schema.GENERATION_ID: gid, schema.GENERATION_CONFIG: config,
            schema.OUTPUT: tokenizer.decode(ids, skip_special_tokens=False), schema.OUTPUT_TOKENS: ids}


@pytest.fixture(scope="module")
def smol_tokenizer():
    return assets.smollm2_tokenizer()


@pytest.mark.parametrize("compat", ["0.2.1", "0.3.0"])
def test_claims_match_the_reference_segmenter_on_mushroom_text(smol_tokenizer, compat):
    reference = assets.reference_segmenters()[compat]
    texts = assets.mushroom_outputs()[::12]  # ~50 real outputs, all four languages
    for index, text in enumerate(texts):
        generation = _generation(smol_tokenizer, text, f"g{index}")
        record = segment_record(generation, smol_tokenizer, compat=compat)
        expected = reference(generation[schema.OUTPUT], smol_tokenizer,
                             precomputed_tokens=generation[schema.OUTPUT_TOKENS])
        assert record[schema.TOKEN_CHUNKS] == [list(map(int, chunk)) for chunk in expected], text
        assert record["segmenter"] == compat
        flat = [i for chunk in record[schema.TOKEN_CHUNKS] for i in chunk]
        assert flat == list(range(len(generation[schema.OUTPUT_TOKENS])))


def test_stopword_mask_decodes_each_token_alone(smol_tokenizer):
    generation = _generation(smol_tokenizer, "The capital of France is Paris, and it is big.", "g")
    mask = segment_record(generation, smol_tokenizer)[schema.STOPWORD_MASK]
    decoded = [smol_tokenizer.decode([t]) for t in generation[schema.OUTPUT_TOKENS]]
    assert mask == [d.lower().strip() in EVALUATION_STOPWORDS for d in decoded]
    assert mask[decoded.index(" of")] and not mask[decoded.index(" Paris")]


def test_missing_field_names_the_generation(smol_tokenizer):
    with pytest.raises(ValueError, match=r"generation_id='bad'.*'output_tokens'"):
        segment_record({schema.GENERATION_ID: "bad", schema.OUTPUT: "x"}, smol_tokenizer)


def test_step_is_resumable_and_records_failures(smol_tokenizer, tmp_path):
    gguf = _smollm.gguf_path()
    good = [_generation(smol_tokenizer, text, f"g{i}") for i, text in enumerate(assets.mushroom_outputs()[:3])]
    broken = {**_generation(smol_tokenizer, "Paris.", "broken"), schema.OUTPUT: "Not the tokens' text at all."}
    (tmp_path / "generations.jsonl").write_text("".join(json.dumps(g) + "\n" for g in [*good, broken]))
    (tmp_path / "configs.jsonl").write_text(json.dumps({"generation_config": "cfg", "model_name": "smol",
                                                        "model_source": gguf}) + "\n")
    assert main(["segment", "--out", str(tmp_path)]) == 1  # one failure, recorded, the rest done
    assert main(["segment", "--out", str(tmp_path), "--tokenizer", gguf]) == 1  # retries only the failed one
    stored = list(read_store(tmp_path / "segments.jsonl"))
    assert [r[schema.GENERATION_ID] for r in stored] == ["g0", "g1", "g2"]
    failures = list(read_store(tmp_path / "segments.failures.jsonl"))
    assert {f["generation_id"] for f in failures} == {"broken"}
    assert "characters" in failures[0]["reason"]
