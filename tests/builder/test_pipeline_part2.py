"""End to end, builder part 2: generations -> wiki (fake MediaWiki) -> context (local MiniLM) -> annotate (fake
judges over real HTTP) -> filter -> human (stdin) -> filter -> export -> much_dataset.load -> much_metric.score.

The generations are written by ``fake_servers.write_sample_artifacts`` (real Llama-3 tokens, real segmenter, the
JSONL contract of builder/README.md) rather than sampled with SmolLM2: the steps tested here only read that contract,
and a short SmolLM2 run would end most answers without EOS (trashed by the filter).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from builder import human
from builder.cli import build_parser, main
from builder.store import read_store
from tests import assets
from tests.builder.fake_servers import FakeMediaWiki, FakeOpenAI, default_truth, write_sample_artifacts

pytestmark = pytest.mark.slow


def _gpt41_truth(model, segments):
    labels = default_truth(segments)
    if model.startswith("gpt-4.1"):  # the second judge is stricter about the naming year: a disagreement
        labels = [-1 if "1913" in text else v for text, v in zip(segments, labels, strict=True)]
    return labels


def test_part2_pipeline_end_to_end(tmp_path, monkeypatch):
    from much_dataset.loader import load
    from much_metric.baselines.methods.probability import token_likelihood
    from much_metric.scoring import score

    out = tmp_path
    tokenizer_json = str(assets.llama3_tokenizer_json())
    generations = write_sample_artifacts(out, assets.llama3_tokenizer())
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")

    with FakeMediaWiki() as wiki_server:
        assert main(["wiki", "--out", str(out), "--api", wiki_server.api_template, "--min-interval", "0"]) == 0
    statuses = {r["wiki_url"].rsplit("/", 1)[1]: r["status"] for r in read_store(out / "wiki.jsonl")}
    assert statuses == {"Canberra": "ok", "Curie": "redirected", "Paris": "ok", "Mercury": "disambiguation"}

    assert main(["context", "--out", str(out), "--embeddings", "local"]) == 0
    contexts = {r["generation_id"]: r for r in read_store(out / "context.jsonl")}
    assert len(contexts) == len(generations) and contexts["gen06"]["chunks"] == []
    assert "Warsaw" in " ".join(contexts["gen02"]["chunks"])

    with FakeOpenAI(truth=_gpt41_truth) as judge_server:
        rc = main(["annotate", "--out", str(out), "--base-url", judge_server.base_url, "--tokenizer", tokenizer_json,
                   "--backoff", "0"])
        prompts = [b["messages"][1]["content"] for b in judge_server.chat_requests()]
    assert rc == 1  # gen06 (disambiguation page, no reference knowledge) is recorded as a failure for both judges
    assert any("Canberra is the capital city of Australia" in p and '"established": "12 March 1913"' in p
               for p in prompts)

    assert main(["filter", "--out", str(out)]) == 0
    report = json.loads((out / "filter.report.json").read_text())
    assert report["trash"] == {"no_eos": 1, "outside_top_k": 1, "missing_labels": 1, "judge_disagreement": 1}
    assert report["kept"] == 3 and report["kappa"]["claims"] > 10

    # an1 labels one English sample through the terminal tool -> it moves to the test split
    args = build_parser().parse_args(["human", "--out", str(out), "--annotator", "an1", "--lang", "en", "--size", "1",
                                      "--tokenizer", tokenizer_json])
    chunks = {r["generation_id"]: r["token_chunks"] for r in read_store(out / "segments.jsonl")}
    kept = {r["generation_id"] for r in read_store(out / "filter.jsonl") if r["split"] != "trash"}
    english = [g["generation_id"] for g in generations if g["lang"] == "en"]
    chosen = human.draw_annotation_sample(english, kept.__contains__, 1)[0]
    answers = iter(["1"] * (len(chunks[chosen]) - 1) + [""])
    assert human.run(args, input_fn=lambda prompt: next(answers), print_fn=lambda text: None) == 0
    assert main(["filter", "--out", str(out)]) == 0
    splits = {r["generation_id"]: r["split"] for r in read_store(out / "filter.jsonl")}
    assert splits[chosen] == "test" and sum(s == "train" for s in splits.values()) == 2

    assert main(["agreement", "--out", str(out), "--annotators", "gpt-4o", "gpt-4.1", "an1"]) == 0

    assert main(["export", "--out", str(out)]) == 0
    dataset = load(str(out / "much"))
    assert dataset["train"].num_rows == 2 and dataset["test"].num_rows == 1
    train = dataset["train"]
    labels = train["labels"]
    assert any(-1 in row[:-1] for row in labels)  # the "Sydney" claim is hallucinated
    scores = token_likelihood(train)
    result = score(scores, train["token_chunks"], labels, aggregation="max")
    assert result.n_samples == 2 and result.n_hallucinated >= 1
    assert 0.0 <= result.roc_auc <= 1.0 and np.isfinite(result.roc_auc)
