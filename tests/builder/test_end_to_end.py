"""End to end on CPU: questions -> generate (SmolLM2, 2 temperatures) -> segment -> labels fixture -> export ->
datasets.load_dataset(folder) -> much_metric.scoring.score.

Labels come from a fixture (two judges that agree except on one generation, an1 on two) until the annotation steps
of builder part 2 are used here; the fixture only needs the JSONL contract of builder/README.md.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from builder import _llm
from builder import segment as segment_step
from builder.cli import main
from builder.configs import GenerationConfig
from builder.store import read_store
from much_dataset import schema
from tests import assets
from tests.builder import _smollm

pytestmark = pytest.mark.slow

MODEL_NAME = "HuggingFaceTB/SmolLM2-135M-Instruct"
MAX_NEW_TOKENS = 24


def _fixture_labels(out, generations, segments):
    """Two judges with deterministic labels (both classes); they disagree on the first generation."""
    chunks = {s[schema.GENERATION_ID]: s[schema.TOKEN_CHUNKS] for s in segments}
    judges = {"gpt-4o": [], "gpt-4.1": []}
    humans = {"an0": [], "an1": []}
    for index, generation in enumerate(generations):
        gid = generation[schema.GENERATION_ID]
        n = len(chunks[gid])
        labels = [(-1 if (index + k) % 3 == 0 else 1) for k in range(n - 1)] + [1]
        judges["gpt-4o"].append({"generation_id": gid, "judge": "gpt-4o", "labels": labels})
        other = [-v for v in labels[:-1]] + [1] if index == 0 and n > 1 else labels
        judges["gpt-4.1"].append({"generation_id": gid, "judge": "gpt-4.1", "labels": other})
        if index in (1, 2):
            for annotator in humans:
                humans[annotator].append({"generation_id": gid, "annotator": annotator, "labels": labels})
    for name, records in judges.items():
        (out / f"labels.{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    for name, records in humans.items():
        (out / f"human.{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


def test_pipeline_end_to_end(tmp_path, monkeypatch):
    import datasets

    from much_metric.scoring import score

    llm = _smollm.smollm2()
    # Load the model once for the whole test, and reuse its tokenizer in `segment` (loading a tokenizer from the
    # GGUF again takes ~15 s; test_segment.py covers that path).
    monkeypatch.setattr(_llm, "load_model", lambda *a, **k: llm)
    monkeypatch.setattr(segment_step, "load_tokenizer", lambda source: llm.tokenizer)
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    out = tmp_path / "out"
    # 2 questions per language.
    source = tmp_path / "mushroom.jsonl"
    picked = []
    for path in assets.mushroom_files():
        picked.extend(list(read_store(path))[:2])
    source.write_text("".join(json.dumps(r) + "\n" for r in picked))
    assert main(["questions", "--out", str(out), "--source", str(source)]) == 0
    gguf = _smollm.gguf_path()
    for temperature in ("1.0", "0.7"):
        assert main(["generate", "--out", str(out), "--model", gguf, "--model-name", MODEL_NAME,
                     "--temperature", temperature, "--max-new-tokens", str(MAX_NEW_TOKENS)]) == 0
    generations = list(read_store(out / "generations.jsonl"))
    assert len(generations) == 16
    config_ids = {GenerationConfig(model_name=MODEL_NAME, temperature=t, max_new_tokens=MAX_NEW_TOKENS).id
                  for t in (1.0, 0.7)}
    assert {g[schema.GENERATION_CONFIG] for g in generations} == config_ids
    assert main(["segment", "--out", str(out)]) == 0  # tokenizer from configs.jsonl's model_source
    segments = list(read_store(out / "segments.jsonl"))
    assert len(segments) == 16
    _fixture_labels(out, generations, segments)
    assert main(["export", "--out", str(out)]) == 0

    rows = {split: list(read_store(out / "rows" / f"{split}.jsonl")) for split in ("train", "test", "trash")}
    assert sum(len(r) for r in rows.values()) == 16
    trash_ids = {r[schema.GENERATION_ID] for r in rows["trash"]}
    assert generations[0][schema.GENERATION_ID] in trash_ids  # judges disagree
    unfinished = {g[schema.GENERATION_ID] for g in generations if not g["finished"]}
    assert unfinished <= trash_ids  # cut at max_new_tokens: no EOS -> trash (docs/reference-behaviour.md#filters)
    kept = rows["train"] + rows["test"]
    assert kept, "every generation was trashed: SmolLM2 answered nothing within the token cap"

    loaded = datasets.load_dataset(str(out / "much"), cache_dir=str(tmp_path / "hf_datasets_cache"))
    assert sum(len(loaded[s]) for s in loaded) == len(kept)
    data = datasets.concatenate_datasets([loaded[s] for s in loaded]).with_format("numpy")
    token_scores = []
    for values, ids, tokens in zip(data[schema.LOGITS_VALUES], data[schema.LOGITS_TOKEN_IDS],
                                   data[schema.OUTPUT_TOKENS], strict=True):
        sampled = np.argmax(ids == np.asarray(tokens)[:, None], axis=1)
        token_scores.append(1.0 - values[np.arange(len(tokens)), sampled])  # token likelihood baseline
    result = score(token_scores, data[schema.TOKEN_CHUNKS], data[schema.LABELS],
                   stopword_mask=data[schema.STOPWORD_MASK])
    assert result.n_samples == len(kept)
    assert result.n_claims == sum(len(r[schema.TOKEN_CHUNKS]) - 1 for r in kept)
    if 0 < result.n_hallucinated < result.n_claims:
        assert 0.0 <= result.roc_auc <= 1.0
